//! Server→client requests of the daemon → ACP `session/request_permission`.
//!
//! `approval.request` → a permission request on the tool call (`toolCallId` = the newest open
//! `tool.call` of that tool, else `approval-<requestId>`) with four options:
//!
//! | ACP option (`optionId` = `kind`) | native answer |
//! |---|---|
//! | `allow_once` | `{decision: allow, scope: once}` |
//! | `allow_always` | `{decision: allow, scope: project}` (remembered in the project allowlist) |
//! | `reject_once` | `{decision: deny, scope: once}` |
//! | `reject_always` | `{decision: deny, scope: project}` |
//! | outcome `cancelled`, `session/cancel`, no answer within `timeoutSec` | `{decision: deny}` |
//!
//! `question.request` (the `ask_user` tool): ACP v1 has no stable elicitation request, so a
//! question with options becomes a permission request with one `allow_once` option per
//! answer and a `reject_once` "Skip"; a question without options (free text), a
//! multi-select or a secret question is declined at once with an empty answer (the model
//! sees no answer and goes on) — never a hang.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{RequestPermissionOutcome, RequestPermissionRequest};
use serde_json::{json, Value};
use snowpea_sdk::{Client, RpcError};

use crate::state::{lock, AcpAgent, SessionLink};
use crate::updates::tool_title;
use crate::{errors, Conn};

/// How long a permission request waits when the daemon gives no `timeoutSec`.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3600);

/// Registers the `approval.request` and `question.request` handlers on the daemon client.
pub fn register(agent: &Arc<AcpAgent>, client: &Arc<Client>) {
    let a = Arc::downgrade(agent);
    client.on_request("approval.request", move |params: Value| {
        let agent = a.upgrade();
        async move {
            match agent {
                Some(agent) => Ok::<Value, RpcError>(approval(&agent, params).await),
                None => Ok(json!({ "decision": "deny", "reason": "snowpea acp is exiting" })),
            }
        }
    });
    let a = Arc::downgrade(agent);
    client.on_request("question.request", move |params: Value| {
        let agent = a.upgrade();
        async move {
            match agent {
                Some(agent) => Ok::<Value, RpcError>(question(&agent, params).await),
                None => Ok(json!({ "answers": [] })),
            }
        }
    });
}

/// The wait of a request: its `timeoutSec` (plus a little), else [`DEFAULT_WAIT`].
fn wait_of(params: &Value) -> Duration {
    params
        .get("timeoutSec")
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_WAIT, |s| {
            Duration::from_secs_f64(s.min(86_400.0) + 2.0)
        })
}

/// Asks the editor; `None` when it answered cancelled, the session was cancelled, the wait
/// ran out or the editor is gone.
async fn ask(cx: &Conn, link: &SessionLink, request: Value, wait: Duration) -> Option<String> {
    let request: RequestPermissionRequest = errors::from_wire(request).ok()?;
    let mut cancel = link.cancel.subscribe();
    cancel.mark_unchanged();
    let sent = cx.send_request(request).block_task();
    let answer = tokio::select! {
        answer = tokio::time::timeout(wait, sent) => answer.ok()?.ok()?,
        _ = cancel.changed() => return None,
    };
    match answer.outcome {
        RequestPermissionOutcome::Selected(selected) => Some(selected.option_id.to_string()),
        _ => None,
    }
}

/// `approval.request` → `session/request_permission` → the native answer.
pub async fn approval(agent: &Arc<AcpAgent>, params: Value) -> Value {
    let deny = |reason: &str| json!({ "decision": "deny", "reason": reason });
    let session_id = params
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (Some(link), Some(cx)) = (agent.find(session_id), agent.conn()) else {
        return deny("the session is not open in this editor");
    };
    let tool = params.get("tool").and_then(Value::as_str).unwrap_or("tool");
    let args = params.get("args").cloned().unwrap_or_else(|| json!({}));
    let request_id = params
        .get("requestId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let tool_call_id = lock(&link.tools)
        .newest_of(tool)
        .unwrap_or_else(|| format!("approval-{request_id}"));
    let mut title = tool_title(tool, &args);
    if let Some(note) = params.get("note").and_then(Value::as_str) {
        title = format!("{title} ({note})");
    }
    let request = json!({
        "sessionId": link.id,
        "toolCall": {
            "toolCallId": tool_call_id,
            "title": title,
            "kind": crate::updates::tool_kind(tool),
            "status": "pending",
            "rawInput": args,
        },
        "options": [
            { "optionId": "allow_once", "name": "Allow once", "kind": "allow_once" },
            { "optionId": "allow_always", "name": "Always allow in this project", "kind": "allow_always" },
            { "optionId": "reject_once", "name": "Reject", "kind": "reject_once" },
            { "optionId": "reject_always", "name": "Always reject in this project", "kind": "reject_always" },
        ],
    });
    let answer = ask(&cx, &link, request, wait_of(&params)).await;
    native_decision(answer.as_deref())
}

/// The native `approval.request` result for the option the editor picked.
pub fn native_decision(option_id: Option<&str>) -> Value {
    match option_id {
        Some("allow_once") => json!({ "decision": "allow", "scope": "once" }),
        Some("allow_always") => json!({ "decision": "allow", "scope": "project" }),
        Some("reject_always") => {
            json!({ "decision": "deny", "scope": "project", "reason": "rejected in the editor" })
        }
        Some("reject_once") => {
            json!({ "decision": "deny", "scope": "once", "reason": "rejected in the editor" })
        }
        _ => json!({ "decision": "deny", "reason": "cancelled in the editor" }),
    }
}

/// `question.request` → one permission request per answerable question, else a decline.
pub async fn question(agent: &Arc<AcpAgent>, params: Value) -> Value {
    let session_id = params
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (Some(link), Some(cx)) = (agent.find(session_id), agent.conn()) else {
        return json!({ "answers": [] });
    };
    let request_id = params
        .get("requestId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let questions = params
        .get("questions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut answers = Vec::new();
    for (i, q) in questions.iter().take(16).enumerate() {
        let options: Vec<&str> = q
            .get("options")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|o| o.get("label").and_then(Value::as_str))
            .take(32)
            .collect();
        let multi = q.get("multi").and_then(Value::as_bool) == Some(true);
        let secret = q.get("secret").and_then(Value::as_bool) == Some(true);
        if options.is_empty() || multi || secret {
            answers.push(json!({ "selected": [], "text": null }));
            continue;
        }
        let mut acp_options: Vec<Value> = options
            .iter()
            .enumerate()
            .map(|(n, label)| json!({ "optionId": format!("answer-{n}"), "name": label, "kind": "allow_once" }))
            .collect();
        acp_options.push(json!({ "optionId": "skip", "name": "Skip", "kind": "reject_once" }));
        let title = q
            .get("question")
            .and_then(Value::as_str)
            .unwrap_or("Question");
        let request = json!({
            "sessionId": link.id,
            "toolCall": {
                "toolCallId": format!("question-{request_id}-{i}"),
                "title": crate::updates::truncate(title, 500),
                "kind": "think",
                "status": "pending",
            },
            "options": acp_options,
        });
        let picked = ask(&cx, &link, request, wait_of(&params)).await;
        let label = picked
            .as_deref()
            .and_then(|id| id.strip_prefix("answer-"))
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| options.get(n));
        answers.push(match label {
            Some(label) => json!({ "selected": [label] }),
            None => json!({ "selected": [], "text": null }),
        });
    }
    json!({ "answers": answers })
}
