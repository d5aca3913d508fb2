//! `snowpea-svc-audio --home DIR --socket PATH`: serves `snowpea.audio.v1.AudioService`
//! and the internal bus on a unix socket (default `DIR/run/audio.sock`), with
//! `grpc.health.v1` and reflection. Speech engines run as its watched children under
//! `DIR/audio-runtime/`. Logs to stderr. Exit codes: 0 after SIGTERM/SIGINT, 1 on a
//! start-up failure, 2 on bad arguments.

use std::process::ExitCode;

use snowpea_common::bus::{BusHub, BusService};
use snowpea_common::service::{serve, ServiceArgs, Services};
use snowpea_svc_audio::rpc::audio::AudioRpc;
use snowpea_svc_audio::App;

fn main() -> ExitCode {
    let args = ServiceArgs::parse("audio");
    snowpea_common::logging::init("audio");
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "svc-audio failed");
            eprintln!("snowpea-svc-audio: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(args: ServiceArgs) -> anyhow::Result<()> {
    let hub = BusHub::new();
    hub.set_capabilities(snowpea_svc_audio::CAPABILITIES);
    let app = App::new(args.home.clone(), hub.clone());
    app.follow_settings();
    snowpea_svc_audio::child::reap_and_mark(args.home.root());
    // Detection runs in the background so the socket serves at once.
    {
        let app = app.clone();
        tokio::spawn(async move {
            app.state().await;
        });
    }
    let services = Services::new()
        .add_service(AudioRpc::new(app).into_server())
        .add_service(BusService::new(hub).into_server());
    serve("audio", &args.socket, services, std::future::pending()).await
}
