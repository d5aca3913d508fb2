//! The conversation history sent to the model, rebuilt from the stored session events so
//! it survives restarts: `message.user` → a user message (what the model was given: its
//! model-only [`MODEL_INPUT`] when stored — `@` references and attachments, never published,
//! see [`crate::events`] — else a command's `expansion.text`, else `text`); a system turn's
//! `turn.started` → a user message
//! of its wire-only `note` (`session.continue`); `message.delta`s and
//! `tool.call`s → the assistant message they belong to; `tool.result` → a tool message
//! (with the images of its `meta.images`, see [`crate::clients::mcp::images_of`]);
//! `compaction` with a summary → the summary message plus the `kept` messages before it.
//! Calls that never got a result (interrupted, crashed) get a failed "interrupted" result
//! at the end of their turn, so every vendor sees a well-formed conversation.

use serde_json::Value;

use snowpea_session_llm::provider::{ChatMessage, Role, ToolCall, ToolImage};

/// The event kinds the history is built from.
pub const KINDS: &[&str] = &[
    "turn.started",
    "message.user",
    "message.delta",
    "tool.call",
    "tool.result",
    "turn.done",
    "compaction",
];

/// The model-only field of a `message.user` holding what the model was given when that
/// differs from its `text` / `expansion.text` ([`crate::events`]).
pub const MODEL_INPUT: &str = "input";

/// Text given to the model for a call that never finished.
pub const INTERRUPTED_RESULT: &str = "interrupted: the call did not finish";

#[derive(Default)]
struct Builder {
    out: Vec<ChatMessage>,
    text: String,
    calls: Vec<ToolCall>,
    open: bool,
    unanswered: Vec<ToolCall>,
}

impl Builder {
    fn flush(&mut self) {
        if self.open && (!self.text.is_empty() || !self.calls.is_empty()) {
            self.unanswered.extend(self.calls.iter().cloned());
            self.out.push(ChatMessage::assistant(
                std::mem::take(&mut self.text),
                std::mem::take(&mut self.calls),
            ));
        }
        self.text.clear();
        self.calls.clear();
        self.open = false;
    }

    fn close_turn(&mut self) {
        self.flush();
        for call in std::mem::take(&mut self.unanswered) {
            self.out
                .push(ChatMessage::tool_result(&call, INTERRUPTED_RESULT, true));
        }
    }
}

fn str_of<'a>(p: &'a Value, key: &str) -> &'a str {
    p.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Rebuilds the history from `(kind, payload)` pairs in seq order (no attached images; see
/// [`rebuild_with`]).
pub fn rebuild(events: impl IntoIterator<Item = (String, Value)>) -> Vec<ChatMessage> {
    rebuild_with(events, &|_| vec![], Replay::none())
}

/// How many images of earlier prompts a rebuilt history carries again.
#[derive(Debug, Clone, Copy)]
pub struct Replay {
    /// Most images in all.
    pub max_images: usize,
    /// Most base64 bytes in all.
    pub max_bytes: usize,
}

impl Replay {
    /// No image is sent again (a model without vision): each is a placeholder line.
    pub fn none() -> Self {
        Replay {
            max_images: 0,
            max_bytes: 0,
        }
    }
}

/// The placeholder of an earlier image that is not sent again.
pub fn image_placeholder(name: &str) -> String {
    format!("[image {name} attached earlier; not sent again]")
}

/// [`rebuild`], with the images attached to earlier prompts: `images_of(turnId)` gives a
/// `message.user`'s stored images (named); the newest are carried again on their user
/// message within `replay`'s caps, the others become [`image_placeholder`] lines.
pub fn rebuild_with(
    events: impl IntoIterator<Item = (String, Value)>,
    images_of: &dyn Fn(&str) -> Vec<(String, ToolImage)>,
    replay: Replay,
) -> Vec<ChatMessage> {
    let mut b = Builder::default();
    // (message index, its named images), in order.
    let mut attached: Vec<(usize, Vec<(String, ToolImage)>)> = Vec::new();
    for (kind, p) in events {
        match kind.as_str() {
            "message.user" => {
                b.close_turn();
                let text = p
                    .get(MODEL_INPUT)
                    .or_else(|| p.pointer("/expansion/text"))
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| str_of(&p, "text"));
                let has_images = p
                    .get("attachments")
                    .and_then(Value::as_array)
                    .is_some_and(|l| l.iter().any(|a| a["kind"] == "image"));
                if has_images {
                    let images = images_of(str_of(&p, "turnId"));
                    if !images.is_empty() {
                        attached.push((b.out.len(), images));
                    }
                }
                b.out.push(ChatMessage::user(text));
            }
            "turn.started" => {
                if let Some(note) = p.get("note").and_then(Value::as_str) {
                    b.close_turn();
                    b.out.push(ChatMessage::user(note));
                }
            }
            "message.delta" => {
                if !b.calls.is_empty() {
                    // Text after a call in the same open message starts a new one.
                    b.flush();
                }
                b.open = true;
                b.text.push_str(str_of(&p, "text"));
            }
            "tool.call" => {
                b.open = true;
                b.calls.push(ToolCall {
                    id: str_of(&p, "callId").to_owned(),
                    name: str_of(&p, "name").to_owned(),
                    arguments: p
                        .get("args")
                        .cloned()
                        .unwrap_or_else(|| Value::Object(Default::default())),
                });
            }
            "tool.result" => {
                b.flush();
                let id = str_of(&p, "callId");
                let Some(pos) = b.unanswered.iter().position(|c| c.id == id) else {
                    continue;
                };
                let call = b.unanswered.remove(pos);
                let ok = p.get("ok").and_then(Value::as_bool).unwrap_or(false);
                let images = p
                    .get("meta")
                    .map(crate::clients::mcp::images_of)
                    .unwrap_or_default();
                b.out.push(
                    ChatMessage::tool_result(&call, str_of(&p, "output"), !ok).with_images(images),
                );
            }
            "turn.done" => b.close_turn(),
            "compaction" => {
                // The summary replaces everything before the kept tail (issue 16).
                if let Some(summary) = p.get("summary").and_then(Value::as_str) {
                    b.flush();
                    let kept = p.get("kept").and_then(Value::as_u64).unwrap_or(0) as usize;
                    let cut = b.out.len().saturating_sub(kept);
                    let tail = b.out.split_off(cut);
                    b.out = vec![crate::compaction::summary_message(summary)];
                    b.out.extend(tail);
                    // Images of summarised prompts are gone; the kept ones moved.
                    attached.retain(|(at, _)| *at >= cut);
                    for (at, _) in &mut attached {
                        *at = *at - cut + 1;
                    }
                }
            }
            _ => {}
        }
    }
    b.close_turn();
    let mut out = b.out;
    // Newest first within the caps (indexes were kept right through compactions).
    let (mut count, mut bytes) = (0usize, 0usize);
    for (at, images) in attached.into_iter().rev() {
        let Some(m) = out.get_mut(at).filter(|m| m.role == Role::User) else {
            continue;
        };
        for (name, image) in images {
            if count < replay.max_images && bytes + image.data.len() <= replay.max_bytes {
                count += 1;
                bytes += image.data.len();
                m.images.push(image);
            } else {
                m.content.push_str("\n\n");
                m.content.push_str(&image_placeholder(&name));
            }
        }
    }
    out
}

/// A rough token estimate of a history (≈ 4 characters per token, plus
/// [`ToolImage::ESTIMATED_TOKENS`] per image).
pub fn estimate_tokens(messages: &[ChatMessage]) -> u64 {
    let chars: usize = messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
                + if m.role == Role::Tool { 8 } else { 4 }
        })
        .sum();
    let images: u64 = messages.iter().map(|m| m.images.len() as u64).sum();
    (chars as u64).div_ceil(4) + images * ToolImage::ESTIMATED_TOKENS
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: &str, p: Value) -> (String, Value) {
        (kind.to_owned(), p)
    }

    #[test]
    fn rebuilds_text_tool_calls_and_results() {
        let h = rebuild(vec![
            ev("message.user", json!({"text": "hi"})),
            ev("message.delta", json!({"text": "Let me "})),
            ev("message.delta", json!({"text": "look."})),
            ev(
                "tool.call",
                json!({"callId": "c1", "name": "read_file", "args": {"path": "a"}}),
            ),
            ev(
                "tool.result",
                json!({"callId": "c1", "name": "read_file", "ok": true, "output": "A"}),
            ),
            ev("message.delta", json!({"text": "Done."})),
            ev("turn.done", json!({"reason": "complete"})),
        ]);
        assert_eq!(h.len(), 4);
        assert_eq!(h[0], ChatMessage::user("hi"));
        assert_eq!(h[1].content, "Let me look.");
        assert_eq!(h[1].tool_calls[0].id, "c1");
        assert_eq!(h[2].role, Role::Tool);
        assert_eq!(h[2].content, "A");
        assert!(!h[2].is_error);
        assert_eq!(h[3], ChatMessage::assistant("Done.", vec![]));
    }

    #[test]
    fn tool_result_images_come_back_from_the_stored_meta() {
        let h = rebuild(vec![
            ev("message.user", json!({"text": "show"})),
            ev(
                "tool.call",
                json!({"callId": "c1", "name": "mcp__ev__get-tiny-image", "args": {}}),
            ),
            ev(
                "tool.result",
                json!({"callId": "c1", "ok": true, "output": "Here's the image:", "meta": {
                    "source": "mcp",
                    "images": [{"mimeType": "image/png", "data": "iVBORw0KGgo="}]
                }}),
            ),
            ev("turn.done", json!({"reason": "complete"})),
        ]);
        assert_eq!(h[2].role, Role::Tool);
        assert_eq!(
            h[2].images,
            vec![ToolImage {
                mime_type: "image/png".into(),
                data: "iVBORw0KGgo=".into()
            }]
        );
        assert!(estimate_tokens(&h) >= ToolImage::ESTIMATED_TOKENS);
    }

    #[test]
    fn unanswered_calls_get_an_interrupted_result() {
        let h = rebuild(vec![
            ev("message.user", json!({"text": "run"})),
            ev(
                "tool.call",
                json!({"callId": "c1", "name": "shell", "args": {"command": "sleep 30"}}),
            ),
            ev(
                "turn.done",
                json!({"reason": "interrupted", "synthetic": true}),
            ),
            ev("message.user", json!({"text": "again"})),
        ]);
        assert_eq!(h.len(), 4);
        assert_eq!(h[2].role, Role::Tool);
        assert!(h[2].is_error);
        assert_eq!(h[2].content, INTERRUPTED_RESULT);
        assert_eq!(h[3], ChatMessage::user("again"));
    }

    /// Images attached to earlier prompts come back on their user message, newest first
    /// within the caps; older ones are a placeholder line; a compaction that summarised a
    /// prompt drops its images and the kept ones stay on their (moved) message.
    #[test]
    fn earlier_images_are_replayed_newest_first_within_the_caps() {
        let img = |turn: &str| {
            vec![(
                format!("{turn}.png"),
                ToolImage {
                    mime_type: "image/png".into(),
                    data: format!("DATA-{turn}"),
                },
            )]
        };
        let images_of = |turn: &str| img(turn);
        let user = |turn: &str, image: bool| {
            let mut p = json!({"text": format!("q {turn}"), "turnId": turn});
            if image {
                p["attachments"] = json!([{"kind": "image", "name": format!("{turn}.png")}]);
            }
            ev("message.user", p)
        };
        let events = vec![
            user("t1", true),
            ev("turn.done", json!({})),
            user("t2", false),
            ev("turn.done", json!({})),
            user("t3", true),
            ev("turn.done", json!({})),
            user("t4", true),
            ev("turn.done", json!({})),
        ];
        let h = rebuild_with(
            events.clone(),
            &images_of,
            Replay {
                max_images: 2,
                max_bytes: 1 << 20,
            },
        );
        assert_eq!(h.len(), 4);
        assert!(h[0].images.is_empty());
        assert!(
            h[0].content.contains(&image_placeholder("t1.png")),
            "{}",
            h[0].content
        );
        assert!(h[1].images.is_empty() && !h[1].content.contains("not sent"));
        assert_eq!(h[2].images[0].data, "DATA-t3");
        assert_eq!(h[3].images[0].data, "DATA-t4");
        // The byte cap: only the newest fits.
        let h = rebuild_with(
            events.clone(),
            &images_of,
            Replay {
                max_images: 9,
                max_bytes: 8,
            },
        );
        assert_eq!(h[3].images.len(), 1);
        assert!(h[2].images.is_empty() && h[2].content.contains("t3.png"));
        // No replay: placeholders only.
        let h = rebuild_with(events.clone(), &images_of, Replay::none());
        assert!(h.iter().all(|m| m.images.is_empty()));
        // After a compaction that kept the last 2 messages, t4's image is on its message.
        let mut compacted = events;
        compacted.push(ev("compaction", json!({"summary": "S", "kept": 2})));
        let h = rebuild_with(
            compacted,
            &images_of,
            Replay {
                max_images: 9,
                max_bytes: 1 << 20,
            },
        );
        assert_eq!(h.len(), 3, "{h:?}");
        assert_eq!(h[1].content, "q t3");
        assert_eq!(h[1].images[0].data, "DATA-t3");
        assert_eq!(h[2].images[0].data, "DATA-t4");
    }
}
