//! The control socket `run/supervisor.sock` (DESIGN.md §5): the gRPC
//! `snowpea.supervisor.v1.Supervisor` service (Status, Restart, Stop) used by
//! `snowpea supervisor status|restart|stop` and the gateway's `system.info`,
//! `system.shutdown` and `system.restart`. Each call becomes a [`ControlRequest`] handled
//! by the supervisor's event loop ([`crate::supervise`]); this module only translates.
//! It also holds the client side used by the CLI.

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use snowpea_common::home::Home;
use snowpea_proto::supervisor::v1::supervisor_client::SupervisorClient;
use snowpea_proto::supervisor::v1::supervisor_server::{Supervisor, SupervisorServer};
use snowpea_proto::supervisor::v1::{
    RestartReply, RestartRequest, StatusReply, StopReply, StopRequest,
};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// How long a control call waits for the event loop.
const LOOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A control call, answered by the event loop through `reply`.
#[derive(Debug)]
pub enum ControlRequest {
    /// `Status`.
    Status {
        /// Where the state goes.
        reply: oneshot::Sender<StatusReply>,
    },
    /// `Restart{name}`.
    Restart {
        /// Process name or `all`.
        name: String,
        /// `Ok` once the restart started; `NotFound` for an unknown name,
        /// `FailedPrecondition` while the suite starts or stops.
        reply: oneshot::Sender<Result<(), Status>>,
    },
    /// `Stop{reason}`: answered first, then the suite stops.
    Stop {
        /// Logged reason.
        reason: String,
        /// Acknowledged before stopping.
        reply: oneshot::Sender<()>,
    },
}

/// The tonic service: forwards each call to the event loop.
#[derive(Debug, Clone)]
pub struct ControlService {
    tx: mpsc::UnboundedSender<ControlRequest>,
}

impl ControlService {
    /// A service forwarding to `tx`.
    pub fn new(tx: mpsc::UnboundedSender<ControlRequest>) -> Self {
        ControlService { tx }
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> ControlRequest,
    ) -> Result<T, Status> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(make(reply))
            .map_err(|_| Status::unavailable("supervisor is shutting down"))?;
        match tokio::time::timeout(LOOP_TIMEOUT, rx).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(Status::unavailable("supervisor is shutting down")),
            Err(_) => Err(Status::deadline_exceeded("supervisor did not answer")),
        }
    }
}

#[tonic::async_trait]
impl Supervisor for ControlService {
    async fn status(&self, _: Request<()>) -> Result<Response<StatusReply>, Status> {
        self.ask(|reply| ControlRequest::Status { reply })
            .await
            .map(Response::new)
    }

    async fn restart(
        &self,
        request: Request<RestartRequest>,
    ) -> Result<Response<RestartReply>, Status> {
        let name = request.into_inner().name;
        self.ask(|reply| ControlRequest::Restart { name, reply })
            .await??;
        Ok(Response::new(RestartReply { ok: true }))
    }

    async fn stop(&self, request: Request<StopRequest>) -> Result<Response<StopReply>, Status> {
        let reason = request.into_inner().reason;
        self.ask(|reply| ControlRequest::Stop { reason, reply })
            .await?;
        Ok(Response::new(StopReply { ok: true }))
    }
}

/// Binds the control socket at `path` with mode 0600 (the caller removed a stale one).
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    let listener = UnixListener::bind(path).with_context(|| format!("bind {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("chmod 0600 {}", path.display()))?;
    Ok(listener)
}

/// Serves the control service on `listener` until `shutdown` resolves; in-flight calls
/// (such as the `Stop` that caused the shutdown) are answered first.
pub async fn serve(
    listener: UnixListener,
    tx: mpsc::UnboundedSender<ControlRequest>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let routes = snowpea_common::service::Services::new()
        .add_service(SupervisorServer::new(ControlService::new(tx)))
        .into_routes()
        .await?;
    tonic::transport::Server::builder()
        .add_routes(routes)
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await
        .context("control socket server")
}

/// A client of the control socket of `home` (connects lazily).
pub fn client(home: &Home) -> SupervisorClient<Channel> {
    SupervisorClient::new(snowpea_common::client::unix_channel(
        home.supervisor_socket(),
    ))
}

/// The supervisor's status, or `None` when nothing answers on the control socket.
pub async fn status(home: &Home) -> Option<StatusReply> {
    if !home.supervisor_socket().exists() {
        return None;
    }
    let mut c = client(home);
    match tokio::time::timeout(Duration::from_secs(3), c.status(())).await {
        Ok(Ok(r)) => Some(r.into_inner()),
        _ => None,
    }
}
