//! The loop that reads the upstream event channel and delivers each event.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::fan_out::fan_out;
use super::requests::ServerRequests;
use crate::upstream::subscribe::UpstreamEvent;
use crate::wire::connection::{CLOSE_POLICY, QUEUE_FULL_REASON};
use crate::wire::counters::Counters;
use crate::wire::registry::Registry;

/// Delivers every event until the channel closes (every Subscribe loop ended).
pub async fn run(
    mut events: mpsc::Receiver<UpstreamEvent>,
    connections: Arc<Registry>,
    counters: Arc<Counters>,
    requests: Arc<ServerRequests>,
) {
    while let Some(event) = events.recv().await {
        match event {
            UpstreamEvent::Notification {
                service,
                notification,
            } => fan_out(&connections, &counters, &service, notification),
            UpstreamEvent::Request { service, request } => requests.deliver(&service, request),
            // Notifications were lost upstream: never a silent gap (DESIGN.md §4) — every
            // client is closed with the overflow reason and resumes from durable events.
            UpstreamEvent::Lagged { service } => {
                tracing::warn!(%service, "closing every client after a lagged service feed");
                connections.for_each_authenticated(|c| {
                    c.close(CLOSE_POLICY, QUEUE_FULL_REASON);
                });
            }
        }
    }
}
