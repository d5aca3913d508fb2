//! Native `session.event`s → ACP `session/update` notifications (the mapping table is in
//! docs/ACP.md), and the per-session forwarder task that sends them.
//!
//! | native event | ACP update |
//! |---|---|
//! | `message.user` (another client's prompt, or history on load) | `user_message_chunk` |
//! | `message.delta` | `agent_message_chunk` |
//! | `message.reasoning` | `agent_thought_chunk` |
//! | `tool.call` | `tool_call` (`pending`, kind, title, `locations`, `rawInput`) |
//! | `tool.progress` | `tool_call_update` (`in_progress`, output text so far) |
//! | `diff` | `tool_call_update` with a `diff` content block |
//! | `tool.result` | `tool_call_update` (`completed` / `failed`, output text, `rawOutput`) |
//! | `todos.updated` | `plan` |
//! | `mode.changed` | `current_mode_update` |
//! | `context` (with a known window) | `usage_update` (`used`, `size`) |
//! | `error` | `agent_message_chunk` with the error's message |
//! | `turn.done` | ends the pending `session/prompt` ([`crate::stop_reason`]) |

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{SessionNotification, SessionUpdate};
use serde_json::{json, Value};
use snowpea_sdk::{Client, Error as NativeError, SessionEvent, SessionEvents};

use crate::state::{lock, SessionLink, TurnEnd};
use crate::Conn;

/// Most bytes of tool output copied into one ACP update (the rest is cut, with a note).
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// Most tool calls remembered per session (the oldest are forgotten first).
const MAX_OPEN_CALLS: usize = 256;

/// How long the forwarder waits for the next event before looking again (it loops).
const EVENT_WAIT: Duration = Duration::from_secs(300);

/// What is remembered of one tool call.
#[derive(Debug, Clone, Default)]
pub struct ToolCallInfo {
    /// The native tool name.
    pub name: String,
    /// The absolute path the call acts on, for file tools.
    pub path: Option<PathBuf>,
    /// Output streamed so far (`tool.progress`), bounded by [`MAX_OUTPUT_BYTES`].
    pub output: String,
    /// True once an `in_progress` update was sent.
    pub started: bool,
}

/// The open tool calls of a session, by `callId`, in call order.
#[derive(Debug, Default)]
pub struct ToolCalls {
    calls: HashMap<String, ToolCallInfo>,
    order: Vec<String>,
}

impl ToolCalls {
    fn open(&mut self, id: &str, info: ToolCallInfo) {
        if self.order.len() >= MAX_OPEN_CALLS {
            let old = self.order.remove(0);
            self.calls.remove(&old);
        }
        self.order.push(id.to_owned());
        self.calls.insert(id.to_owned(), info);
    }

    fn close(&mut self, id: &str) -> Option<ToolCallInfo> {
        self.order.retain(|c| c != id);
        self.calls.remove(id)
    }

    /// The newest open call acting on `path`, else the newest open call of a file tool.
    fn for_path(&self, path: &Path) -> Option<String> {
        let newest = |f: &dyn Fn(&ToolCallInfo) -> bool| {
            self.order
                .iter()
                .rev()
                .find(|id| self.calls.get(*id).is_some_and(f))
                .cloned()
        };
        newest(&|c| c.path.as_deref() == Some(path))
            .or_else(|| newest(&|c| tool_kind(&c.name) == "edit"))
    }

    /// The newest open call of tool `name` (an `approval.request` names only the tool).
    pub fn newest_of(&self, name: &str) -> Option<String> {
        self.order
            .iter()
            .rev()
            .find(|id| self.calls.get(*id).is_some_and(|c| c.name == name))
            .cloned()
    }
}

/// The ACP `ToolKind` of a native tool.
pub fn tool_kind(tool: &str) -> &'static str {
    match tool {
        "read_file" | "list_dir" | "view_image" => "read",
        "write_file" | "edit_file" | "apply_patch" | "multi_edit" => "edit",
        "delete_file" => "delete",
        "move_file" | "rename_file" => "move",
        "grep" | "glob" | "search" | "memory_search" | "web_search" | "lsp" => "search",
        "shell" | "exec" | "bash" => "execute",
        "web_fetch" | "fetch" | "browse" => "fetch",
        "think" | "todo_write" | "todos" => "think",
        _ => "other",
    }
}

/// A one-line title for a tool call: the command of a shell call, `tool path` for file
/// tools, else the tool name.
pub fn tool_title(tool: &str, args: &Value) -> String {
    let s = |k: &str| args.get(k).and_then(Value::as_str);
    let title = if let Some(command) = s("command") {
        command.to_owned()
    } else if let Some(path) = s("path") {
        format!("{tool} {path}")
    } else if let Some(pattern) = s("pattern").or(s("query")) {
        format!("{tool} {pattern}")
    } else {
        tool.to_owned()
    };
    truncate(&title, 200)
}

/// The path a tool call acts on, made absolute against the workdir.
fn tool_path(args: &Value, workdir: &Path) -> Option<PathBuf> {
    let path = args.get("path").and_then(Value::as_str)?;
    let path = Path::new(path);
    Some(if path.is_absolute() {
        path.to_owned()
    } else {
        workdir.join(path)
    })
}

/// `s` cut to at most `max` bytes on a char boundary.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Old and new text of a unified diff's hunks (context and removed lines / context and
/// added lines): what ACP's `diff` content block shows. `None` old text when the file is new.
pub fn diff_texts(patch: &str) -> (Option<String>, String) {
    let mut old = String::new();
    let mut new = String::new();
    let mut created = false;
    let mut in_hunk = false;
    for line in patch.lines() {
        if line.starts_with("--- ") && !in_hunk {
            created = line.contains("/dev/null");
            continue;
        }
        if line.starts_with("+++ ") && !in_hunk {
            continue;
        }
        if line.starts_with("@@") {
            in_hunk = true;
            continue;
        }
        if !in_hunk {
            continue;
        }
        match line.as_bytes().first() {
            Some(b'+') => {
                new.push_str(&line[1..]);
                new.push('\n');
            }
            Some(b'-') => {
                old.push_str(&line[1..]);
                old.push('\n');
            }
            Some(b' ') => {
                old.push_str(&line[1..]);
                old.push('\n');
                new.push_str(&line[1..]);
                new.push('\n');
            }
            _ => {}
        }
    }
    ((!created && !old.is_empty()).then_some(old), new)
}

/// How [`map_event`] treats `message.user`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// History (`session/load`): every user message is sent.
    History,
    /// Live: the echo of a prompt this process sent is skipped.
    Live,
}

/// The ACP updates (wire JSON of `SessionUpdate`) for one native event; records tool calls
/// and turn facts on the link. `turn.done` yields nothing here (see [`forward`]).
pub fn map_event(link: &SessionLink, event: &SessionEvent, replay: Replay) -> Vec<Value> {
    let p = &event.payload;
    let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default();
    let text_chunk = |kind: &str, text: &str| json!({ "sessionUpdate": kind, "content": { "type": "text", "text": text } });
    match event.kind.as_str() {
        "message.user" => {
            if replay == Replay::Live {
                let mut own = lock(&link.own_prompts);
                if let Some(i) = own.iter().position(|t| t == s("text")) {
                    own.remove(i);
                    return vec![];
                }
            }
            vec![text_chunk("user_message_chunk", s("text"))]
        }
        "message.delta" if !s("text").is_empty() => {
            vec![text_chunk("agent_message_chunk", s("text"))]
        }
        "message.reasoning" if !s("text").is_empty() => {
            vec![text_chunk("agent_thought_chunk", s("text"))]
        }
        "message.done" => {
            if p.get("truncated").and_then(Value::as_bool) == Some(true) {
                lock(&link.turn_facts).1 = true;
            }
            vec![]
        }
        "error" => {
            let message = format!("{}: {}", s("code"), s("message"));
            lock(&link.turn_facts).0 = Some(message.clone());
            vec![text_chunk(
                "agent_message_chunk",
                &format!("\n[error] {message}\n"),
            )]
        }
        "tool.call" => {
            let name = s("name");
            let args = p.get("args").cloned().unwrap_or_else(|| json!({}));
            let path = tool_path(&args, &link.workdir);
            let mut update = json!({
                "sessionUpdate": "tool_call",
                "toolCallId": s("callId"),
                "title": tool_title(name, &args),
                "kind": tool_kind(name),
                "status": "pending",
                "rawInput": args,
            });
            if let Some(path) = &path {
                update["locations"] = json!([{ "path": path }]);
            }
            lock(&link.tools).open(
                s("callId"),
                ToolCallInfo {
                    name: name.to_owned(),
                    path,
                    ..Default::default()
                },
            );
            vec![update]
        }
        "tool.progress" => {
            let mut tools = lock(&link.tools);
            let Some(call) = tools.calls.get_mut(s("callId")) else {
                return vec![];
            };
            if call.output.len() < MAX_OUTPUT_BYTES {
                call.output.push_str(s("chunk"));
                call.output = truncate(&call.output, MAX_OUTPUT_BYTES);
            }
            call.started = true;
            vec![json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": s("callId"),
                "status": "in_progress",
                "content": [{ "type": "content", "content": { "type": "text", "text": call.output } }],
            })]
        }
        "diff" => {
            let path = tool_path(p, &link.workdir).unwrap_or_default();
            let mut tools = lock(&link.tools);
            let Some(id) = tools.for_path(&path) else {
                return vec![];
            };
            if let Some(call) = tools.calls.get_mut(&id) {
                call.started = true;
            }
            let (old, new) = diff_texts(s("patch"));
            vec![json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": id,
                "status": "in_progress",
                "content": [{ "type": "diff", "path": path, "oldText": old, "newText": new }],
            })]
        }
        "tool.result" => {
            let info = lock(&link.tools).close(s("callId"));
            let ok = p.get("ok").and_then(Value::as_bool).unwrap_or(false);
            let output = match p.get("error").and_then(Value::as_str) {
                Some(error) if !ok => error.to_owned(),
                _ => s("output").to_owned(),
            };
            let mut update = json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": s("callId"),
                "status": if ok { "completed" } else { "failed" },
                "rawOutput": { "ok": ok, "output": truncate(&output, MAX_OUTPUT_BYTES) },
            });
            // A file edit keeps its diff block as content; other tools show their output.
            if info.is_none_or(|c| tool_kind(&c.name) != "edit") || !ok {
                update["content"] = json!([{ "type": "content", "content":
                    { "type": "text", "text": truncate(&output, MAX_OUTPUT_BYTES) } }]);
            }
            vec![update]
        }
        "todos.updated" => {
            let entries: Vec<Value> = p
                .get("todos")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|t| {
                    let status = match t.get("status").and_then(Value::as_str) {
                        Some("in_progress") => "in_progress",
                        Some("completed") => "completed",
                        _ => "pending",
                    };
                    json!({
                        "content": t.get("content").and_then(Value::as_str).unwrap_or_default(),
                        "priority": "medium",
                        "status": status,
                    })
                })
                .collect();
            vec![json!({ "sessionUpdate": "plan", "entries": entries })]
        }
        "mode.changed" if !s("mode").is_empty() => {
            vec![json!({ "sessionUpdate": "current_mode_update", "currentModeId": s("mode") })]
        }
        "context" => match (
            p.get("used").and_then(Value::as_u64),
            p.get("window").and_then(Value::as_u64),
        ) {
            (Some(used), Some(size)) => {
                vec![json!({ "sessionUpdate": "usage_update", "used": used, "size": size })]
            }
            _ => vec![],
        },
        _ => vec![],
    }
}

/// Sends one update (wire JSON) for a session; a shape the schema rejects is logged.
pub fn send(cx: &Conn, session_id: &str, update: Value) {
    match serde_json::from_value::<SessionUpdate>(update) {
        Ok(update) => {
            let _ = cx.send_notification(SessionNotification::new(session_id.to_owned(), update));
        }
        Err(error) => tracing::warn!(%error, "dropped an ACP update the schema rejects"),
    }
}

/// The `turn.done` of an event, with the facts collected during the turn.
fn turn_end(link: &SessionLink, event: &SessionEvent) -> Option<TurnEnd> {
    if event.kind != "turn.done" {
        return None;
    }
    let (error, truncated) = std::mem::take(&mut *lock(&link.turn_facts));
    Some(TurnEnd {
        turn_id: event.turn_id().unwrap_or_default().to_owned(),
        reason: event
            .payload
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        error,
        truncated,
    })
}

/// Replays `events` (history, `session/load`) as updates; returns the highest seq seen.
pub fn replay(cx: &Conn, link: &SessionLink, events: &[SessionEvent]) -> Option<u64> {
    let mut last = None;
    // A history without deltas (a stored log that keeps only whole messages) replays the
    // assistant's `message.done` text instead.
    let mut saw_delta = false;
    for event in events {
        for update in map_event(link, event, Replay::History) {
            send(cx, &link.id, update);
        }
        match event.kind.as_str() {
            "message.delta" => saw_delta = true,
            "message.done" => {
                let p = &event.payload;
                let text = p.get("text").and_then(Value::as_str).unwrap_or_default();
                let assistant = p
                    .get("role")
                    .and_then(Value::as_str)
                    .is_none_or(|r| r == "assistant");
                let interrupted =
                    p.get("messageKind").and_then(Value::as_str) == Some("interrupted");
                if !saw_delta && assistant && !interrupted && !text.is_empty() {
                    let chunk = json!({ "sessionUpdate": "agent_message_chunk",
                        "content": { "type": "text", "text": text } });
                    send(cx, &link.id, chunk);
                }
                saw_delta = false;
            }
            _ => {}
        }
        let _ = turn_end(link, event);
        last = Some(event.seq);
    }
    // Calls a finished history left open are not live any more.
    *lock(&link.tools) = ToolCalls::default();
    last
}

/// Starts the forwarder of a link: every live event after `after_seq` becomes ACP updates;
/// each `turn.done` is broadcast to the prompts waiting on the link.
pub fn start_forwarder(
    client: &Arc<Client>,
    cx: Conn,
    link: Arc<SessionLink>,
    after_seq: Option<u64>,
) {
    client.track(&link.id, after_seq);
    let events = client.events(&link.id);
    let task_link = link.clone();
    let task = tokio::spawn(forward(events, cx, task_link, after_seq));
    *lock(&link.forwarder) = Some(task);
}

async fn forward(
    mut events: SessionEvents,
    cx: Conn,
    link: Arc<SessionLink>,
    after_seq: Option<u64>,
) {
    loop {
        let event = match events.next(EVENT_WAIT).await {
            Ok(event) => event,
            Err(NativeError::Closed) => return,
            Err(_) => continue,
        };
        if after_seq.is_some_and(|after| event.seq <= after) {
            continue;
        }
        for update in map_event(&link, &event, Replay::Live) {
            send(&cx, &link.id, update);
        }
        if let Some(end) = turn_end(&link, &event) {
            let _ = link.turns.send(end);
        }
    }
}

#[cfg(test)]
#[path = "updates_tests.rs"]
mod tests;
