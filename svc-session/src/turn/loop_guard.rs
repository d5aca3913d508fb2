//! Loop and stall detection of one turn (spec `loop.suspected{tool, count}` and
//! `turn.done{reason:"stalled"}`; issue 32 item 2).
//!
//! Every tool call is reduced to a **signature**: the tool, its arguments in canonical form
//! (object keys sorted at every level, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are one call)
//! and its result (the ok flag and the output the model got). A tool round (one model answer
//! and the calls it asked for) **makes progress** when one of its calls has a signature this
//! turn has not seen: a new tool, new arguments, or the same call answering differently (a
//! file changed, a command printed something new). A round without one is **stale**.
//!
//! Thresholds (constants below):
//! * [`SUSPECT_AFTER`] (2) stale rounds in a row: `loop.suspected` once for the streak, naming
//!   the call repeated most among the last [`WINDOW`] (20) tool calls (`count` = how often it
//!   occurs there), and the model gets a `[system]` nudge to change its approach;
//! * [`STALL_AFTER`] (4) stale rounds in a row: the turn ends `stalled` (the model had two
//!   more rounds after the nudge);
//! * a round with progress ends the streak: a later streak gets its own `loop.suspected`;
//!   so does a prompt steered into the turn (the person said something new).
//!
//! A model calling `list_dir{path:"."}` every round therefore sees its third identical call
//! answered with a nudge and its turn ends after the fifth, instead of running to the
//! tool-round budget. Memory is bounded by the turn's tool calls (one 64-bit digest each).

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use serde_json::Value;

/// How many of the latest tool calls `loop.suspected.count` looks at (spec: "Repeats seen
/// in the last 20 tool calls").
pub const WINDOW: usize = 20;
/// Stale rounds in a row that emit `loop.suspected` and nudge the model.
pub const SUSPECT_AFTER: u32 = 2;
/// Stale rounds in a row that end the turn `stalled`.
pub const STALL_AFTER: u32 = 4;

/// What the turn does after a tool round ([`LoopGuard::end_round`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on (the round made progress, or the streak is still short).
    Continue,
    /// Emit `loop.suspected{tool, count}` and nudge the model ([`nudge`]), then go on.
    Suspected {
        /// The tool whose call repeated most in the window.
        tool: String,
        /// How often that call occurs in the last [`WINDOW`] tool calls.
        count: u32,
    },
    /// End the turn `stalled`.
    Stalled,
}

/// The repeat and progress bookkeeping of one turn (module doc).
#[derive(Debug, Default)]
pub struct LoopGuard {
    /// Every signature seen this turn.
    seen: HashSet<u64>,
    /// The last [`WINDOW`] calls: (tool, signature).
    window: VecDeque<(String, u64)>,
    /// A call of the current round had a new signature.
    progressed: bool,
    /// Stale rounds in a row.
    stale: u32,
    /// `loop.suspected` was emitted for the current streak.
    suspected: bool,
}

impl LoopGuard {
    /// Records one finished tool call of the current round.
    pub fn record(&mut self, tool: &str, args: &Value, ok: bool, output: &str) {
        let sig = signature(tool, args, ok, output);
        if self.seen.insert(sig) {
            self.progressed = true;
        }
        if self.window.len() == WINDOW {
            self.window.pop_front();
        }
        self.window.push_back((tool.to_owned(), sig));
    }

    /// Closes the current round (after its calls were [`record`](Self::record)ed) and says
    /// what the turn does next.
    pub fn end_round(&mut self) -> Verdict {
        if std::mem::take(&mut self.progressed) {
            self.stale = 0;
            self.suspected = false;
            return Verdict::Continue;
        }
        self.stale += 1;
        if self.stale >= STALL_AFTER {
            return Verdict::Stalled;
        }
        if self.stale >= SUSPECT_AFTER && !self.suspected {
            self.suspected = true;
            let (tool, count) = self.most_repeated();
            return Verdict::Suspected { tool, count };
        }
        Verdict::Continue
    }

    /// Ends the current stale streak without progress (a prompt was steered in).
    pub fn restart_streak(&mut self) {
        self.stale = 0;
        self.suspected = false;
    }

    /// The call occurring most often in the window (the latest of equals) and its count.
    fn most_repeated(&self) -> (String, u32) {
        let mut best: Option<(&str, u32)> = None;
        for (i, (tool, sig)) in self.window.iter().enumerate() {
            // Count each signature once, at its latest occurrence.
            if self.window.iter().skip(i + 1).any(|(_, s)| s == sig) {
                continue;
            }
            let n = self.window.iter().filter(|(_, s)| s == sig).count() as u32;
            if best.is_none_or(|(_, b)| n >= b) {
                best = Some((tool, n));
            }
        }
        best.map(|(t, n)| (t.to_owned(), n)).unwrap_or_default()
    }
}

/// The `[system]` note the model gets with `loop.suspected`.
pub fn nudge(tool: &str, count: u32) -> String {
    format!(
        "Loop suspected: the last tool rounds repeated calls you had already made ({tool}, \
         {count} times with the same arguments and the same result) and brought nothing new. \
         Repeating them will not help: change your approach, or answer now with what you have."
    )
}

/// The signature of a call (module doc): tool, canonical arguments and result, hashed.
fn signature(tool: &str, args: &Value, ok: bool, output: &str) -> u64 {
    let mut h = DefaultHasher::new();
    tool.hash(&mut h);
    hash_canonical(args, &mut h);
    ok.hash(&mut h);
    output.hash(&mut h);
    h.finish()
}

/// Hashes `v` with object keys in sorted order (whatever order the model wrote them in).
fn hash_canonical(v: &Value, h: &mut DefaultHasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.to_string()).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(a) => {
            (4u8, a.len()).hash(h);
            for x in a {
                hash_canonical(x, h);
            }
        }
        Value::Object(m) => {
            (5u8, m.len()).hash(h);
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                k.hash(h);
                hash_canonical(&m[k], h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round(g: &mut LoopGuard, calls: &[(&str, Value, &str)]) -> Verdict {
        for (tool, args, out) in calls {
            g.record(tool, args, true, out);
        }
        g.end_round()
    }

    #[test]
    fn the_same_call_every_round_is_suspected_once_then_stalls() {
        let mut g = LoopGuard::default();
        let call = || [("list_dir", json!({"path": "."}), "a.txt\n")];
        assert_eq!(round(&mut g, &call()), Verdict::Continue, "new");
        assert_eq!(round(&mut g, &call()), Verdict::Continue, "stale 1");
        assert_eq!(
            round(&mut g, &call()),
            Verdict::Suspected {
                tool: "list_dir".into(),
                count: 3
            }
        );
        assert_eq!(round(&mut g, &call()), Verdict::Continue, "once per streak");
        assert_eq!(round(&mut g, &call()), Verdict::Stalled);
    }

    #[test]
    fn key_order_does_not_make_a_call_new_but_a_new_result_does() {
        let mut g = LoopGuard::default();
        round(
            &mut g,
            &[("grep", json!({"a": 1, "b": [1, {"x": 2, "y": 3}]}), "r")],
        );
        let same = [("grep", json!({"b": [1, {"y": 3, "x": 2}], "a": 1}), "r")];
        assert_eq!(round(&mut g, &same), Verdict::Continue);
        assert!(matches!(round(&mut g, &same), Verdict::Suspected { .. }));
        // The file changed: the same call answers differently — progress ends the streak.
        let changed = [("grep", json!({"a": 1, "b": [1, {"x": 2, "y": 3}]}), "r2")];
        assert_eq!(round(&mut g, &changed), Verdict::Continue);
        assert_eq!(g.stale, 0);
        // A new streak is suspected again.
        assert_eq!(round(&mut g, &changed), Verdict::Continue);
        assert!(matches!(round(&mut g, &changed), Verdict::Suspected { .. }));
    }

    #[test]
    fn a_steered_prompt_restarts_the_streak() {
        let mut g = LoopGuard::default();
        let call = || [("shell", json!({"command": "make"}), "failed")];
        for _ in 0..3 {
            round(&mut g, &call());
        }
        g.restart_streak();
        assert_eq!(round(&mut g, &call()), Verdict::Continue);
        assert!(matches!(round(&mut g, &call()), Verdict::Suspected { .. }));
    }

    #[test]
    fn rounds_with_progress_never_stall() {
        let mut g = LoopGuard::default();
        for i in 0..100 {
            let calls = [
                ("list_dir", json!({"path": "."}), "same".to_owned()),
                (
                    "read_file",
                    json!({"path": format!("f{i}")}),
                    format!("body {i}"),
                ),
            ];
            for (t, a, o) in &calls {
                g.record(t, a, true, o);
            }
            assert_eq!(g.end_round(), Verdict::Continue, "round {i}");
        }
    }

    #[test]
    fn the_count_is_the_most_repeated_call_of_the_last_twenty() {
        let mut g = LoopGuard::default();
        // Two calls alternating: each stale round repeats one of them.
        for i in 0..30 {
            let (tool, out) = if i % 2 == 0 { ("a", "x") } else { ("b", "y") };
            g.record(tool, &json!({}), true, out);
        }
        let (_, n) = g.most_repeated();
        assert_eq!(n, 10, "20 calls in the window, half each");
        // A failed call and a successful one with the same output differ.
        let mut g = LoopGuard::default();
        g.record("shell", &json!({"command": "x"}), true, "out");
        g.end_round();
        g.record("shell", &json!({"command": "x"}), false, "out");
        assert_eq!(g.end_round(), Verdict::Continue);
        assert_eq!(g.stale, 0);
    }
}
