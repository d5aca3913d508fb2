//! `turn.done.reason` → ACP `stopReason` (every native reason; docs/ACP.md repeats this).
//!
//! | `turn.done.reason` | ACP answer to `session/prompt` |
//! |---|---|
//! | `complete` | `end_turn` (`max_tokens` when the last answer was `truncated`) |
//! | `interrupted` | `cancelled` |
//! | `timeout` | `cancelled` (the daemon's turn timeout stopped it) |
//! | `budget` | `max_turn_requests` (the tool-round budget ran out) |
//! | `stalled` | `max_turn_requests` (rounds made no progress; the daemon stopped them) |
//! | `denied` | `end_turn` (a refused tool call ended the turn; the refusal is in the updates) |
//! | `empty_response` | `end_turn` (the `error` event before it was shown as text) |
//! | `error` | a JSON-RPC error (-32603) with the turn's `error` event message |
//! | absent or unknown | `end_turn` |
//!
//! After `session/cancel` the answer is `cancelled` whatever the reason (the ACP spec asks
//! for it).

use crate::state::TurnEnd;

/// What a finished turn answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A `stopReason` (its ACP wire name).
    Stop(&'static str),
    /// A JSON-RPC error with this message.
    Error(String),
}

/// Maps a turn's end; `cancelled` is true when the editor sent `session/cancel` during it.
pub fn outcome(end: &TurnEnd, cancelled: bool) -> Outcome {
    if cancelled {
        return Outcome::Stop("cancelled");
    }
    match end.reason.as_deref() {
        Some("complete") if end.truncated => Outcome::Stop("max_tokens"),
        Some("interrupted" | "timeout") => Outcome::Stop("cancelled"),
        Some("budget" | "stalled") => Outcome::Stop("max_turn_requests"),
        Some("error") => Outcome::Error(
            end.error
                .clone()
                .unwrap_or_else(|| "the turn ended with an error".into()),
        ),
        // complete, denied, empty_response, absent or a reason newer than this client.
        _ => Outcome::Stop("end_turn"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(reason: &str) -> TurnEnd {
        TurnEnd {
            turn_id: "t".into(),
            reason: Some(reason.into()),
            error: Some("boom".into()),
            truncated: false,
        }
    }

    #[test]
    fn every_native_reason_has_an_answer() {
        let cases = [
            ("complete", Outcome::Stop("end_turn")),
            ("interrupted", Outcome::Stop("cancelled")),
            ("timeout", Outcome::Stop("cancelled")),
            ("budget", Outcome::Stop("max_turn_requests")),
            ("stalled", Outcome::Stop("max_turn_requests")),
            ("denied", Outcome::Stop("end_turn")),
            ("empty_response", Outcome::Stop("end_turn")),
            ("error", Outcome::Error("boom".into())),
            ("something_new", Outcome::Stop("end_turn")),
        ];
        for (reason, want) in cases {
            assert_eq!(outcome(&end(reason), false), want, "{reason}");
        }
        assert_eq!(outcome(&end("error"), true), Outcome::Stop("cancelled"));
        let truncated = TurnEnd {
            truncated: true,
            ..end("complete")
        };
        assert_eq!(outcome(&truncated, false), Outcome::Stop("max_tokens"));
    }
}
