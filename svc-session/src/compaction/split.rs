//! Where a history is cut for compaction, and the summary used when the provider cannot
//! write one.

use std::collections::BTreeSet;

use snowpea_session_llm::provider::{ChatMessage, Role};

/// The index where the kept tail of `messages` starts: at most `keep` messages are kept, and
/// the tail never starts on a tool result (it moves back to the assistant message whose calls
/// the results answer), so a tool call and its result are never split. 0 means nothing is
/// old enough to summarise.
pub fn split_point(messages: &[ChatMessage], keep: usize) -> usize {
    let mut at = messages.len().saturating_sub(keep);
    while at > 0 && messages[at].role == Role::Tool {
        at -= 1;
    }
    at
}

/// The deterministic summary of `old` used when the provider fails: message counts, the
/// tools used and the last request.
pub fn fallback_summary(old: &[ChatMessage]) -> String {
    let count = |r: Role| old.iter().filter(|m| m.role == r).count();
    let tools: BTreeSet<&str> = old
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.name.as_str()))
        .collect();
    let last_request = old
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.chars().take(500).collect::<String>())
        .unwrap_or_default();
    let mut s = format!(
        "Earlier conversation (summarised without the model): {} messages — {} from the user, \
         {} from the assistant, {} tool results.",
        old.len(),
        count(Role::User),
        count(Role::Assistant),
        count(Role::Tool)
    );
    if !tools.is_empty() {
        s.push_str(&format!(
            "\nTools used: {}.",
            tools.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    if !last_request.is_empty() {
        s.push_str(&format!("\nLast request in that part: {last_request}"));
    }
    s
}

/// One message of the transcript the summariser reads (long ones cut). A sensitive tool
/// result ([`ChatMessage::sensitive`]) is only `[redacted]`: its text never reaches the
/// summariser (spec `tool.result.meta.sensitive`).
pub fn transcript_line(m: &ChatMessage) -> String {
    const CAP: usize = 2000;
    let who = match m.role {
        Role::User => "user".to_owned(),
        Role::Assistant => "assistant".to_owned(),
        Role::Tool => format!("tool {}", m.tool_name.as_deref().unwrap_or_default()),
    };
    if m.sensitive {
        return format!("[{who}] {}", crate::turn::tool_call::REDACTED);
    }
    let mut text: String = m.content.chars().take(CAP).collect();
    if m.content.chars().count() > CAP {
        text.push_str(" …");
    }
    for c in &m.tool_calls {
        text.push_str(&format!("\n  → calls {} {}", c.name, c.arguments));
    }
    format!("[{who}] {text}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use snowpea_session_llm::provider::ToolCall;

    #[test]
    fn the_tail_never_starts_on_a_tool_result() {
        let call = ToolCall {
            id: "c".into(),
            name: "shell".into(),
            arguments: json!({}),
        };
        let m = vec![
            ChatMessage::user("a"),
            ChatMessage::assistant("", vec![call.clone(), call.clone()]),
            ChatMessage::tool_result(&call, "1", false),
            ChatMessage::tool_result(&call, "2", false),
            ChatMessage::assistant("done", vec![]),
        ];
        assert_eq!(split_point(&m, 1), 4);
        assert_eq!(split_point(&m, 2), 1, "moved back to the calls");
        assert_eq!(split_point(&m, 3), 1);
        assert_eq!(split_point(&m, 4), 1);
        assert_eq!(split_point(&m, 9), 0);
        let s = fallback_summary(&m[..4]);
        assert!(
            s.contains("4 messages") && s.contains("Tools used: shell."),
            "{s}"
        );
    }

    #[test]
    fn a_sensitive_result_never_reaches_the_summariser() {
        let call = ToolCall {
            id: "c".into(),
            name: "vault".into(),
            arguments: json!({}),
        };
        let secret = ChatMessage::tool_result(&call, "pin 4242", false).sensitive(true);
        let line = transcript_line(&secret);
        assert_eq!(line, "[tool vault] [redacted]");
        assert!(!line.contains("4242"));
        let plain = transcript_line(&ChatMessage::tool_result(&call, "pin 4242", false));
        assert!(plain.contains("4242"), "{plain}");
        let s = fallback_summary(&[ChatMessage::user("a"), secret]);
        assert!(!s.contains("4242"), "{s}");
    }
}
