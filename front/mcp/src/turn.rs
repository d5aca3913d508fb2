//! Following one native turn: which events belong to it, the progress line each one is worth
//! to the MCP host, and the summary `snowpea_prompt` returns (answer, tools run, files changed,
//! how it ended).
//!
//! An event belongs to the turn when its payload's `turnId` is the turn's, or when it has
//! none and the last event that had one was of this turn (a session runs one turn at a time;
//! events of a turn queued before ours carry that turn's id). `turn.queued` and
//! `turn.dequeued` of our turn arrive while another turn still runs: they belong to ours but
//! do not mean it runs, so they do not move the "current turn" (the running turn's later
//! events without a `turnId` stay its own).

use std::collections::BTreeSet;

use serde_json::Value;
use snowpea_sdk::SessionEvent;

use crate::transcript::clip;

/// Most tool calls listed in a summary (the rest are counted).
pub const MAX_LISTED_TOOLS: usize = 64;

/// Most changed files listed in a summary (the rest are counted).
pub const MAX_LISTED_FILES: usize = 256;

/// One tool call of the turn, as the summary lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRun {
    /// The native tool name (`shell`, `write_file`, an MCP tool's name, …).
    pub name: String,
    /// `Some(true)` ran fine, `Some(false)` failed or was denied, `None` never finished.
    pub ok: Option<bool>,
    /// The call's id (pairs the call with its result).
    pub call_id: String,
}

/// What one turn did, gathered from its events.
#[derive(Debug, Clone, Default)]
pub struct TurnSummary {
    /// The native `turnId`.
    pub turn_id: String,
    /// True once the turn runs (an event of it other than `turn.queued`/`turn.dequeued`).
    started: bool,
    /// True once `turn.queued` of this turn was seen (it waits behind another turn).
    pub queued: bool,
    /// The `turnId` of the last event that carried one.
    current: Option<String>,
    /// The answer: assistant `message.done` texts joined (deltas while no `message.done` came).
    pub answer: String,
    /// Text of `message.delta`s since the last `message.done`.
    pub pending_text: String,
    /// Tool calls in call order.
    pub tools: Vec<ToolRun>,
    /// Paths of files the turn changed (diffs and the turn's checkpoint), sorted.
    pub files: BTreeSet<String>,
    /// Error messages (`error` events).
    pub errors: Vec<String>,
    /// `turn.done.reason` once it ended (`complete`, `interrupted`, `denied`, …).
    pub reason: Option<String>,
    /// True once `turn.done` came.
    pub done: bool,
}

impl TurnSummary {
    /// A summary for `turn_id` that has seen nothing yet.
    pub fn new(turn_id: &str) -> Self {
        TurnSummary {
            turn_id: turn_id.to_owned(),
            ..Default::default()
        }
    }

    /// Takes one session event (in seq order); returns true when it belongs to the turn.
    pub fn add(&mut self, event: &SessionEvent) -> bool {
        if matches!(event.kind.as_str(), "turn.queued" | "turn.dequeued") {
            let mine = event.turn_id() == Some(self.turn_id.as_str());
            if mine && event.kind == "turn.queued" {
                self.queued = true;
            }
            return mine;
        }
        if let Some(t) = event.turn_id() {
            self.current = Some(t.to_owned());
        }
        if self.current.as_deref() != Some(self.turn_id.as_str()) {
            return false;
        }
        self.started = true;
        let p = &event.payload;
        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default();
        match event.kind.as_str() {
            "message.delta" => self.pending_text.push_str(s("text")),
            "message.done" => {
                let role = p.get("role").and_then(Value::as_str).unwrap_or("assistant");
                if role == "assistant" {
                    let text = match s("text") {
                        "" => std::mem::take(&mut self.pending_text),
                        t => t.to_owned(),
                    };
                    self.pending_text.clear();
                    if !text.trim().is_empty() {
                        if !self.answer.is_empty() {
                            self.answer.push_str("\n\n");
                        }
                        self.answer.push_str(text.trim_end());
                    }
                }
            }
            "tool.call" => self.tools.push(ToolRun {
                name: s("name").to_owned(),
                ok: None,
                call_id: s("callId").to_owned(),
            }),
            "tool.result" => {
                let ok = p.get("ok").and_then(Value::as_bool).unwrap_or(false);
                let id = s("callId");
                if let Some(run) = self.tools.iter_mut().rev().find(|t| t.call_id == id) {
                    run.ok = Some(ok);
                }
            }
            "diff" if !s("path").is_empty() => {
                self.files.insert(s("path").to_owned());
            }
            "checkpoint.updated" => {
                let files = p
                    .pointer("/checkpoint/files")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten();
                for f in files {
                    if let Some(path) = f.get("path").and_then(Value::as_str) {
                        self.files.insert(path.to_owned());
                    }
                }
            }
            "error" => self.errors.push(s("message").to_owned()),
            "turn.done" => {
                self.done = true;
                self.reason = Some(
                    p.get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or("complete")
                        .to_owned(),
                );
                let rest = std::mem::take(&mut self.pending_text);
                if !rest.trim().is_empty() {
                    if !self.answer.is_empty() {
                        self.answer.push_str("\n\n");
                    }
                    self.answer.push_str(rest.trim_end());
                }
            }
            _ => {}
        }
        true
    }

    /// True once the turn runs (it is no longer waiting behind another turn).
    pub fn running(&self) -> bool {
        self.started
    }

    /// The whole answer so far (finished messages and the text streaming now).
    pub fn text_so_far(&self) -> String {
        match (self.answer.is_empty(), self.pending_text.is_empty()) {
            (_, true) => self.answer.clone(),
            (true, false) => self.pending_text.clone(),
            (false, false) => format!("{}\n\n{}", self.answer, self.pending_text),
        }
    }

    /// The summary text `snowpea_prompt` returns: the answer, then the facts.
    pub fn render(&self, session_id: &str) -> String {
        let mut out = String::new();
        let answer = self.text_so_far();
        out.push_str(if answer.trim().is_empty() {
            "(no answer text)"
        } else {
            answer.trim_end()
        });
        out.push_str("\n\n---\n");
        let reason = self.reason.as_deref().unwrap_or("unknown");
        out.push_str(&format!("turn ended: {reason}\n"));
        if self.tools.is_empty() {
            out.push_str("tools run: none\n");
        } else {
            let listed: Vec<String> = self
                .tools
                .iter()
                .take(MAX_LISTED_TOOLS)
                .map(|t| match t.ok {
                    Some(true) => t.name.clone(),
                    Some(false) => format!("{} (failed)", t.name),
                    None => format!("{} (not finished)", t.name),
                })
                .collect();
            let more = self.tools.len().saturating_sub(MAX_LISTED_TOOLS);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            out.push_str(&format!("tools run: {}{more}\n", listed.join(", ")));
        }
        if self.files.is_empty() {
            out.push_str("files changed: none\n");
        } else {
            let listed: Vec<&str> = self
                .files
                .iter()
                .take(MAX_LISTED_FILES)
                .map(String::as_str)
                .collect();
            let more = self.files.len().saturating_sub(MAX_LISTED_FILES);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            out.push_str(&format!("files changed: {}{more}\n", listed.join(", ")));
        }
        for e in self.errors.iter().take(8) {
            out.push_str(&format!("error: {}\n", clip(e, 500)));
        }
        out.push_str(&format!("sessionId: {session_id}\n"));
        out
    }

    /// True when the turn did not end well (the MCP result is then marked `isError`).
    pub fn failed(&self) -> bool {
        matches!(
            self.reason.as_deref(),
            Some("error" | "timeout" | "empty_response")
        )
    }
}

/// The progress line an event of the turn is worth, `None` for events that are not news
/// (text deltas are reported by the caller, throttled, with [`TurnSummary::text_so_far`]).
pub fn progress_line(event: &SessionEvent) -> Option<String> {
    let p = &event.payload;
    let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default();
    Some(match event.kind.as_str() {
        "tool.call" => {
            let args = p.get("args").cloned().unwrap_or(Value::Null);
            let detail = ["command", "path", "pattern", "query", "url"]
                .iter()
                .find_map(|k| args.get(*k).and_then(Value::as_str))
                .map(|d| format!(" {}", clip(d, 200)))
                .unwrap_or_default();
            format!("tool call: {}{detail}", s("name"))
        }
        "tool.result" => {
            let ok = p.get("ok").and_then(Value::as_bool) == Some(true);
            format!("tool {}: {}", if ok { "done" } else { "failed" }, s("name"))
        }
        "diff" => format!("changed {}", s("path")),
        "error" => format!("error: {}", clip(s("message"), 300)),
        "turn.done" => format!(
            "turn done ({})",
            p.get("reason")
                .and_then(Value::as_str)
                .unwrap_or("complete")
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(seq: u64, kind: &str, payload: Value) -> SessionEvent {
        SessionEvent {
            session_id: "s".into(),
            seq,
            kind: kind.into(),
            payload,
            ts: String::new(),
        }
    }

    #[test]
    fn a_turn_is_summarized_and_other_turns_are_ignored() {
        let mut t = TurnSummary::new("t2");
        let events = [
            ev(1, "turn.started", json!({"turnId": "t1"})),
            ev(2, "message.delta", json!({"text": "other"})),
            ev(3, "turn.done", json!({"turnId": "t1"})),
            ev(4, "turn.started", json!({"turnId": "t2"})),
            ev(
                5,
                "tool.call",
                json!({"name": "write_file", "callId": "c1", "args": {"path": "a.txt"}}),
            ),
            ev(6, "diff", json!({"path": "a.txt", "patch": ""})),
            ev(
                7,
                "tool.result",
                json!({"name": "write_file", "callId": "c1", "ok": true}),
            ),
            ev(8, "message.delta", json!({"text": "Wro"})),
            ev(9, "message.delta", json!({"text": "te it."})),
            ev(
                10,
                "turn.done",
                json!({"turnId": "t2", "reason": "complete"}),
            ),
        ];
        let mine: Vec<bool> = events.iter().map(|e| t.add(e)).collect();
        assert_eq!(
            mine,
            [false, false, false, true, true, true, true, true, true, true]
        );
        assert!(t.done);
        let text = t.render("s1");
        assert!(
            text.starts_with("Wrote it.\n\n---\nturn ended: complete\n"),
            "{text}"
        );
        assert!(text.contains("tools run: write_file\n"));
        assert!(text.contains("files changed: a.txt\n"));
        assert!(text.ends_with("sessionId: s1\n"));
    }

    #[test]
    fn a_queued_turn_waits_for_its_own_events() {
        // Our turn t2 is queued while another client's t1 runs; t1's later events without a
        // turnId are still t1's, and only t2's own turn.done ends the summary.
        let mut t = TurnSummary::new("t2");
        let events = [
            ev(1, "turn.started", json!({"turnId": "t1"})),
            ev(2, "turn.queued", json!({"turnId": "t2", "position": 1})),
            ev(3, "message.delta", json!({"text": "not mine"})),
            ev(4, "diff", json!({"path": "theirs.txt"})),
            ev(
                5,
                "turn.done",
                json!({"turnId": "t1", "reason": "complete"}),
            ),
            ev(
                6,
                "turn.dequeued",
                json!({"turnId": "t2", "reason": "started"}),
            ),
            ev(7, "turn.started", json!({"turnId": "t2", "queued": true})),
            ev(
                8,
                "message.done",
                json!({"turnId": "t2", "role": "assistant", "text": "mine"}),
            ),
            ev(
                9,
                "turn.done",
                json!({"turnId": "t2", "reason": "complete"}),
            ),
        ];
        let mut mine = Vec::new();
        for e in &events {
            mine.push(t.add(e));
            if e.seq == 5 {
                assert!(!t.running() && !t.done, "t2 still waits");
            }
        }
        assert_eq!(
            mine,
            [false, true, false, false, false, true, true, true, true]
        );
        assert!(t.queued && t.running() && t.done);
        assert_eq!(t.text_so_far(), "mine");
        assert!(t.files.is_empty(), "{:?}", t.files);
    }

    #[test]
    fn progress_lines_name_the_tool() {
        let e = ev(
            1,
            "tool.call",
            json!({"name": "shell", "args": {"command": "ls -la"}}),
        );
        assert_eq!(progress_line(&e).unwrap(), "tool call: shell ls -la");
        assert!(progress_line(&ev(2, "message.delta", json!({"text": "x"}))).is_none());
    }
}
