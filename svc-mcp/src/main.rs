//! `snowpea-svc-mcp --home DIR --socket PATH`: serves `snowpea.mcp.v1` (McpService,
//! McpInternalService) and the internal bus on a unix socket (default `DIR/run/mcp.sock`),
//! with `grpc.health.v1` and reflection, and hosts every configured MCP server. Logs to
//! stderr. Exit codes: 0 after SIGTERM/SIGINT (every MCP child stopped first), 1 on a
//! start-up failure, 2 on bad arguments.
//!
//! `snowpea-svc-mcp __mcp-guard CMD ARGS…` is the internal process guard it runs stdio
//! servers behind (see `host::guard`).

use std::process::ExitCode;

use snowpea_common::bus::{BusHub, BusService};
use snowpea_common::service::{serve, ServiceArgs, Services};
use snowpea_svc_mcp::host::{guard, Host};
use snowpea_svc_mcp::rpc::{internal::InternalRpc, mcp::McpRpc, App};

fn main() -> ExitCode {
    if let Some(code) = guard::run_if_guard() {
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let args = ServiceArgs::parse("mcp");
    quiet_rmcp_logs();
    snowpea_common::logging::init("mcp");
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "svc-mcp failed");
            eprintln!("snowpea-svc-mcp: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// rmcp logs its transport failures itself, with the raw server URL (credentials included,
/// issue 6); svc-mcp already logs each failure, redacted. So `rmcp` is off unless
/// `SNOWPEA_LOG` names it (e.g. `info,rmcp=debug` while debugging a transport).
fn quiet_rmcp_logs() {
    let filter = std::env::var("SNOWPEA_LOG")
        .ok()
        .filter(|f| !f.trim().is_empty())
        .unwrap_or_else(|| "info".into());
    if !filter.contains("rmcp") {
        // Single-threaded here: no runtime or other thread exists yet.
        std::env::set_var("SNOWPEA_LOG", format!("{filter},rmcp=off"));
    }
}

async fn run(args: ServiceArgs) -> anyhow::Result<()> {
    snowpea_svc_mcp::install_crypto_provider();
    let hub = BusHub::new();
    hub.set_capabilities(snowpea_svc_mcp::CAPABILITIES);
    let exe = std::env::current_exe()?;
    let daemon_dir = std::env::current_dir()?;
    let host = Host::new(args.home.clone(), hub.clone(), exe, daemon_dir);
    // Servers start concurrently in the background; the socket serves at once.
    {
        let host = host.clone();
        tokio::spawn(async move { host.start().await });
    }
    host.follow_settings();
    let app = App::new(host.clone());
    let services = Services::new()
        .add_service(McpRpc::new(app.clone()).into_server())
        .add_service(InternalRpc::new(app).into_server())
        .add_service(BusService::new(hub).into_server());
    let served = serve("mcp", &args.socket, services, std::future::pending()).await;
    host.shutdown().await;
    tracing::info!("every MCP server stopped");
    served
}
