//! The timer loop (issue 5): handles every due job, then sleeps until the earliest next firing
//! — no fixed polling — and is woken early when a job changes or a run ends.

use std::sync::Arc;

use crate::runner::ts;
use crate::scheduler::Scheduler;

/// Runs the tick until `shutdown` resolves.
pub async fn run(s: Arc<Scheduler>, shutdown: impl std::future::Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        if let Err(e) = s.process_due() {
            tracing::error!(error = %format!("{e:#}"), "tick failed");
        }
        let next = match s.store.earliest_due() {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "cannot read the next due time");
                None
            }
        };
        let sleep = async {
            match next {
                Some(ms) => s.clock.sleep_until(ts(ms)).await,
                None => futures::future::pending().await,
            }
        };
        tokio::select! {
            _ = sleep => {}
            _ = s.woken() => {}
            _ = &mut shutdown => return,
        }
    }
}
