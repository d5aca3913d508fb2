//! `snowpea-svc-scheduler --home DIR --socket PATH`: serves `snowpea.scheduler.v1` (job.*) on
//! its unix socket with health and reflection; owns `$SNOWPEA_HOME/state/scheduler.db`.
//! `SNOWPEA_SCHEDULER_CLOCK=manual[:<ISO-8601>]` runs a manual clock for tests.
//! Exit codes: 0 after SIGTERM/SIGINT, 1 on a start-up failure, 2 on bad arguments.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = snowpea_common::service::ServiceArgs::parse("scheduler");
    snowpea_common::logging::init("scheduler");
    match snowpea_svc_scheduler::run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "svc-scheduler failed");
            eprintln!("snowpea-svc-scheduler: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
