//! The scheduler's notion of "now" (issue 5: "a controllable clock for the scheduler in tests
//! (no test sleeps for real minutes)").
//!
//! Everything that reads the time or waits for a time goes through a [`Clock`]. [`RealClock`]
//! is the wall clock; [`ManualClock`] only moves when told to ([`ManualClock::advance`],
//! [`ManualClock::set`]), and every [`Clock::sleep_until`] pending on it wakes as soon as the
//! clock reaches its deadline. The binary uses a manual clock when started with
//! `SNOWPEA_SCHEDULER_CLOCK=manual` (starting at the real now) or
//! `SNOWPEA_SCHEDULER_CLOCK=manual:<ISO-8601>`, and suite tests move it with the internal
//! `SchedulerInternalService.SetClock` rpc.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use tokio::sync::watch;

/// A boxed future returned by [`Clock::sleep_until`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Source of the current time and of timers.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
    /// Resolves once [`Clock::now`] has reached `deadline` (at once when it already has).
    fn sleep_until(&self, deadline: Timestamp) -> Sleep;
    /// The manual clock behind this clock, when it is one (for `SetClock`).
    fn as_manual(&self) -> Option<&ManualClock> {
        None
    }
}

/// Longest real sleep in one go: a wall clock that jumps (suspend, NTP step) is noticed
/// within this bound. It bounds a wait, it is not a polling period: the tick still wakes at
/// the due time.
const MAX_REAL_SLEEP: Duration = Duration::from_secs(60);

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn sleep_until(&self, deadline: Timestamp) -> Sleep {
        Box::pin(async move {
            loop {
                let left = deadline.duration_since(Timestamp::now());
                if left <= SignedDuration::ZERO {
                    return;
                }
                let left = Duration::try_from(left).unwrap_or(MAX_REAL_SLEEP);
                tokio::time::sleep(left.min(MAX_REAL_SLEEP)).await;
            }
        })
    }
}

/// A clock that moves only when told to. Cloning shares the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<watch::Sender<Timestamp>>,
}

impl ManualClock {
    /// A manual clock showing `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            now: Arc::new(watch::channel(start).0),
        }
    }

    /// Moves the clock forward by `by` (a negative duration is ignored: time never runs back).
    pub fn advance(&self, by: SignedDuration) -> Timestamp {
        self.now.send_modify(|t| {
            if by > SignedDuration::ZERO {
                // Saturates at the last representable instant; never panics.
                *t = t.saturating_add(by).unwrap_or(Timestamp::MAX);
            }
        });
        *self.now.borrow()
    }

    /// Sets the clock to `to` when that is later than now (time never runs back).
    pub fn set(&self, to: Timestamp) -> Timestamp {
        self.now.send_modify(|t| {
            if to > *t {
                *t = to;
            }
        });
        *self.now.borrow()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.borrow()
    }

    fn sleep_until(&self, deadline: Timestamp) -> Sleep {
        let mut rx = self.now.subscribe();
        Box::pin(async move {
            // The sender lives as long as the clock; if it is gone, never wake.
            if rx.wait_for(|now| *now >= deadline).await.is_err() {
                futures::future::pending::<()>().await;
            }
        })
    }

    fn as_manual(&self) -> Option<&ManualClock> {
        Some(self)
    }
}

/// The clock selected by `SNOWPEA_SCHEDULER_CLOCK` (see the module docs): `None`/empty or
/// `real` → [`RealClock`]; `manual` or `manual:<ISO-8601>` → [`ManualClock`].
pub fn from_env_value(value: Option<&str>) -> anyhow::Result<Arc<dyn Clock>> {
    match value.map(str::trim) {
        None | Some("") | Some("real") => Ok(Arc::new(RealClock)),
        Some("manual") => Ok(Arc::new(ManualClock::new(Timestamp::now()))),
        Some(v) => match v.strip_prefix("manual:") {
            Some(at) => {
                let at: Timestamp = at.parse().map_err(|e| {
                    anyhow::anyhow!("SNOWPEA_SCHEDULER_CLOCK: bad time {at:?}: {e}")
                })?;
                Ok(Arc::new(ManualClock::new(at)))
            }
            None => anyhow::bail!(
                "SNOWPEA_SCHEDULER_CLOCK must be `real`, `manual` or `manual:<ISO-8601>`, not {v:?}"
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_sleep_wakes_when_the_clock_reaches_the_deadline() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = ManualClock::new(t0);
        let deadline = t0 + SignedDuration::from_mins(10);
        let mut sleep = clock.sleep_until(deadline);
        assert!(
            tokio::time::timeout(Duration::from_millis(20), &mut sleep)
                .await
                .is_err(),
            "must not wake before the clock moves"
        );
        clock.advance(SignedDuration::from_mins(9));
        assert!(tokio::time::timeout(Duration::from_millis(20), &mut sleep)
            .await
            .is_err());
        clock.advance(SignedDuration::from_mins(1));
        tokio::time::timeout(Duration::from_secs(5), sleep)
            .await
            .expect("wakes at the deadline");
    }

    #[test]
    fn manual_clock_never_runs_back() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = ManualClock::new(t0);
        assert_eq!(clock.set("2025-01-01T00:00:00Z".parse().unwrap()), t0);
        assert_eq!(clock.advance(SignedDuration::from_secs(-5)), t0);
    }

    #[test]
    fn env_value_selects_the_clock() {
        assert!(from_env_value(None).unwrap().as_manual().is_none());
        let c = from_env_value(Some("manual:2026-03-08T01:00:00Z")).unwrap();
        assert_eq!(c.now().to_string(), "2026-03-08T01:00:00Z");
        assert!(from_env_value(Some("bogus")).is_err());
    }
}
