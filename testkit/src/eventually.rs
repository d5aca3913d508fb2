//! Bounded waits: retries for state that settles eventually (never a bare sleep) and a
//! deadline on every await on another process.

use std::future::Future;
use std::time::{Duration, Instant};

/// Default bound of [`assert_eventually!`](crate::assert_eventually) and of the harness's
/// waits on another process.
pub const WAIT: Duration = Duration::from_secs(20);
/// Pause between two checks of a retry loop.
pub const POLL: Duration = Duration::from_millis(20);

/// One [`POLL`] pause (used by [`assert_eventually!`](crate::assert_eventually)).
pub async fn pause() {
    tokio::time::sleep(POLL).await;
}

/// Asserts that a condition becomes true within a bound, re-evaluating it every
/// [`POLL`]; the condition may `.await`. Panics naming the condition (or the given message)
/// when the bound passes. Use inside an async test.
///
/// ```ignore
/// assert_eventually!(svc.list().await.len() == 2);
/// assert_eventually!(within = Duration::from_secs(60), done.load(SeqCst), "run {id} ended");
/// ```
#[macro_export]
macro_rules! assert_eventually {
    (within = $limit:expr, $cond:expr $(,)?) => {
        $crate::assert_eventually!(within = $limit, $cond, "{}", stringify!($cond))
    };
    (within = $limit:expr, $cond:expr, $($msg:tt)+) => {{
        let limit: ::std::time::Duration = $limit;
        let deadline = ::std::time::Instant::now() + limit;
        loop {
            let reached: bool = $cond;
            if reached {
                break;
            }
            if ::std::time::Instant::now() >= deadline {
                panic!("not within {:?}: {}", limit, format_args!($($msg)+));
            }
            $crate::pause().await;
        }
    }};
    ($cond:expr $(,)?) => {
        $crate::assert_eventually!(within = $crate::WAIT, $cond)
    };
    ($cond:expr, $($msg:tt)+) => {
        $crate::assert_eventually!(within = $crate::WAIT, $cond, $($msg)+)
    };
}

/// Retries `check` every [`POLL`] until it yields `Some`, for at most `limit`; panics naming
/// `what` when the bound passes.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("not within {limit:?}: {what}");
        }
        pause().await;
    }
}

/// [`eventually`] for synchronous tests (the supervisor's): sleeps the thread between checks.
#[track_caller]
pub fn eventually_blocking<T>(
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        std::thread::sleep(POLL);
    }
}

/// Awaits `f` for at most `limit`; panics naming `what` when it passes.
pub async fn within<T>(limit: Duration, what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {limit:?}: {what}"))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn assert_eventually_waits_for_the_condition() {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        tokio::spawn(async move {
            for _ in 0..3 {
                pause().await;
                m.fetch_add(1, Ordering::SeqCst);
            }
        });
        assert_eventually!(n.load(Ordering::SeqCst) == 3);
    }

    #[tokio::test]
    #[should_panic(expected = "not within 50ms: never")]
    async fn assert_eventually_fails_after_the_bound() {
        assert_eventually!(within = Duration::from_millis(50), false, "never");
    }

    #[tokio::test]
    async fn eventually_returns_the_first_value() {
        let counter = AtomicUsize::new(0);
        let v = eventually(WAIT, "third try", || async {
            (counter.fetch_add(1, Ordering::SeqCst) == 2).then_some(7)
        })
        .await;
        assert_eq!(v, 7);
    }

    #[test]
    #[should_panic(expected = "not within")]
    fn eventually_blocking_fails_after_the_bound() {
        eventually_blocking(Duration::from_millis(30), "never", || None::<()>);
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after")]
    async fn within_fails_a_hung_await() {
        within(
            Duration::from_millis(20),
            "hang",
            std::future::pending::<()>(),
        )
        .await;
    }
}
