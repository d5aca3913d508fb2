//! A session's native events as plain text: what `snowpea_session_history` returns and what
//! the `snowpea://session/<id>` resources hold. One line per event that matters to a reader
//! (prompts, answers, tool calls and results, file changes, errors, turn ends), each
//! starting with the event's `seq` so a caller can page with `afterSeq`:
//!
//! ```text
//! [3] user: list the files
//! [5] tool call list_dir {"path":"."}
//! [6] tool result list_dir ok: a.txt
//! [8] assistant: There is one file.
//! [9] turn done (complete)
//! ```
//!
//! Streaming fragments (`message.delta`, reasoning, tool progress) are left out: the
//! `message.done` that follows them holds the whole message.

use serde_json::Value;
use snowpea_sdk::SessionEvent;

/// Most bytes of one tool's arguments or output quoted in a line (the rest is cut, `…`).
pub const MAX_QUOTE_BYTES: usize = 2_000;

/// Most bytes of one prompt, answer or error message quoted in a line (the rest is cut, with
/// a note saying how much): one huge prompt must not push everything else out of the
/// transcript.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;

/// Most bytes of one transcript (older lines are dropped first, with a note).
pub const MAX_TRANSCRIPT_BYTES: usize = 512 * 1024;

/// `s` cut to at most `max` bytes on a char boundary; when cut, followed by
/// `… [N more bytes cut]`.
pub fn clip_noted(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} more bytes cut]", &s[..end], s.len() - end)
}

/// `s` cut to at most `max` bytes on a char boundary, with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn str_of<'a>(payload: &'a Value, key: &str) -> &'a str {
    payload.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The transcript line of one event, `None` for events a reader does not need.
pub fn line(event: &SessionEvent) -> Option<String> {
    let p = &event.payload;
    let text = match event.kind.as_str() {
        "message.user" => format!("user: {}", clip_noted(str_of(p, "text"), MAX_MESSAGE_BYTES)),
        "message.done" => {
            let role = p.get("role").and_then(Value::as_str).unwrap_or("assistant");
            let body = str_of(p, "text");
            if role == "user" || body.is_empty() {
                return None;
            }
            format!("{role}: {}", clip_noted(body, MAX_MESSAGE_BYTES))
        }
        "tool.call" => {
            let args = p.get("args").map(Value::to_string).unwrap_or_default();
            format!(
                "tool call {} {}",
                str_of(p, "name"),
                clip(&args, MAX_QUOTE_BYTES)
            )
        }
        "tool.result" => {
            let ok = p.get("ok").and_then(Value::as_bool) == Some(true);
            let detail = if ok {
                str_of(p, "output")
            } else {
                p.get("error")
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| str_of(p, "output"))
            };
            format!(
                "tool result {} {}: {}",
                str_of(p, "name"),
                if ok { "ok" } else { "error" },
                clip(detail.trim_end(), MAX_QUOTE_BYTES)
            )
        }
        "diff" => format!("changed {}", clip(str_of(p, "path"), MAX_QUOTE_BYTES)),
        "error" => format!(
            "error {}: {}",
            clip(str_of(p, "code"), 200),
            clip_noted(str_of(p, "message"), MAX_QUOTE_BYTES)
        ),
        "turn.done" => format!(
            "turn done ({})",
            p.get("reason")
                .and_then(Value::as_str)
                .unwrap_or("complete")
        ),
        "mode.changed" => format!("mode changed to {}", str_of(p, "mode")),
        _ => return None,
    };
    Some(format!("[{}] {text}", event.seq))
}

/// The transcript of `events` (in seq order), bounded by [`MAX_TRANSCRIPT_BYTES`]: when
/// longer, the oldest lines are dropped and the first line says how many. Every line is
/// bounded ([`MAX_MESSAGE_BYTES`], [`MAX_QUOTE_BYTES`]), so the newest line is always shown.
pub fn render(events: &[SessionEvent]) -> String {
    let lines: Vec<String> = events
        .iter()
        .filter_map(line)
        .map(|l| clip_noted(&l, MAX_MESSAGE_BYTES + 200))
        .collect();
    let mut total = 0;
    let mut start = lines.len();
    while start > 0 && total + lines[start - 1].len() < MAX_TRANSCRIPT_BYTES {
        total += lines[start - 1].len() + 1;
        start -= 1;
    }
    let mut out = String::with_capacity(total + 80);
    if start > 0 {
        out.push_str(&format!(
            "(older events left out; page with afterSeq to read them: {} lines dropped)\n",
            start
        ));
    }
    for l in &lines[start..] {
        out.push_str(l);
        out.push('\n');
    }
    out
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
    fn lines_for_what_a_reader_needs() {
        let events = vec![
            ev(1, "turn.started", json!({"turnId": "t"})),
            ev(2, "message.user", json!({"text": "hi"})),
            ev(3, "message.delta", json!({"text": "Hel"})),
            ev(
                4,
                "tool.call",
                json!({"name": "shell", "args": {"command": "ls"}, "callId": "c"}),
            ),
            ev(
                5,
                "tool.result",
                json!({"name": "shell", "ok": false, "error": "denied"}),
            ),
            ev(
                6,
                "message.done",
                json!({"role": "assistant", "text": "Hello"}),
            ),
            ev(7, "turn.done", json!({"turnId": "t", "reason": "denied"})),
        ];
        assert_eq!(
            render(&events),
            "[2] user: hi\n[4] tool call shell {\"command\":\"ls\"}\n[5] tool result shell error: denied\n[6] assistant: Hello\n[7] turn done (denied)\n"
        );
    }

    #[test]
    fn a_huge_prompt_is_cut_not_everything_dropped() {
        let huge = "x".repeat(MAX_TRANSCRIPT_BYTES + 10);
        let events = vec![
            ev(1, "message.user", json!({"text": "first"})),
            ev(2, "message.user", json!({"text": huge})),
            ev(
                3,
                "message.done",
                json!({"role": "assistant", "text": "é".repeat(40_000)}),
            ),
            ev(4, "turn.done", json!({"reason": "complete"})),
        ];
        let text = render(&events);
        assert!(!text.contains("lines dropped"), "{}", &text[..200]);
        assert!(
            text.starts_with("[1] user: first\n[2] user: xxx"),
            "{}",
            &text[..200]
        );
        let cut = MAX_TRANSCRIPT_BYTES + 10 - MAX_MESSAGE_BYTES;
        assert!(text.contains(&format!("x… [{cut} more bytes cut]\n[3] assistant: é")));
        assert!(text.contains("more bytes cut]\n[4] turn done (complete)\n"));
        assert!(text.len() < MAX_TRANSCRIPT_BYTES);
    }

    #[test]
    fn clip_respects_char_boundaries() {
        assert_eq!(clip("héllo", 2), "h…");
        assert_eq!(clip("abc", 5), "abc");
    }
}
