use serde_json::{json, Value};

use super::*;

fn ev(seq: u64) -> Value {
    json!({ "sessionId": "s", "seq": seq, "kind": "k", "payload": {}, "ts": "t" })
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().filter_map(event_seq).collect()
}

#[test]
fn duplicates_are_dropped() {
    let mut q = Sequencer::default();
    q.track("s", Some(0));
    assert_eq!(seqs(&q.on_live("s", 1, ev(1)).deliver), [1]);
    assert!(q.on_live("s", 1, ev(1)).deliver.is_empty());
    assert_eq!(seqs(&q.on_live("s", 2, ev(2)).deliver), [2]);
}

#[test]
fn gap_on_tracked_session_is_filled_then_buffer_drained() {
    let mut q = Sequencer::default();
    q.track("s", Some(0));
    q.on_live("s", 1, ev(1));
    let out = q.on_live("s", 4, ev(4));
    assert!(out.deliver.is_empty());
    assert_eq!(out.fill_after, Some(1));
    // More live events while the fill is in flight are buffered.
    assert!(q.on_live("s", 5, ev(5)).deliver.is_empty());
    let delivered = q.on_fill("s", Some(vec![ev(2), ev(3), ev(4)]));
    assert_eq!(seqs(&delivered), [2, 3, 4, 5]);
    assert_eq!(q.delivered("s"), Some(5));
}

#[test]
fn failed_fill_delivers_buffer_with_gap() {
    let mut q = Sequencer::default();
    q.track("s", Some(0));
    q.on_live("s", 3, ev(3));
    assert_eq!(seqs(&q.on_fill("s", None)), [3]);
}

#[test]
fn untracked_session_accepts_first_seq_as_baseline_and_gaps() {
    let mut q = Sequencer::default();
    assert_eq!(seqs(&q.on_live("s", 7, ev(7)).deliver), [7]);
    let out = q.on_live("s", 9, ev(9));
    assert_eq!(seqs(&out.deliver), [9]);
    assert_eq!(out.fill_after, None);
}

#[test]
fn resume_all_covers_tracked_sessions_only() {
    let mut q = Sequencer::default();
    q.track("a", Some(0));
    q.on_live("a", 1, ev(1));
    q.on_live("b", 1, ev(1));
    q.track("c", None);
    assert_eq!(
        q.begin_resume_all(),
        [("a".to_owned(), 1), ("c".to_owned(), 0)]
    );
}

#[test]
fn caller_resume_counts_as_delivered() {
    let mut q = Sequencer::default();
    assert!(q.on_caller_resume("s", 2, &[ev(3), ev(4)]).is_empty());
    assert_eq!(q.delivered("s"), Some(4));
    assert!(q.on_live("s", 4, ev(4)).deliver.is_empty());
    assert_eq!(seqs(&q.on_live("s", 5, ev(5)).deliver), [5]);
}
