//! The daemon's server→client requests for sessions this process is the origin of:
//! `approval.request` (a tool call that needs a yes/no) and `question.request` (the agent's
//! `ask_user` tool).
//!
//! Approval rules (never a silent allow):
//! * The turn was started by a `snowpea_prompt` call of a host that declared form
//!   **elicitation**: the request is put to it as an elicitation
//!   (`decision`: `allow` once / `allow_session` / `deny`, and an optional `reason`). Accept
//!   with `allow` → `{decision: allow, scope: once}`, `allow_session` →
//!   `{decision: allow, scope: session}`, `deny` → `{decision: deny, reason}`; decline or
//!   cancel → `deny`. A denial ends the turn as the native protocol does. While it waits,
//!   another client may answer (`approval.respond`; its answer wins and the elicitation is
//!   dropped); cancelling the `snowpea_prompt` call denies.
//! * The host cannot elicit, the turn was not started through this server, or the
//!   elicitation itself failed (the host errored or did not
//!   answer within the request's `timeoutSec`): this process answers with an error, so the
//!   daemon keeps the request pending — it follows the session's mode, any other connected
//!   client (`snowpea chat`) can answer it with `approval.respond`, and without an answer the
//!   daemon's own timeout (`approvals.timeoutSec`) denies it.
//!
//! Questions follow the same rules: one elicitation with a field per question (a choice
//! list when the question has options), or left to other clients.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitationAction};
use rmcp::{Peer, RoleServer};
use serde_json::{json, Map, Value};
use snowpea_sdk::{Client, RpcError};
use tokio::sync::broadcast::error::RecvError;

use crate::server::{can_elicit, State};
use crate::transcript::clip;

/// How long an elicitation waits when the request gives no `timeoutSec` (the daemon's own
/// default approval timeout).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);

/// Most questions of one `question.request` put in one elicitation.
pub const MAX_QUESTIONS: usize = 16;

/// The error that leaves a request pending for other clients.
fn leave_pending(why: &str) -> RpcError {
    RpcError::new(
        snowpea_sdk::SERVER_ERROR,
        format!("{why}; answer it from another Snowpea client (snowpea chat) or it times out"),
    )
}

/// Registers the `approval.request` and `question.request` handlers on the daemon client.
pub fn register(state: &Arc<State>, client: &Arc<Client>) {
    let s = Arc::downgrade(state);
    let c = Arc::downgrade(client);
    client.on_request("approval.request", move |params: Value| {
        let (state, client) = (s.upgrade(), c.upgrade());
        async move {
            match (state, client) {
                (Some(state), Some(client)) => approval(&state, &client, params).await,
                _ => Err(leave_pending("snowpea mcp serve is exiting")),
            }
        }
    });
    let s = Arc::downgrade(state);
    let c = Arc::downgrade(client);
    client.on_request("question.request", move |params: Value| {
        let (state, client) = (s.upgrade(), c.upgrade());
        async move {
            match (state, client) {
                (Some(state), Some(client)) => question(&state, &client, params).await,
                _ => Err(leave_pending("snowpea mcp serve is exiting")),
            }
        }
    });
}

/// The wait of a request: its `timeoutSec` (at most a day), else [`DEFAULT_WAIT`].
fn wait_of(params: &Value) -> Duration {
    params
        .get("timeoutSec")
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_WAIT, |s| Duration::from_secs_f64(s.min(86_400.0)))
}

/// The host to ask about a session: the one whose `snowpea_prompt` call is running a turn
/// in it, when it can elicit. A turn started elsewhere (a person typing in `snowpea chat` in
/// a session this server created) is not put to the MCP host: that client answers it.
fn host_for(
    state: &State,
    session_id: &str,
) -> Option<(Peer<RoleServer>, tokio_util::sync::CancellationToken)> {
    let turn = state.running_turn(session_id)?;
    can_elicit(&turn.peer).then(|| (turn.peer.clone(), turn.cancel.clone()))
}

/// How an elicitation ended.
enum Asked {
    /// The host answered.
    Answered(ElicitationAction, Option<Value>),
    /// Another client resolved the request first.
    ResolvedElsewhere,
    /// The `snowpea_prompt` call was cancelled.
    Cancelled,
    /// The elicitation failed (host error or timeout).
    Failed(String),
}

/// Puts one elicitation to the host, racing another client's answer and the call's
/// cancellation.
async fn elicit(
    client: &Client,
    peer: &Peer<RoleServer>,
    cancel: tokio_util::sync::CancellationToken,
    request_id: &str,
    message: String,
    schema: Value,
    wait: Duration,
) -> Asked {
    let params: ElicitRequestParams = match serde_json::from_value(json!({
        "mode": "form",
        "message": message,
        "requestedSchema": schema,
    })) {
        Ok(p) => p,
        Err(e) => return Asked::Failed(format!("building the elicitation: {e}")),
    };
    let mut notifications = client.subscribe();
    let resolved_elsewhere = async {
        loop {
            match notifications.recv().await {
                Ok(n) if n.method == "approval.resolved" || n.method == "question.resolved" => {
                    if n.params.get("requestId").and_then(Value::as_str) == Some(request_id) {
                        return;
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    };
    tokio::select! {
        answer = peer.create_elicitation_with_timeout(params, Some(wait)) => match answer {
            Ok(result) => Asked::Answered(result.action, result.content),
            Err(e) => Asked::Failed(e.to_string()),
        },
        _ = resolved_elsewhere => Asked::ResolvedElsewhere,
        _ = cancel.cancelled() => Asked::Cancelled,
    }
}

/// The elicitation schema of an approval.
pub fn approval_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "description": "allow runs this call; allow_session also allows calls like it for the rest of the session; deny refuses it and ends the turn.",
                "enum": ["allow", "allow_session", "deny"],
                "enumNames": ["Allow once", "Allow for this session", "Deny"]
            },
            "reason": {
                "type": "string",
                "title": "Reason (when denying)",
                "description": "Told to the agent with the refusal."
            }
        },
        "required": ["decision"]
    })
}

/// The native answer for an elicitation outcome; `None` leaves the request pending.
pub fn approval_answer(action: &ElicitationAction, content: Option<&Value>) -> Value {
    let reason = content
        .and_then(|c| c.get("reason"))
        .and_then(Value::as_str)
        .filter(|r| !r.trim().is_empty())
        .map(|r| clip(r, 1_000));
    match action {
        ElicitationAction::Accept => {
            match content
                .and_then(|c| c.get("decision"))
                .and_then(Value::as_str)
            {
                Some("allow") => json!({ "decision": "allow", "scope": "once" }),
                Some("allow_session") => json!({ "decision": "allow", "scope": "session" }),
                _ => json!({
                    "decision": "deny",
                    "scope": "once",
                    "reason": reason.unwrap_or_else(|| "denied in the MCP host".into()),
                }),
            }
        }
        ElicitationAction::Decline => json!({
            "decision": "deny",
            "reason": reason.unwrap_or_else(|| "declined in the MCP host".into()),
        }),
        _ => json!({ "decision": "deny", "reason": "cancelled in the MCP host" }),
    }
}

/// `approval.request` → elicitation → the native answer (or an error that leaves it pending).
pub async fn approval(
    state: &Arc<State>,
    client: &Client,
    params: Value,
) -> Result<Value, RpcError> {
    let s = |k: &str| params.get(k).and_then(Value::as_str).unwrap_or_default();
    let session_id = s("sessionId");
    let Some((peer, cancel)) = host_for(state, session_id) else {
        return Err(leave_pending(
            "the MCP host cannot answer approvals (no elicitation)",
        ));
    };
    let args = params.get("args").cloned().unwrap_or_else(|| json!({}));
    let detail = ["command", "path", "url", "query"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::to_owned)
        .unwrap_or_else(|| args.to_string());
    let mut message = format!(
        "Snowpea wants to run {}: {}",
        s("tool"),
        clip(&detail, 1_000)
    );
    if !s("note").is_empty() {
        message.push_str(&format!("\n{}", clip(s("note"), 500)));
    }
    if !s("risk").is_empty() {
        message.push_str(&format!("\nRisk: {}", s("risk")));
    }
    message.push_str(&format!("\n(session {session_id}; deny ends the turn)"));
    match elicit(
        client,
        &peer,
        cancel,
        s("requestId"),
        message,
        approval_schema(),
        wait_of(&params),
    )
    .await
    {
        Asked::Answered(action, content) => Ok(approval_answer(&action, content.as_ref())),
        Asked::Cancelled => {
            Ok(json!({ "decision": "deny", "reason": "the MCP host cancelled the prompt" }))
        }
        Asked::ResolvedElsewhere => Err(leave_pending("answered by another client")),
        Asked::Failed(why) => Err(leave_pending(&format!(
            "the MCP host did not answer ({why})"
        ))),
    }
}

/// The elicitation schema of a `question.request`'s questions (`q0`, `q1`, …) and the
/// option labels of each.
pub fn question_schema(questions: &[Value]) -> (Value, Vec<Vec<String>>) {
    let mut properties = Map::new();
    let mut labels = Vec::new();
    for (i, q) in questions.iter().take(MAX_QUESTIONS).enumerate() {
        let title = clip(
            q.get("question")
                .and_then(Value::as_str)
                .unwrap_or("Question"),
            300,
        );
        let options: Vec<String> = q
            .get("options")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|o| o.get("label").and_then(Value::as_str).map(|l| clip(l, 200)))
            .take(32)
            .collect();
        let multi = q.get("multi").and_then(Value::as_bool) == Some(true);
        let field = if options.is_empty() || multi {
            json!({ "type": "string", "title": title })
        } else {
            json!({ "type": "string", "title": title, "enum": options })
        };
        properties.insert(format!("q{i}"), field);
        labels.push(options);
    }
    (
        json!({ "type": "object", "properties": properties }),
        labels,
    )
}

/// `question.request` → one elicitation → `{answers}` (or an error that leaves it pending).
pub async fn question(
    state: &Arc<State>,
    client: &Client,
    params: Value,
) -> Result<Value, RpcError> {
    let session_id = params
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some((peer, cancel)) = host_for(state, session_id) else {
        return Err(leave_pending(
            "the MCP host cannot answer questions (no elicitation)",
        ));
    };
    let questions: Vec<Value> = params
        .get("questions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let secret = questions
        .iter()
        .any(|q| q.get("secret").and_then(Value::as_bool) == Some(true));
    if questions.is_empty() || secret {
        // Secrets are never sent through the host's elicitation form.
        return Err(leave_pending("this question is not put to the MCP host"));
    }
    let (schema, labels) = question_schema(&questions);
    let request_id = params
        .get("requestId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = format!("The Snowpea agent asks (session {session_id}):");
    match elicit(
        client,
        &peer,
        cancel,
        request_id,
        message,
        schema,
        wait_of(&params),
    )
    .await
    {
        Asked::Answered(ElicitationAction::Accept, content) => {
            let answers: Vec<Value> = labels
                .iter()
                .enumerate()
                .map(|(i, options)| {
                    let answer = content
                        .as_ref()
                        .and_then(|c| c.get(format!("q{i}")))
                        .and_then(Value::as_str)
                        .map(|a| clip(a, 4_000));
                    match answer {
                        Some(a) if options.contains(&a) => json!({ "selected": [a] }),
                        Some(a) => json!({ "selected": [], "text": a }),
                        None => json!({ "selected": [], "text": null }),
                    }
                })
                .collect();
            Ok(json!({ "answers": answers }))
        }
        Asked::Answered(..) | Asked::Cancelled => {
            let answers: Vec<Value> = labels
                .iter()
                .map(|_| json!({ "selected": [], "text": null }))
                .collect();
            Ok(json!({ "answers": answers }))
        }
        Asked::ResolvedElsewhere => Err(leave_pending("answered by another client")),
        Asked::Failed(why) => Err(leave_pending(&format!(
            "the MCP host did not answer ({why})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_allow_allows() {
        let accept = ElicitationAction::Accept;
        assert_eq!(
            approval_answer(&accept, Some(&json!({"decision": "allow"})))["decision"],
            "allow"
        );
        assert_eq!(
            approval_answer(&accept, Some(&json!({"decision": "allow_session"})))["scope"],
            "session"
        );
        for content in [
            None,
            Some(json!({})),
            Some(json!({"decision": "ALLOW"})),
            Some(json!({"decision": 1})),
        ] {
            assert_eq!(
                approval_answer(&accept, content.as_ref())["decision"],
                "deny",
                "{content:?}"
            );
        }
        let denied = approval_answer(&accept, Some(&json!({"decision": "deny", "reason": "no"})));
        assert_eq!(denied["reason"], "no");
        assert_eq!(
            approval_answer(&ElicitationAction::Decline, None)["decision"],
            "deny"
        );
        assert_eq!(
            approval_answer(&ElicitationAction::Cancel, None)["decision"],
            "deny"
        );
    }

    #[test]
    fn the_approval_schema_is_an_elicitation_schema() {
        let parsed: Result<rmcp::model::ElicitRequestParams, _> = serde_json::from_value(json!({
            "mode": "form", "message": "m", "requestedSchema": approval_schema()
        }));
        assert!(parsed.is_ok(), "{parsed:?}");
        let (schema, labels) = question_schema(&[
            json!({"question": "Which?", "options": [{"label": "a"}, {"label": "b"}]}),
            json!({"question": "Why?"}),
        ]);
        assert_eq!(labels, vec![vec!["a".to_owned(), "b".to_owned()], vec![]]);
        let parsed: Result<rmcp::model::ElicitRequestParams, _> = serde_json::from_value(json!({
            "mode": "form", "message": "m", "requestedSchema": schema
        }));
        assert!(parsed.is_ok(), "{parsed:?}");
    }
}
