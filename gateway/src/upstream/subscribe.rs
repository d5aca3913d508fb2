//! One `ServiceBus.Subscribe` loop per service (DESIGN.md §4): every item of the bus
//! stream becomes an [`UpstreamEvent`] on the gateway's event channel (the callbacks
//! layer delivers it), and every time the loop (re)subscribes — the service may have
//! restarted — it sends the full set of live connections and refreshes the capabilities.

use std::sync::Arc;
use std::time::Duration;

use snowpea_proto::rpc::v1::{outbound, BusClientRequest, BusNotification, SubscribeRequest};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::bus::{refresh_capabilities, BUS_CALL_TIMEOUT};
use super::presence::{send_full_set, Live};
use super::services::{Service, Services};

/// Waits between Subscribe attempts on a service that is down, doubling from 2 ms to at
/// most 4 ms: short, so a service starting with the gateway (issue 14) or restarting is
/// subscribed — and its capabilities known — within a few ms of its bind (with a 25 ms
/// ceiling, up to 25 ms late). An attempt is one failed unix `connect(2)` (microseconds),
/// so a service that stays down costs ≈ 250 cheap syscalls a second.
const MIN_BACKOFF: Duration = Duration::from_millis(2);
const MAX_BACKOFF: Duration = Duration::from_millis(4);

/// What a service wants delivered to clients.
#[derive(Debug)]
pub enum UpstreamEvent {
    /// A notification for its connections (none named = every authenticated one).
    Notification {
        /// The service that sent it.
        service: String,
        /// What it sent.
        notification: BusNotification,
    },
    /// A server→client request for one connection.
    Request {
        /// The service that asks (gets the answer through `ServiceBus.Reply`).
        service: String,
        /// What it asks.
        request: BusClientRequest,
    },
    /// The service cut this gateway off because its outbound queue was full
    /// (`DATA_LOSS`, [`snowpea_common::bus::LAGGED_MESSAGE`]): notifications after the
    /// events already delivered were lost, so clients must re-read the durable events.
    Lagged {
        /// The service that cut the feed.
        service: String,
    },
}

/// What every Subscribe loop shares.
#[derive(Debug, Clone)]
pub struct Subscriber {
    /// Subscribe's `gateway_id`: the random id of this gateway process.
    pub gateway_id: String,
    /// The live connections, sent in full on each (re)subscription.
    pub live: Arc<Live>,
    /// Where the events go.
    pub events: mpsc::Sender<UpstreamEvent>,
    /// Ends every loop.
    pub shutdown: CancellationToken,
}

impl Subscriber {
    /// Starts one Subscribe loop per service.
    pub fn spawn_all(&self, services: &Services) {
        for svc in services.iter() {
            tokio::spawn(self.clone().subscribe_loop(svc.clone()));
        }
    }

    async fn subscribe_loop(self, svc: Arc<Service>) {
        let mut backoff = MIN_BACKOFF;
        let mut reported_down = false;
        loop {
            let mut client = super::bus::client(&svc);
            let request = SubscribeRequest {
                gateway_id: self.gateway_id.clone(),
            };
            let started = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                r = tokio::time::timeout(BUS_CALL_TIMEOUT, client.subscribe(request)) => r,
            };
            match started {
                Ok(Ok(response)) => {
                    tracing::info!(service = %svc.name, "subscribed to service bus");
                    reported_down = false;
                    backoff = MIN_BACKOFF;
                    let mut stream = response.into_inner();
                    send_full_set(&svc, &self.live).await;
                    refresh_capabilities(&svc).await;
                    loop {
                        let item = tokio::select! {
                            _ = self.shutdown.cancelled() => return,
                            m = stream.message() => m,
                        };
                        match item {
                            Ok(Some(item)) => {
                                if !self.forward(&svc, item.item).await {
                                    return;
                                }
                            }
                            Ok(None) => {
                                tracing::info!(service = %svc.name, "service bus stream ended; re-subscribing");
                                break;
                            }
                            Err(e) if e.code() == tonic::Code::DataLoss => {
                                tracing::warn!(service = %svc.name, error = %e.message(), "service bus feed lagged; closing clients so they resume, re-subscribing");
                                let lagged = UpstreamEvent::Lagged {
                                    service: svc.name.clone(),
                                };
                                if !self.send(lagged).await {
                                    return;
                                }
                                break;
                            }
                            Err(e) => {
                                tracing::info!(service = %svc.name, error = %e.message(), "service bus stream failed; re-subscribing");
                                break;
                            }
                        }
                    }
                }
                Ok(Err(e)) if !reported_down => {
                    tracing::info!(service = %svc.name, error = %e.message(), "service bus not reachable yet; retrying");
                    reported_down = true;
                }
                Err(_) if !reported_down => {
                    tracing::info!(service = %svc.name, "service bus subscribe timed out; retrying");
                    reported_down = true;
                }
                _ => {}
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Puts one bus item on the event channel; false once the gateway stops.
    async fn forward(&self, svc: &Service, item: Option<outbound::Item>) -> bool {
        let service = svc.name.clone();
        let event = match item {
            Some(outbound::Item::Notification(notification)) => UpstreamEvent::Notification {
                service,
                notification,
            },
            Some(outbound::Item::Request(request)) => UpstreamEvent::Request { service, request },
            None => return true,
        };
        self.send(event).await
    }

    /// Puts one event on the event channel; false once the gateway stops.
    async fn send(&self, event: UpstreamEvent) -> bool {
        tokio::select! {
            _ = self.shutdown.cancelled() => false,
            sent = self.events.send(event) => sent.is_ok(),
        }
    }
}
