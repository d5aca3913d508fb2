//! `snowpea-svc-chat --home DIR --socket PATH`: serves `snowpea.chat.v1` (`gateway.*`) on its
//! unix socket with health and reflection; owns `$SNOWPEA_HOME/state/chat.db`.
//! Exit codes: 0 after SIGTERM/SIGINT, 1 on a start-up failure, 2 on bad arguments.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = snowpea_common::service::ServiceArgs::parse("chat");
    snowpea_common::logging::init("chat");
    match snowpea_svc_chat::run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "svc-chat failed");
            eprintln!("snowpea-svc-chat: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
