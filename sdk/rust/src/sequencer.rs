//! Exactly-once, in-order delivery of `session.event` (protocol § session.event: every event has
//! a contiguous per-session `seq`; `session.resume{sessionId, afterSeq}` replays what was missed).
//!
//! The sequencer remembers, per session, the highest `seq` handed to subscribers. A live event at
//! or below it is a duplicate and dropped. A live event above `delivered + 1` on a *tracked*
//! session is a gap: the event is buffered and the connection fetches the missing ones with
//! `session.resume`; once that answers, the fetched events and then the buffer are delivered in
//! order. An untracked session only gets deduplication (the client never asked for its history).
//! This module is pure bookkeeping: it returns what to deliver and when to fetch; the caller does
//! the I/O.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// Per-session delivery state.
#[derive(Debug, Default)]
struct SessionSeq {
    /// Resumed after a reconnect and gap-filled.
    tracked: bool,
    /// Highest seq delivered; `None` until the first event or an explicit baseline.
    delivered: Option<u64>,
    /// Live events that arrived ahead of a gap, waiting for a fill.
    buffer: BTreeMap<u64, Value>,
    /// A `session.resume` for this session is in flight.
    filling: bool,
}

/// What the caller must do after offering a live event.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct LiveOutcome {
    /// Events to hand to subscribers, in this order.
    pub deliver: Vec<Value>,
    /// Start a `session.resume` with this `afterSeq`.
    pub fill_after: Option<u64>,
}

/// Delivery state of every session the client has seen or tracks.
#[derive(Debug, Default)]
pub(crate) struct Sequencer {
    sessions: HashMap<String, SessionSeq>,
}

/// The `seq` of an event object, if it has a valid one.
pub(crate) fn event_seq(event: &Value) -> Option<u64> {
    event.get("seq").and_then(Value::as_u64)
}

impl Sequencer {
    /// Marks a session tracked. `baseline` is the seq already seen (0 for a new session); it is
    /// only applied when nothing is known yet, so tracking never re-delivers or skips events.
    pub fn track(&mut self, session_id: &str, baseline: Option<u64>) {
        let s = self.sessions.entry(session_id.to_owned()).or_default();
        s.tracked = true;
        if s.delivered.is_none() {
            s.delivered = baseline;
        }
    }

    /// Stops tracking a session (it is no longer resumed after a reconnect).
    pub fn untrack(&mut self, session_id: &str) {
        if let Some(s) = self.sessions.get_mut(session_id) {
            s.tracked = false;
        }
    }

    /// Highest seq delivered for a session.
    pub fn delivered(&self, session_id: &str) -> Option<u64> {
        self.sessions.get(session_id).and_then(|s| s.delivered)
    }

    /// Offers a live `session.event` (its params) received on the connection.
    pub fn on_live(&mut self, session_id: &str, seq: u64, event: Value) -> LiveOutcome {
        let s = self.sessions.entry(session_id.to_owned()).or_default();
        let mut out = LiveOutcome::default();
        if s.filling {
            if s.delivered.is_none_or(|d| seq > d) {
                s.buffer.insert(seq, event);
            }
            return out;
        }
        let delivered = match s.delivered {
            Some(d) => d,
            None => seq.saturating_sub(1),
        };
        if seq <= delivered && s.delivered.is_some() {
            tracing::debug!(session_id, seq, "dropping duplicate session.event");
            return out;
        }
        if seq == delivered + 1 || !s.tracked {
            if seq != delivered + 1 {
                tracing::debug!(session_id, seq, delivered, "gap on an untracked session");
            }
            s.delivered = Some(seq);
            out.deliver.push(event);
            drain_contiguous(s, &mut out.deliver);
        } else {
            s.buffer.insert(seq, event);
            s.filling = true;
            s.delivered = Some(delivered);
            out.fill_after = Some(delivered);
        }
        out
    }

    /// Marks every tracked session as filling (after a reconnect) and returns `(sessionId,
    /// afterSeq)` for the `session.resume` calls to make.
    pub fn begin_resume_all(&mut self) -> Vec<(String, u64)> {
        let mut fills: Vec<(String, u64)> = self
            .sessions
            .iter_mut()
            .filter(|(_, s)| s.tracked)
            .map(|(id, s)| {
                s.filling = true;
                (id.clone(), s.delivered.unwrap_or(0))
            })
            .collect();
        fills.sort();
        fills
    }

    /// Forgets in-flight fills (their connection is gone); buffered events stay.
    pub fn reset_fills(&mut self) {
        for s in self.sessions.values_mut() {
            s.filling = false;
        }
    }

    /// Applies the answer of a fill (`session.resume` made by the client itself). `events` is
    /// `None` when the call failed: the buffer is then delivered as is, with its gaps.
    pub fn on_fill(&mut self, session_id: &str, events: Option<Vec<Value>>) -> Vec<Value> {
        let s = self.sessions.entry(session_id.to_owned()).or_default();
        s.filling = false;
        let mut deliver = Vec::new();
        if let Some(mut events) = events {
            events.sort_by_key(|e| event_seq(e).unwrap_or(0));
            for event in events {
                let Some(seq) = event_seq(&event) else {
                    tracing::warn!(session_id, "session.resume returned an event without seq");
                    continue;
                };
                if s.delivered.is_none_or(|d| seq > d) {
                    s.delivered = Some(seq);
                    deliver.push(event);
                }
            }
        }
        drain_contiguous(s, &mut deliver);
        if !s.buffer.is_empty() {
            tracing::warn!(
                session_id,
                delivered = s.delivered,
                next = s.buffer.keys().next().copied(),
                "session.event gap not filled by session.resume; delivering what arrived"
            );
            for (seq, event) in std::mem::take(&mut s.buffer) {
                s.delivered = Some(seq);
                deliver.push(event);
            }
        }
        deliver
    }

    /// Applies a `session.resume` the caller made itself: its events went to the caller, so
    /// they count as delivered. Returns buffered events that became deliverable.
    pub fn on_caller_resume(
        &mut self,
        session_id: &str,
        after_seq: u64,
        events: &[Value],
    ) -> Vec<Value> {
        let s = self.sessions.entry(session_id.to_owned()).or_default();
        s.tracked = true;
        let seen = events
            .iter()
            .filter_map(event_seq)
            .max()
            .unwrap_or(0)
            .max(after_seq);
        s.delivered = Some(s.delivered.map_or(seen, |d| d.max(seen)));
        let mut deliver = Vec::new();
        if !s.filling {
            drain_contiguous(s, &mut deliver);
        }
        deliver
    }
}

/// Drops buffered events at or below `delivered` and moves contiguous ones to `deliver`.
fn drain_contiguous(s: &mut SessionSeq, deliver: &mut Vec<Value>) {
    let Some(mut d) = s.delivered else { return };
    while let Some(entry) = s.buffer.first_entry() {
        let seq = *entry.key();
        if seq <= d {
            entry.remove();
        } else if seq == d + 1 {
            deliver.push(entry.remove());
            d = seq;
        } else {
            break;
        }
    }
    s.delivered = Some(d);
}

#[cfg(test)]
#[path = "sequencer_tests.rs"]
mod tests;
