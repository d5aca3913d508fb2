//! `snowpea-gateway` (DESIGN.md §4): JSON-RPC 2.0 over WebSocket on 127.0.0.1, routed
//! over gRPC to the services of the suite. `main` only parses arguments, starts tracing,
//! builds the gateway, logs where it listens and serves until told to stop.
//! Exit codes: 0 after SIGTERM/SIGINT or system.shutdown, 1 on a start-up failure,
//! 2 on bad arguments.
//!
//! The modules are layers that depend only downwards (docs/ARCHITECTURE.md "Gateway
//! layers"; `tests/suite/layers.rs` fails on any import cycle): [`wire`] → [`upstream`] →
//! [`route`] → [`dispatch`] and [`callbacks`] → the composition root [`gateway`] with
//! [`ws`], [`server`] and this file.

mod args;
mod callbacks;
mod dispatch;
mod gateway;
mod http;
mod origin;
mod route;
mod server;
mod upstream;
mod wire;
mod ws;

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use snowpea_common::home::Home;

use crate::args::Args;
use crate::gateway::Gateway;
use crate::wire::limits::Limits;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = args.validate() {
        eprintln!("snowpea-gateway: {e}");
        return ExitCode::from(2);
    }
    snowpea_common::logging::init("gateway");
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("snowpea-gateway: tokio runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("snowpea-gateway: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let home = Home::resolve(args.home.as_deref())?;
    // Read once: a new token needs a new gateway (the supervisor restarts it).
    let token = home.read_token().context("the daemon token")?;
    let listener = args.listener()?;
    let addr = listener.local_addr()?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let limits = Limits {
        services_starting: args.services_starting,
        ..Limits::from_env()
    };
    let gw = Gateway::start(home, token, addr.port(), &args.services, limits);
    // Memory a burst of large frames took goes back to the system (issue 40 §2).
    let _trimmer = snowpea_common::heap::spawn_trimmer();
    tracing::info!(
        %addr,
        ws = %format!("ws://{addr}{}", snowpea_proto::WS_PATH),
        version = snowpea_common::VERSION,
        protocol = snowpea_proto::PROTOCOL_VERSION,
        services = %args.services.join(","),
        home = %gw.home.root().display(),
        "listening"
    );
    server::serve(gw, listener).await
}
