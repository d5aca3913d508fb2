//! `snowpea-svc-session --home DIR --socket PATH`: serves `snowpea.session.v1`
//! (one gRPC service per JSON-RPC family, listed in `rpc/mod.rs`) and the internal bus on a unix socket,
//! with `grpc.health.v1` and reflection. Logs to stderr. Exit codes: 0 after
//! SIGTERM/SIGINT, 1 on a start-up failure, 2 on bad arguments.

use std::process::ExitCode;

use snowpea_common::bus::{BusHub, BusService};
use snowpea_common::service::{serve, ServiceArgs, Services};
use snowpea_svc_session::rpc::{
    agent::AgentRpc, approval::ApprovalRpc, backend::BackendRpc, checkpoint::CheckpointRpc,
    command::CommandRpc, file::FileRpc, llm::LlmRpc, lsp::LspRpc, permission::PermissionRpc,
    provider::ProviderRpc, question::QuestionRpc, session::SessionRpc, settings::SettingsRpc,
    setup::SetupRpc, skill::SkillRpc, team::TeamRpc, tool::ToolRpc, usage::UsageRpc, web::WebRpc,
};
use snowpea_svc_session::{App, AppConfig, CAPABILITIES};

#[tokio::main]
async fn main() -> ExitCode {
    let args = ServiceArgs::parse("session");
    snowpea_common::logging::init("session");
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "svc-session failed");
            eprintln!("snowpea-svc-session: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(args: ServiceArgs) -> anyhow::Result<()> {
    let hub = BusHub::new();
    hub.set_capabilities(CAPABILITIES);
    let app = App::open(AppConfig::new(args.home.clone()), hub.clone()).await?;
    let services = Services::new()
        .add_service(SessionRpc::new(app.clone()).into_server())
        .add_service(ApprovalRpc::new(app.clone()).into_server())
        .add_service(ToolRpc::new(app.clone()).into_server())
        .add_service(CheckpointRpc::new(app.clone()).into_server())
        .add_service(BackendRpc::new(app.clone()).into_server())
        .add_service(ProviderRpc::new(app.clone()).into_server())
        .add_service(SettingsRpc::new(app.clone()).into_server())
        .add_service(SettingsRpc::new(app.clone()).into_internal_server())
        .add_service(SetupRpc::new(app.clone()).into_server())
        .add_service(QuestionRpc::new(app.clone()).into_server())
        .add_service(PermissionRpc::new(app.clone()).into_server())
        .add_service(CommandRpc::new(app.clone()).into_server())
        .add_service(SkillRpc::new(app.clone()).into_server())
        .add_service(AgentRpc::new(app.clone()).into_server())
        .add_service(UsageRpc::new(app.clone()).into_server())
        .add_service(FileRpc::new(app.clone()).into_server())
        .add_service(LlmRpc::new(app.clone()).into_server())
        .add_service(LspRpc::new(app.clone()).into_server())
        .add_service(WebRpc::new(app.clone()).into_server())
        .add_service(TeamRpc::new(app.clone()).into_server())
        .add_service(
            snowpea_svc_session::rpc::channel_internal::ChannelInternalRpc::new(app.clone())
                .into_server(),
        )
        .add_service(
            snowpea_svc_session::rpc::internal::InternalRpc::new(app.clone()).into_server(),
        )
        .add_service(BusService::new(hub).into_server());
    serve("session", &args.socket, services, std::future::pending()).await?;
    app.shutdown().await;
    app.flush().await?;
    Ok(())
}
