//! An in-process fake svc-session on `run/session.sock`: a few SessionService methods,
//! ToolService.Progress (a client notification) and the real `BusHub`/`BusService`,
//! wrapped to report when the gateway subscribes.
//!
//! * `session.list` answers one session whose `workdir` is the caller's connection id
//!   and `title` its clientId (proves the call context arrives as metadata);
//! * `session.rename` fails `not_found` with details;
//! * `session.close` waits `<n>` ms when the session id is `slow-<n>` (out-of-order replies);
//! * `session.resume` answers [`RESUME_EVENTS`] events (a result far above tonic's 4 MiB
//!   default: big results travel, issue 24 §2);
//! * everything else is the generated default: gRPC Unimplemented;
//! * `ServiceBus.CallStats` reports the list/rename calls it answered ([`FakeService::calls`]
//!   also keeps the request id each carried).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use snowpea_common::bus::{BusHub, BusService, OutboundStream};
use snowpea_common::context::CallContext;
use snowpea_common::home::Home;
use snowpea_proto::error::RpcError;
use snowpea_proto::rpc::v1::service_bus_server::{ServiceBus, ServiceBusServer};
use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::rpc::v1::{
    CallStatsReply, CapabilitiesReply, ClientReply, ConnectionSet, MethodCallStats,
    SubscribeRequest,
};
use snowpea_proto::session::v1::session_service_server::{SessionService, SessionServiceServer};
use snowpea_proto::session::v1::tool_service_server::{ToolService, ToolServiceServer};
use snowpea_proto::session::v1::SessionSummary;
use snowpea_proto::session::v1::{
    SessionCloseParams, SessionListParams, SessionListResult, SessionRenameParams,
    SessionResumeParams, SessionResumeResult, ToolProgressParams,
};
use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use super::harness::T;

/// One call the fake answered.
#[derive(Debug, Clone)]
pub struct Answered {
    /// JSON-RPC method.
    pub method: &'static str,
    /// The protocol error code it answered with, if any.
    pub error: Option<&'static str>,
    /// The `snowpea-request-id` metadata it carried.
    pub request_id: Option<String>,
    /// How long the handler took.
    pub elapsed: Duration,
}

type Calls = Arc<Mutex<Vec<Answered>>>;

fn record<T>(
    calls: &Calls,
    method: &'static str,
    req: &Request<T>,
    started: Instant,
    error: Option<&'static str>,
) {
    let request_id = req
        .metadata()
        .get(snowpea_common::context::REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    calls.lock().unwrap().push(Answered {
        method,
        error,
        request_id,
        elapsed: started.elapsed(),
    });
}

/// Events of every `session.resume` answer.
pub const RESUME_EVENTS: usize = 100_000;

struct FakeSession {
    calls: Calls,
}

#[tonic::async_trait]
impl SessionService for FakeSession {
    async fn list(
        &self,
        req: Request<SessionListParams>,
    ) -> Result<Response<SessionListResult>, Status> {
        let started = Instant::now();
        let ctx = CallContext::of(&req);
        record(&self.calls, "session.list", &req, started, None);
        Ok(Response::new(SessionListResult {
            sessions: vec![SessionSummary {
                session_id: "s1".into(),
                workdir: ctx.connection_id.unwrap_or_default(),
                title: ctx.client_id,
                mode: "plan".into(),
                created_at: "2026-01-01T00:00:00Z".into(),
                context_used: 42,
                ..Default::default()
            }],
        }))
    }

    async fn rename(
        &self,
        req: Request<SessionRenameParams>,
    ) -> Result<Response<OkResult>, Status> {
        let started = Instant::now();
        record(
            &self.calls,
            "session.rename",
            &req,
            started,
            Some("not_found"),
        );
        let id = req.into_inner().session_id;
        Err(RpcError::not_found(format!("no session {id}"))
            .with_details(json!({"sessionId": id}))
            .into_status())
    }

    async fn close(&self, req: Request<SessionCloseParams>) -> Result<Response<OkResult>, Status> {
        let id = req.into_inner().session_id;
        if let Some(ms) = id.strip_prefix("slow-").and_then(|n| n.parse().ok()) {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Ok(Response::new(OkResult { ok: true }))
    }

    async fn resume(
        &self,
        req: Request<SessionResumeParams>,
    ) -> Result<Response<SessionResumeResult>, Status> {
        let id = req.into_inner().session_id;
        let events = (0..RESUME_EVENTS)
            .map(|seq| snowpea_proto::session::v1::SessionEvent {
                kind: "message.delta".into(),
                seq: seq as i64 + 1,
                session_id: id.clone(),
                ts: "2026-01-01T00:00:00.000Z".into(),
                ..Default::default()
            })
            .collect();
        Ok(Response::new(SessionResumeResult {
            events,
            ..Default::default()
        }))
    }
}

struct Tools {
    progress: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl ToolService for Tools {
    async fn progress(&self, req: Request<ToolProgressParams>) -> Result<Response<()>, Status> {
        self.progress.lock().unwrap().push(req.into_inner().call_id);
        Ok(Response::new(()))
    }
}

/// `BusService` plus a count of Subscribe calls and CallStats from the calls answered.
struct Bus {
    inner: BusService,
    subscribed: watch::Sender<u32>,
    calls: Calls,
}

#[tonic::async_trait]
impl ServiceBus for Bus {
    async fn subscribe(
        &self,
        req: Request<SubscribeRequest>,
    ) -> Result<Response<OutboundStream>, Status> {
        let r = ServiceBus::subscribe(&self.inner, req).await;
        self.subscribed.send_modify(|n| *n += 1);
        r
    }
    async fn reply(&self, req: Request<ClientReply>) -> Result<Response<()>, Status> {
        ServiceBus::reply(&self.inner, req).await
    }
    async fn sync_connections(&self, req: Request<ConnectionSet>) -> Result<Response<()>, Status> {
        ServiceBus::sync_connections(&self.inner, req).await
    }
    async fn capabilities(&self, req: Request<()>) -> Result<Response<CapabilitiesReply>, Status> {
        ServiceBus::capabilities(&self.inner, req).await
    }
    async fn call_stats(&self, _req: Request<()>) -> Result<Response<CallStatsReply>, Status> {
        let mut by_method: BTreeMap<&str, Vec<Answered>> = BTreeMap::new();
        for a in self.calls.lock().unwrap().iter() {
            by_method.entry(a.method).or_default().push(a.clone());
        }
        let methods = by_method
            .into_iter()
            .map(|(method, calls)| {
                let mut us: Vec<u64> = calls.iter().map(|a| a.elapsed.as_micros() as u64).collect();
                us.sort_unstable();
                let at = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize];
                let mut errors = std::collections::HashMap::new();
                for code in calls.iter().filter_map(|a| a.error) {
                    *errors.entry(code.to_owned()).or_insert(0) += 1;
                }
                MethodCallStats {
                    method: method.to_owned(),
                    count: calls.len() as u64,
                    errors,
                    p50_us: at(0.5),
                    p99_us: at(0.99),
                }
            })
            .collect();
        Ok(Response::new(CallStatsReply {
            service: "session".into(),
            methods,
        }))
    }
}

/// The running fake, on a runtime of its own so that [`FakeService::kill`] (or drop)
/// ends it abruptly — every connection and stream gone at once, like a crash.
pub struct FakeService {
    pub hub: Arc<BusHub>,
    pub progress: Arc<Mutex<Vec<String>>>,
    /// The session.list/session.rename calls answered, in order.
    pub calls: Arc<Mutex<Vec<Answered>>>,
    subscribed: watch::Receiver<u32>,
    runtime: Option<tokio::runtime::Runtime>,
    socket: std::path::PathBuf,
}

impl FakeService {
    /// Binds `run/session.sock` (before returning) and serves it.
    pub fn start(home: &Home) -> FakeService {
        let socket = home.socket("session");
        let _ = std::fs::remove_file(&socket);
        let std_listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind fake");
        std_listener.set_nonblocking(true).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("fake runtime");
        let listener = {
            let _in = runtime.enter();
            tokio::net::UnixListener::from_std(std_listener).unwrap()
        };
        let hub = BusHub::new();
        hub.set_capabilities(&["sessions", "approvals"]);
        let progress = Arc::new(Mutex::new(Vec::new()));
        let (tx, subscribed) = watch::channel(0);
        let calls = Calls::default();
        let bus = Bus {
            inner: BusService::new(hub.clone()),
            subscribed: tx,
            calls: calls.clone(),
        };
        let server = tonic::transport::Server::builder()
            .add_service(
                SessionServiceServer::new(FakeSession {
                    calls: calls.clone(),
                })
                .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
                .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE),
            )
            .add_service(ToolServiceServer::new(Tools {
                progress: progress.clone(),
            }))
            .add_service(ServiceBusServer::new(bus))
            .serve_with_incoming(UnixListenerStream::new(listener));
        runtime.spawn(async move {
            let _ = server.await;
        });
        FakeService {
            hub,
            progress,
            calls,
            subscribed,
            runtime: Some(runtime),
            socket,
        }
    }

    /// Waits until the gateway has subscribed at least `n` times.
    pub async fn wait_subscribed(&mut self, n: u32) {
        tokio::time::timeout(T, self.subscribed.wait_for(|c| *c >= n))
            .await
            .expect("gateway did not subscribe in time")
            .expect("fake alive");
    }

    /// Stops serving at once, dropping every connection (a crash, as the gateway sees it).
    pub fn kill(self) {}
}

impl Drop for FakeService {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}
