//! The timer loop (issue 5): handles every due job, then sleeps until the earliest next firing
//! — no fixed polling — and is woken early when a job changes or a run ends.

use std::sync::Arc;

use crate::runner::ts;
use crate::scheduler::Scheduler;

/// Runs the tick until `shutdown` resolves.
pub async fn run(s: Arc<Scheduler>, shutdown: impl std::future::Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        // Claims read and write the store: on the blocking pool, never on this task's thread.
        let due = s
            .blocking("tick", |s| {
                if let Err(e) = s.process_due() {
                    tracing::error!(error = %format!("{e:#}"), "tick failed");
                }
                s.store.earliest_due()
            })
            .await;
        let next = match due {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => {
                tracing::error!(error = %format!("{e:#}"), "cannot read the next due time");
                None
            }
            Err(e) => {
                tracing::error!(error = %e, "tick did not finish");
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
