//! Service bootstrap (DESIGN.md §6, STYLE.md "Processes"): every
//! `snowpea-svc-<name> --home DIR --socket PATH` binds its unix socket (mode 0600),
//! serves its gRPC services next to `grpc.health.v1` and server reflection (v1 and
//! v1alpha, so `grpcurl -unix` works), reports SERVING once it accepts calls, and drains
//! on SIGTERM/SIGINT with a deadline.

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_health::ServingStatus;

/// Command-line arguments shared by every service binary.
#[derive(Debug, Clone)]
pub struct ServiceArgs {
    /// `--home DIR`: the Snowpea home.
    pub home: crate::home::Home,
    /// `--socket PATH`: the unix socket to serve on (default `run/<name>.sock`).
    pub socket: PathBuf,
}

impl ServiceArgs {
    /// Parses `--home DIR --socket PATH` (both optional; home falls back to
    /// `SNOWPEA_HOME`/`~/.snowpea`, socket to `run/<service>.sock`). Exits with code 2 and
    /// a usage line on bad arguments, and prints usage for `--help`.
    pub fn parse(service: &str) -> ServiceArgs {
        let mut home = None;
        let mut socket = None;
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--home" => home = args.next().map(PathBuf::from),
                "--socket" => socket = args.next().map(PathBuf::from),
                "--help" | "-h" => {
                    println!(
                        "snowpea-svc-{service} --home DIR --socket PATH\n\n\
                         Serves snowpea.{service}.v1 over gRPC on the unix socket (default \
                         DIR/run/{service}.sock) with grpc.health.v1 and reflection.\n\
                         Logs to stderr (the supervisor writes DIR/logs/{service}.log).\n\
                         Exit codes: 0 after SIGTERM/SIGINT, 1 on a start-up failure, 2 on bad arguments."
                    );
                    std::process::exit(0);
                }
                other => {
                    eprintln!("snowpea-svc-{service}: unexpected argument {other:?}\nusage: snowpea-svc-{service} --home DIR --socket PATH");
                    std::process::exit(2);
                }
            }
        }
        let home = match crate::home::Home::resolve(home.as_deref()) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("snowpea-svc-{service}: {e:#}");
                std::process::exit(2);
            }
        };
        let socket = socket.unwrap_or_else(|| home.socket(service));
        ServiceArgs { home, socket }
    }
}

/// Cancelled when this process starts draining (shutdown requested or SIGTERM/SIGINT).
/// Long-lived server streams (the bus `Subscribe` feed) end on it, so a drain does not
/// wait for them until the deadline.
pub fn draining() -> &'static tokio_util::sync::CancellationToken {
    static TOKEN: std::sync::OnceLock<tokio_util::sync::CancellationToken> =
        std::sync::OnceLock::new();
    TOKEN.get_or_init(tokio_util::sync::CancellationToken::new)
}

/// Installs SIGTERM and SIGINT handlers at once and returns a future that resolves when
/// the process receives either.
///
/// The handlers are in place when this returns, not at the future's first poll: a signal
/// that arrives between binding a socket and the first poll (a busy 2-core machine can
/// leave a spawned task unpolled for a long time) then drains the process instead of
/// killing it with the default disposition — which would drop WebSockets without their
/// 1001 close frame and calls in flight. Must be called inside a Tokio runtime.
pub fn termination_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received, draining"),
            _ = int.recv() => tracing::info!("SIGINT received, draining"),
        }
    }
}

/// The gRPC services one process serves. Each [`Services::add_service`] both routes a generated
/// server and records its fully qualified name (`NamedService::NAME`, e.g.
/// `snowpea.session.v1.SessionService`), which [`serve`] hands to health and reflection —
/// so the list of services lives only in the `add_service` calls (issue 13 §5), never in a
/// hand-kept name list beside them.
#[derive(Default)]
pub struct Services {
    routes: Routes,
    names: Vec<&'static str>,
}

impl Services {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one generated tonic server (`XServer::new(impl)`).
    pub fn add_service<S>(mut self, svc: S) -> Self
    where
        S: tower::Service<
                http::Request<tonic::body::Body>,
                Response = http::Response<tonic::body::Body>,
                Error = std::convert::Infallible,
            > + tonic::server::NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        self.names.push(S::NAME);
        self.routes = self.routes.add_service(svc);
        self
    }

    /// The fully qualified names of the added services, in the order added.
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// The routes with `grpc.health.v1` and reflection added for every service (see
    /// [`with_health_and_reflection`]).
    pub async fn into_routes(self) -> anyhow::Result<Routes> {
        with_health_and_reflection(self.routes, &self.names).await
    }
}

/// Adds `grpc.health.v1` (reporting SERVING for each of `services` and for the overall
/// status `""`) and server reflection v1 + v1alpha (listing `services` and the health
/// service) to `routes`, so `grpcurl -unix` can list, describe and call them.
pub async fn with_health_and_reflection(
    routes: Routes,
    services: &[&str],
) -> anyhow::Result<Routes> {
    let (reporter, health) = tonic_health::server::health_reporter();
    let mut names: Vec<String> = services.iter().map(|s| (*s).to_owned()).collect();
    names.push("grpc.health.v1.Health".to_owned());
    let v1 = {
        let names = names.clone();
        reflection::Lazy::new(move || {
            reflection_builder(&names)
                .build_v1()
                .expect("the embedded descriptor sets decode")
        })
    };
    let v1alpha = reflection::Lazy::new(move || {
        reflection_builder(&names)
            .build_v1alpha()
            .expect("the embedded descriptor sets decode")
    });
    let routes = routes
        .add_service(health)
        .add_service(v1)
        .add_service(v1alpha);
    for s in services {
        reporter
            .set_service_status(*s, ServingStatus::Serving)
            .await;
    }
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    Ok(routes)
}

/// The reflection builder with the protocol's and the health service's descriptors,
/// listing the services `names`.
fn reflection_builder(names: &[String]) -> tonic_reflection::server::Builder<'static> {
    names.iter().fold(
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(snowpea_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET),
        |b, n| b.with_service_name(n.clone()),
    )
}

/// Server reflection built on its first call.
///
/// Building a reflection server decodes the whole descriptor set with its comments (twice:
/// v1 and v1alpha); done at start, that left ≈ 1–4 MB of heap in every service for a
/// service only `grpcurl` calls (issue 14 "Memory"). [`Lazy`] builds it when the first
/// reflection request arrives, then serves every request with it.
mod reflection {
    use std::convert::Infallible;
    use std::sync::{Arc, OnceLock};
    use std::task::{Context, Poll};

    use tonic::body::Body;
    use tonic::server::NamedService;

    /// A gRPC service `S` made by `make` on the first request (see the module docs).
    pub struct Lazy<S> {
        cell: Arc<OnceLock<S>>,
        make: Arc<dyn Fn() -> S + Send + Sync>,
    }

    impl<S> Clone for Lazy<S> {
        fn clone(&self) -> Self {
            Lazy {
                cell: self.cell.clone(),
                make: self.make.clone(),
            }
        }
    }

    impl<S> Lazy<S> {
        /// A service that calls `make` once, on its first request.
        pub fn new(make: impl Fn() -> S + Send + Sync + 'static) -> Self {
            Lazy {
                cell: Arc::new(OnceLock::new()),
                make: Arc::new(make),
            }
        }
    }

    impl<S: NamedService> NamedService for Lazy<S> {
        const NAME: &'static str = S::NAME;
    }

    impl<S> tower::Service<http::Request<Body>> for Lazy<S>
    where
        S: tower::Service<http::Request<Body>, Error = Infallible> + Clone,
    {
        type Response = S::Response;
        type Error = Infallible;
        type Future = S::Future;

        // The generated reflection servers are always ready (their `poll_ready` returns
        // `Ready(Ok)` without looking at anything), so readiness is checked on the clone
        // that serves the call.
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<Body>) -> Self::Future {
            let mut svc = self.cell.get_or_init(|| (self.make)()).clone();
            svc.call(req)
        }
    }
}

/// Serves `services` on the unix socket with health and reflection until `shutdown`
/// resolves (or SIGTERM/SIGINT), then drains for at most 5 s. Every call passes through
/// [`crate::calls::CallLayer`] (its span, timing and counters), so handlers open no spans.
///
/// Each service is reported SERVING on `grpc.health.v1`, as is the overall status `""`,
/// and listed by reflection.
pub async fn serve(
    name: &str,
    socket: &std::path::Path,
    services: Services,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    // A stale socket from a crashed predecessor would make bind fail.
    let _ = std::fs::remove_file(socket);
    let listener =
        UnixListener::bind(socket).with_context(|| format!("bind {}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;

    // Before anything can reach the socket, so an early SIGTERM still drains.
    let signal = termination_signal();
    // Memory a spike took goes back to the system (issue 40 §2).
    let _trimmer = crate::heap::spawn_trimmer();
    let routes = services.into_routes().await?;
    tracing::info!(service = name, socket = %socket.display(), version = crate::VERSION, "serving");

    let (drain_tx, drain_rx) = tokio::sync::oneshot::channel::<()>();
    // One layer on every call (issue 13 §3): span, timing, outcome code, counters; then the
    // per-connection lanes (issue 24 §1).
    let server = Server::builder()
        .layer(crate::calls::CallLayer::new(name))
        // Inside the call layer, so a `busy` answer is counted and logged like any other.
        .layer(crate::fairness::FairLayer::new())
        .add_routes(routes)
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async move {
            tokio::select! {
                _ = shutdown => {},
                _ = signal => {},
            }
            draining().cancel();
            let _ = drain_tx.send(());
        });
    let mut server = Box::pin(server);
    tokio::select! {
        r = &mut server => r.context("grpc server")?,
        _ = async {
            let _ = drain_rx.await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        } => tracing::warn!("drain deadline passed; exiting with calls in flight"),
    }
    let _ = std::fs::remove_file(socket);
    tracing::info!(service = name, "stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;

    use super::Services;
    use crate::bus::{BusHub, BusService};

    /// `serve` installs the call layer: every call is counted and `CallStats` reports it,
    /// an unimplemented rpc under its outcome code.
    #[tokio::test]
    async fn every_call_through_serve_is_counted_by_the_call_layer() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("t.sock");
        let services = Services::new().add_service(BusService::new(BusHub::new()).into_server());
        assert_eq!(
            services.names(),
            ["snowpea.rpc.v1.ServiceBus"],
            "names come from the servers"
        );
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let sock = socket.clone();
        let server = tokio::spawn(async move {
            super::serve("test", &sock, services, async {
                let _ = stop_rx.await;
            })
            .await
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !crate::client::is_serving(&socket, "", Duration::from_secs(2)).await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "test service never served"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut client = ServiceBusClient::new(crate::client::unix_channel(&socket));
        let call = |c: &mut ServiceBusClient<tonic::transport::Channel>| {
            let mut c = c.clone();
            async move {
                tokio::time::timeout(Duration::from_secs(10), c.call_stats(()))
                    .await
                    .expect("CallStats answers in time")
                    .expect("CallStats succeeds")
                    .into_inner()
            }
        };
        call(&mut client).await;
        let reply = call(&mut client).await;
        assert_eq!(reply.service, "test");
        let row = reply
            .methods
            .iter()
            .find(|m| m.method == "/snowpea.rpc.v1.ServiceBus/CallStats")
            .expect("CallStats row");
        assert!(row.count >= 1, "{row:?}");
        assert!(row.errors.is_empty(), "{row:?}");
        let health = reply
            .methods
            .iter()
            .find(|m| m.method == "/grpc.health.v1.Health/Check")
            .expect("health check row");
        assert!(health.count >= 1);
        let _ = stop_tx.send(());
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("server stops in time")
            .unwrap()
            .unwrap();
    }
}
