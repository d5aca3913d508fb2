//! `snowpea-svc-memory --home DIR --socket PATH`: serves `snowpea.memory.v1`
//! (MemoryService, SiteService) and the internal bus on a unix socket (default
//! `DIR/run/memory.sock`), with `grpc.health.v1` and reflection; owns
//! `DIR/state/memory.db`. Logs to stderr. Exit codes: 0 after SIGTERM/SIGINT, 1 on a
//! start-up failure, 2 on bad arguments.

use std::process::ExitCode;

use snowpea_common::bus::{BusHub, BusService};
use snowpea_common::service::{serve, ServiceArgs, Services};
use snowpea_svc_memory::rpc::{memory::MemoryRpc, site::SiteRpc};
use snowpea_svc_memory::{App, CAPABILITIES};

#[tokio::main]
async fn main() -> ExitCode {
    let args = ServiceArgs::parse("memory");
    snowpea_common::logging::init("memory");
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "svc-memory failed");
            eprintln!("snowpea-svc-memory: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(args: ServiceArgs) -> anyhow::Result<()> {
    let hub = BusHub::new();
    hub.set_capabilities(CAPABILITIES);
    let app = App::open(&args.home)?;
    app.follow_settings(&hub);
    let services = Services::new()
        .add_service(MemoryRpc::new(app.clone()).into_server())
        .add_service(SiteRpc::new(app).into_server())
        .add_service(BusService::new(hub).into_server());
    serve("memory", &args.socket, services, std::future::pending()).await
}
