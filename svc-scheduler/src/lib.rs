//! svc-scheduler (issue 5, DESIGN.md §6): unattended jobs (`job.*`) that fire exactly once per
//! occurrence, across scheduler crashes, suite restarts and `job.runNow` racing the tick.
//!
//! * [`spec`] reads schedule specs (cron, intervals, one-shots, English and Korean phrases).
//! * [`store`] is `state/scheduler.db`: jobs and occurrences; an occurrence is claimed by
//!   committing its row before it runs.
//! * [`scheduler`] claims due occurrences ([`catchup`] decides fire-once vs missed) and
//!   recovers after a crash; [`tick`] sleeps until the next due time; [`runner`] runs one
//!   occurrence through svc-session.
//! * [`rpc`] serves `job.*` and the internal tool/clock rpcs; [`ownership`] guards jobs with
//!   meta; [`clock`] makes time controllable in tests.

pub mod catchup;
pub mod clock;
pub mod config;
pub mod error;
pub mod ownership;
pub mod rpc;
pub mod runner;
pub mod scheduler;
pub mod spec;
pub mod store;
pub mod tick;

use std::sync::Arc;

use snowpea_common::bus::{BusHub, BusService};
use snowpea_common::service::ServiceArgs;

/// Env knob selecting the clock (see [`clock`]).
pub const CLOCK_ENV: &str = "SNOWPEA_SCHEDULER_CLOCK";

/// Runs the service until SIGTERM/SIGINT.
pub async fn run(args: ServiceArgs) -> anyhow::Result<()> {
    let clock = clock::from_env_value(std::env::var(CLOCK_ENV).ok().as_deref())?;
    let store = Arc::new(store::Store::open(&args.home.database("scheduler"))?);
    let bus = BusHub::new();
    let session = Arc::new(runner::GrpcSessionRunner::new(args.home.socket("session")));
    let sched = scheduler::Scheduler::new(
        store,
        clock.clone(),
        session,
        bus.clone(),
        config::Config::default(),
    );
    // Settings never stop the scheduler: bad ones are logged and fall back (config.rs).
    sched.use_settings_file(args.home.settings_path());
    let config = sched.reload_config();
    sched.follow_settings();
    tracing::info!(
        clock = if clock.as_manual().is_some() { "manual" } else { "real" },
        now = %spec::iso(clock.now()),
        time_zone = %config.time_zone_name,
        "scheduler starting"
    );
    sched.blocking("recover", |s| s.recover()).await??;
    let api = rpc::job::JobApi {
        sched: sched.clone(),
        home: args.home.clone(),
    };
    let services = snowpea_common::service::Services::new()
        .add_service(rpc::job::JobRpc::new(api.clone()).into_server())
        .add_service(rpc::internal::InternalRpc::new(api).into_server())
        .add_service(BusService::new(bus).into_server());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let tick = tokio::spawn(tick::run(sched, async {
        let _ = stop_rx.await;
    }));
    let served =
        snowpea_common::service::serve("scheduler", &args.socket, services, std::future::pending())
            .await;
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), tick).await;
    served
}
