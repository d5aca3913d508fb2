//! The per-connection budgets of issue 40: bytes of admitted requests and bytes of unread
//! frames are bounded whatever the count limits allow.

use super::*;
use snowpea_proto::limits::WS_MESSAGE;

fn conn(queue: usize) -> (Connection, mpsc::Receiver<Frame>) {
    let (tx, rx) = mpsc::channel(queue);
    (Connection::new("c-test".into(), tx, 4, 1024), rx)
}

#[test]
fn admitted_bytes_are_bounded_and_released() {
    let (c, _rx) = conn(16);
    let mut held = Vec::new();
    // Full-size messages: as many as the byte budget holds, far fewer than the count limit.
    while let Some(a) = c.admit(WS_MESSAGE) {
        held.push(a);
        assert!(
            held.len() <= 1028,
            "the byte budget never stopped admitting"
        );
    }
    assert_eq!(held.len(), CONNECTION_REQUEST_BYTES / WS_MESSAGE);
    // Small requests still fit up to the budget, then not.
    assert!(c.admit(1).is_none());
    // An answered request gives its bytes back.
    held.pop();
    assert!(c.admit(WS_MESSAGE).is_some());
}

#[test]
fn one_message_over_the_budget_is_admitted_alone() {
    let (c, _rx) = conn(16);
    let big = c.admit(CONNECTION_REQUEST_BYTES + 1).expect("alone");
    assert!(c.admit(1).is_none());
    drop(big);
    assert!(c.admit(1).is_some());
}

#[test]
fn count_limit_still_applies_to_small_requests() {
    let (c, _rx) = conn(16);
    let held: Vec<_> = std::iter::from_fn(|| c.admit(10)).take(2000).collect();
    assert_eq!(held.len(), 4 + 1024);
}

#[test]
fn unread_bytes_past_the_budget_close_the_connection() {
    let (c, mut rx) = conn(1 << 16);
    let close = c.close_receiver();
    let frame = || Frame::text("x".repeat(1 << 20));
    let fits = CONNECTION_OUTBOUND_BYTES >> 20;
    for _ in 0..fits {
        assert!(c.send(frame()));
    }
    assert_eq!(c.outbound_bytes().load(Ordering::Acquire), fits << 20);
    assert!(!c.overflowed());
    assert!(!c.send(frame()), "one MiB more than the budget");
    assert!(c.overflowed());
    assert!(
        matches!(&*close.borrow(), CloseState::Close { code: CLOSE_POLICY, reason } if reason == QUEUE_FULL_REASON)
    );
    // What was queued is still there, counted once each.
    let mut n = 0;
    while rx.try_recv().is_ok() {
        n += 1;
    }
    assert_eq!(n, fits);
}

#[test]
fn one_frame_bigger_than_the_budget_goes_into_an_empty_queue() {
    let (c, _rx) = conn(16);
    assert!(c.send(Frame::text("y".repeat(CONNECTION_OUTBOUND_BYTES + 1))));
    assert!(!c.overflowed());
    assert!(!c.send(Frame::text("z")));
    assert!(c.overflowed());
}
