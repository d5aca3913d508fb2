//! The gateway-wide budget of large requests (issue 40): messages of
//! [`LARGE_MESSAGE`] bytes or more hold [`GATEWAY_LARGE_REQUEST_BYTES`] between them, in KiB
//! permits of one semaphore, from their parse until their answer. Small messages never wait
//! here (their count per connection bounds them, `Connection::admit`).

use std::sync::Arc;
use std::time::Duration;

use snowpea_proto::limits::{GATEWAY_LARGE_REQUEST_BYTES, LARGE_MESSAGE};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a large message's wait for room ended with.
#[derive(Debug)]
pub enum Room {
    /// A small message: nothing to hold.
    Small,
    /// Room for the message, held until the permit is dropped (with its answer).
    Held(OwnedSemaphorePermit),
    /// No room within the wait: its calls are refused busy.
    Full,
}

/// The budget, shared by every connection of the gateway.
#[derive(Debug, Clone)]
pub struct LargeRequests {
    permits: Arc<Semaphore>,
    total: u32,
}

impl Default for LargeRequests {
    fn default() -> Self {
        LargeRequests::new(GATEWAY_LARGE_REQUEST_BYTES)
    }
}

impl LargeRequests {
    /// A budget of `bytes` (rounded down to whole KiB, at least one message's worth).
    pub fn new(bytes: usize) -> Self {
        let total = u32::try_from(bytes >> 10).unwrap_or(u32::MAX).max(1);
        LargeRequests {
            permits: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Waits up to `wait` for room for a message of `len` bytes (first come, first
    /// served); a message longer than the whole budget waits for all of it.
    pub async fn room(&self, len: usize, wait: Duration) -> Room {
        if len < LARGE_MESSAGE {
            return Room::Small;
        }
        let kib = u32::try_from(len.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .min(self.total);
        match tokio::time::timeout(wait, self.permits.clone().acquire_many_owned(kib)).await {
            // The semaphore is never closed.
            Ok(Ok(permit)) => Room::Held(permit),
            _ => Room::Full,
        }
    }

    /// KiB of the budget free now.
    #[cfg(test)]
    pub fn free_kib(&self) -> usize {
        self.permits.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn large_messages_share_the_budget_and_small_ones_never_wait() {
        let budget = LargeRequests::new(4 << 20);
        let wait = Duration::from_millis(50);
        assert!(matches!(
            budget.room(LARGE_MESSAGE - 1, wait).await,
            Room::Small
        ));
        let a = budget.room(3 << 20, wait).await;
        assert!(matches!(a, Room::Held(_)));
        assert!(matches!(budget.room(2 << 20, wait).await, Room::Full));
        assert!(matches!(budget.room(16, wait).await, Room::Small));
        drop(a);
        assert_eq!(budget.free_kib(), 4096);
        // Longer than the whole budget: it waits for all of it, then goes alone.
        let b = budget.room(8 << 20, wait).await;
        assert!(matches!(b, Room::Held(_)));
        assert_eq!(budget.free_kib(), 0);
    }

    #[tokio::test]
    async fn a_waiting_message_gets_the_room_another_gives_back() {
        let budget = LargeRequests::new(1 << 20);
        let Room::Held(first) = budget.room(1 << 20, Duration::from_millis(50)).await else {
            panic!("room for the first");
        };
        let waiter = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.room(1 << 20, Duration::from_secs(10)).await })
        };
        tokio::task::yield_now().await;
        drop(first);
        let got = snowpea_testkit::within(Duration::from_secs(10), "the waiter", waiter).await;
        assert!(matches!(got.unwrap(), Room::Held(_)));
    }
}
