//! Starts the real binary on a temp home and hands back connected clients; kills the
//! process on drop. Every await on the other process has a timeout.

use std::future::Future;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use snowpea_common::context::CallContext;
use snowpea_proto::error::RpcError;
use snowpea_proto::memory::v1::memory_service_client::MemoryServiceClient;
use snowpea_proto::memory::v1::site_service_client::SiteServiceClient;
use tonic::transport::Channel;

/// Deadline of one call in tests.
pub const CALL: Duration = Duration::from_secs(10);

/// A running `snowpea-svc-memory`.
pub struct Svc {
    /// The temp home (kept alive while the test runs).
    pub home: tempfile::TempDir,
    child: Option<Child>,
}

impl Svc {
    /// Starts the service on a fresh temp home and waits until it is SERVING.
    pub async fn start() -> Svc {
        let home = tempfile::tempdir().unwrap();
        let mut svc = Svc { home, child: None };
        svc.spawn().await;
        svc
    }

    /// The socket path.
    pub fn socket(&self) -> PathBuf {
        self.home.path().join("run").join("memory.sock")
    }

    async fn spawn(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_snowpea-svc-memory"))
            .arg("--home")
            .arg(self.home.path())
            .arg("--socket")
            .arg(self.socket())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn snowpea-svc-memory");
        self.child = Some(child);
        // Bounded wait for readiness (the health check itself has a timeout).
        for _ in 0..200 {
            if snowpea_common::client::is_serving(self.socket(), "", Duration::from_millis(200))
                .await
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("svc-memory did not report SERVING within 10 s");
    }

    /// SIGKILLs the process (kill -9) and waits for it to die.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("SIGKILL");
            c.wait().expect("reap");
        }
    }

    /// Starts the process again on the same home.
    pub async fn restart(&mut self) {
        self.kill9();
        self.spawn().await;
    }

    /// A fresh channel (a new connection, so a restart is not hidden by an old one).
    pub fn channel(&self) -> Channel {
        snowpea_common::client::unix_channel(self.socket())
    }

    /// A MemoryService client.
    pub fn memory(&self) -> MemoryServiceClient<Channel> {
        MemoryServiceClient::new(self.channel())
    }

    /// A SiteService client.
    pub fn site(&self) -> SiteServiceClient<Channel> {
        SiteServiceClient::new(self.channel())
    }
}

impl Drop for Svc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A request carrying the connection context of a client.
pub fn as_client<T>(msg: T, kind: &str, client_id: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    CallContext {
        connection_id: Some(format!("conn-{client_id}")),
        client_id: Some(client_id.to_owned()),
        client_kind: Some(kind.to_owned()),
        instance_id: None,
    }
    .apply(req.metadata_mut());
    req
}

/// A request from the browser profile `profile`.
pub fn as_browser<T>(msg: T, profile: &str) -> tonic::Request<T> {
    as_client(msg, "browser", profile)
}

/// Awaits `f` with the call deadline; panics on timeout.
pub async fn call<T>(
    f: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, RpcError> {
    match tokio::time::timeout(CALL, f).await {
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(s)) => Err(RpcError::from_status(&s)),
        Err(_) => panic!("call timed out after {CALL:?}"),
    }
}

/// Asserts `r` is `invalid_params` naming `field`.
#[track_caller]
pub fn assert_invalid<T: std::fmt::Debug>(r: Result<T, RpcError>, field: &str) {
    match r {
        Err(e) => {
            assert_eq!(e.code.wire(), "invalid_params", "{e:?}");
            assert_eq!(
                e.details.as_ref().and_then(|d| d["field"].as_str()),
                Some(field),
                "{e:?}"
            );
        }
        Ok(v) => panic!("expected invalid_params naming {field}, got {v:?}"),
    }
}

/// Asserts `r` failed with the protocol code `code`.
#[track_caller]
pub fn assert_code<T: std::fmt::Debug>(r: Result<T, RpcError>, code: &str) {
    match r {
        Err(e) => assert_eq!(e.code.wire(), code, "{e:?}"),
        Ok(v) => panic!("expected {code}, got {v:?}"),
    }
}
