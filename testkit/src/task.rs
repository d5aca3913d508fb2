//! Background tasks of a test whose panics fail the test. A panic inside `tokio::spawn`
//! only ends that task; an assertion in a stream reader or callback would then be lost.

use std::future::Future;

use futures::FutureExt;
use tokio::task::JoinHandle;

/// A spawned task that re-raises its panic: when joined ([`CheckedTask::join`]), or when
/// dropped after it panicked (so a harness holding it fails the test at the latest when the
/// harness is dropped). A task still running at drop is aborted.
#[derive(Debug)]
pub struct CheckedTask<T> {
    handle: Option<JoinHandle<T>>,
    what: String,
}

impl<T: Send + 'static> CheckedTask<T> {
    /// Spawns `fut` on the current runtime; `what` names it in the failure.
    pub fn spawn(what: &str, fut: impl Future<Output = T> + Send + 'static) -> Self {
        CheckedTask {
            handle: Some(tokio::spawn(fut)),
            what: what.to_owned(),
        }
    }

    /// Waits for the task (at most `limit`) and returns its value; re-raises its panic.
    pub async fn join(mut self, limit: std::time::Duration) -> T {
        let handle = self.handle.take().expect("joined once");
        let what = self.what.clone();
        match crate::within(limit, &what, handle).await {
            Ok(v) => v,
            Err(e) => resume(&what, e),
        }
    }

    /// Panics now if the task has already panicked.
    pub fn check(&mut self) {
        let finished = self.handle.as_ref().is_some_and(JoinHandle::is_finished);
        if finished {
            let handle = self.handle.take().expect("present");
            if let Some(Err(e)) = handle.now_or_never() {
                resume(&self.what, e);
            }
        }
    }
}

fn resume(what: &str, e: tokio::task::JoinError) -> ! {
    match e.try_into_panic() {
        Ok(payload) => {
            eprintln!("background task {what:?} panicked");
            std::panic::resume_unwind(payload)
        }
        Err(e) => panic!("background task {what:?} failed: {e}"),
    }
}

impl<T> Drop for CheckedTask<T> {
    fn drop(&mut self) {
        let Some(handle) = self.handle.take() else {
            return;
        };
        if !handle.is_finished() {
            handle.abort();
            return;
        }
        if let Some(Err(e)) = handle.now_or_never() {
            if e.is_panic() && !std::thread::panicking() {
                resume(&self.what, e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    #[should_panic(expected = "inside the callback")]
    async fn a_panic_in_the_task_fails_the_test_when_joined() {
        let t = CheckedTask::spawn("cb", async { panic!("inside the callback") });
        t.join(crate::WAIT).await;
    }

    #[tokio::test]
    #[should_panic(expected = "inside the reader")]
    async fn a_panic_in_the_task_fails_the_test_when_dropped() {
        let t = CheckedTask::spawn("reader", async { panic!("inside the reader") });
        crate::assert_eventually!(t.handle.as_ref().unwrap().is_finished());
        drop(t);
    }

    #[tokio::test]
    async fn a_running_task_is_aborted_on_drop() {
        /// Flags when the task's future is dropped: an aborted task drops it.
        struct Flag(std::sync::Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Flag(dropped.clone());
        let t = CheckedTask::spawn("forever", async move {
            let _flag = flag;
            std::future::pending::<()>().await
        });
        tokio::task::yield_now().await;
        assert!(
            !dropped.load(std::sync::atomic::Ordering::SeqCst),
            "still running"
        );
        drop(t);
        crate::assert_eventually!(dropped.load(std::sync::atomic::Ordering::SeqCst));
    }
}
