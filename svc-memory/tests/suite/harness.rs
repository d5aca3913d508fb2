//! Starts the real binary on a temp home and hands back connected clients; kills the
//! process on drop. Every await on the other process has a timeout.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use snowpea_common::context::CallContext;
use snowpea_proto::error::RpcError;
use snowpea_proto::memory::v1::memory_service_client::MemoryServiceClient;
use snowpea_proto::memory::v1::site_service_client::SiteServiceClient;
use snowpea_testkit::ServiceProcess;
use tonic::transport::Channel;

/// Deadline of one call in tests.
pub const CALL: Duration = Duration::from_secs(10);

/// A running `snowpea-svc-memory` (the kit's [`ServiceProcess`]) on its own temp home.
pub struct Svc {
    process: ServiceProcess,
    /// The temp home, kept alive while the test runs (dropped after the process).
    _home: tempfile::TempDir,
}

impl Svc {
    /// Starts the service on a fresh temp home and waits until it is SERVING.
    pub async fn start() -> Svc {
        let home = tempfile::tempdir().unwrap();
        let process = ServiceProcess::new(
            "memory",
            env!("CARGO_BIN_EXE_snowpea-svc-memory"),
            home.path(),
        )
        .env("SNOWPEA_LOG", "warn")
        .start()
        .await;
        Svc {
            process,
            _home: home,
        }
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        self.process.socket()
    }

    /// SIGKILLs the process (kill -9) and starts it again on the same home.
    pub async fn restart(&mut self) {
        self.process.restart().await;
    }

    /// A fresh channel (a new connection, so a restart is not hidden by an old one).
    pub fn channel(&self) -> Channel {
        self.process.channel()
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
    snowpea_testkit::within(CALL, "call to svc-memory", f)
        .await
        .map(tonic::Response::into_inner)
        .map_err(|s| RpcError::from_status(&s))
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
