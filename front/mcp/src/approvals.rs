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
//!   cancelled on the host, `notifications/cancelled`). Cancelling the `snowpea_prompt` call
//!   interrupts the turn first (`session.interrupt`: the daemon resolves the request
//!   `interrupted` and the turn ends `interrupted`) and does not answer it as a denial.
//! * A host "declared elicitation" when its `initialize` had `capabilities.elicitation` with
//!   form mode and the negotiated revision has elicitation (`2025-06-18` or later,
//!   [`crate::server::can_elicit`]).
//! * The elicitation request carries no `_meta.progressToken` ([`crate::server::HostTransport`]):
//!   nothing reports progress on it.
//! * The host cannot elicit, the turn was not started through this server (a call of this
//!   server still queued behind another client's turn does not count), or the
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

use rmcp::model::{
    CancelledNotificationParam, ClientResult, ElicitRequest, ElicitRequestParams,
    ElicitationAction, ServerRequest,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{json, Map, Value};
use snowpea_sdk::{Client, RpcError};
use tokio::sync::broadcast::error::RecvError;

use crate::server::{can_elicit, RunningTurn, State};
use crate::transcript::clip;

/// How long an elicitation waits when the request gives no `timeoutSec` (the daemon's own
/// default approval timeout).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);

/// Most questions of one `question.request` put in one elicitation.
pub const MAX_QUESTIONS: usize = 16;

/// Longest wait for a notification to the host to be handed to the transport (rmcp holds
/// it while its connection is torn down).
const NOTIFY_WAIT: Duration = Duration::from_secs(2);

/// How long a request waits for this server's call in its session to be seen running (its
/// `turn.started` may still be on its way when the request comes).
pub const STARTED_WAIT: Duration = Duration::from_secs(5);

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

/// The `snowpea_prompt` call to ask about a session's request: the one whose turn runs
/// there, when its host can elicit. A turn started elsewhere (a person typing in `snowpea
/// chat` in a session this server created, with a call of this server queued behind it) is
/// not put to the MCP host: that client answers it.
async fn host_for(state: &State, session_id: &str) -> Option<Arc<RunningTurn>> {
    let turns = state.turns_of(session_id);
    // One host connection: when it cannot elicit, there is nothing to wait for.
    if !can_elicit(&turns.first()?.peer) {
        return None;
    }
    let turn = match turns.iter().find(|t| t.is_started()) {
        Some(turn) => turn.clone(),
        None => {
            let first = turns.first()?.clone();
            if !first.wait_started(STARTED_WAIT).await {
                return None;
            }
            first
        }
    };
    can_elicit(&turn.peer).then_some(turn)
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
/// cancellation; an elicitation that lost the race is cancelled on the host.
async fn elicit(
    client: &Client,
    turn: &RunningTurn,
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
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    let handle = match turn
        .peer
        .send_cancellable_request(request, PeerRequestOptions::with_timeout(wait))
        .await
    {
        Ok(handle) => handle,
        Err(e) => return Asked::Failed(e.to_string()),
    };
    let id = handle.id.clone();
    let outcome = tokio::select! {
        answer = handle.await_response() => return match answer {
            Ok(ClientResult::ElicitResult(result)) => Asked::Answered(result.action, result.content),
            Ok(_) => Asked::Failed("the host answered something else than an elicitation result".into()),
            Err(e) => Asked::Failed(e.to_string()),
        },
        _ = resolved_elsewhere => Asked::ResolvedElsewhere,
        _ = turn.cancel.cancelled() => Asked::Cancelled,
    };
    let reason = match outcome {
        Asked::ResolvedElsewhere => "answered from another Snowpea client",
        _ => {
            // Interrupt first: the daemon then resolves the request `interrupted` and the
            // turn ends `interrupted`, not `denied`.
            turn.interrupt(client).await;
            "the snowpea_prompt call was cancelled"
        }
    };
    let cancelled = CancelledNotificationParam::new(Some(id), Some(reason.into()));
    let sent = tokio::time::timeout(NOTIFY_WAIT, turn.peer.notify_cancelled(cancelled)).await;
    if !matches!(sent, Ok(Ok(()))) {
        tracing::debug!("cancelling the elicitation on the host failed");
    }
    outcome
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
                "oneOf": [
                    { "const": "allow", "title": "Allow once" },
                    { "const": "allow_session", "title": "Allow for this session" },
                    { "const": "deny", "title": "Deny" }
                ]
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
    let Some(turn) = host_for(state, session_id).await else {
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
    let message = approval_message(s("tool"), &detail, s("note"), s("risk"), session_id);
    match elicit(
        client,
        &turn,
        s("requestId"),
        message,
        approval_schema(),
        wait_of(&params),
    )
    .await
    {
        Asked::Answered(action, content) => Ok(approval_answer(&action, content.as_ref())),
        Asked::Cancelled => {
            // Interrupt first: the daemon then resolves the request `interrupted` and the
            // turn ends `interrupted`, not `denied`; this answer (an error) changes nothing.
            turn.interrupt(client).await;
            Err(leave_pending(
                "the MCP host cancelled the prompt; its turn is interrupted",
            ))
        }
        Asked::ResolvedElsewhere => Err(leave_pending("answered by another client")),
        Asked::Failed(why) => Err(leave_pending(&format!(
            "the MCP host did not answer ({why})"
        ))),
    }
}

/// The elicitation message of an approval: the tool and what it acts on (once: the daemon's
/// note usually quotes the command already), the note, the risk and the session.
pub fn approval_message(tool: &str, detail: &str, note: &str, risk: &str, session: &str) -> String {
    let note = clip(note.trim(), 1_000);
    let detail = clip(detail, 1_000);
    let mut message = if !note.is_empty() && note.contains(detail.trim_end_matches('…')) {
        format!("Snowpea wants to run {tool}: {note}")
    } else {
        let mut m = format!("Snowpea wants to run {tool}: {detail}");
        if !note.is_empty() {
            m.push_str(&format!("\n{note}"));
        }
        m
    };
    if !risk.is_empty() {
        message.push_str(&format!("\nRisk: {risk}"));
    }
    message.push_str(&format!("\n(session {session}; deny ends the turn)"));
    message
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
    let Some(turn) = host_for(state, session_id).await else {
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
    match elicit(client, &turn, request_id, message, schema, wait_of(&params)).await {
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
        Asked::Cancelled => {
            // As for approvals: interrupt the turn, do not answer for the person.
            turn.interrupt(client).await;
            Err(leave_pending(
                "the MCP host cancelled the prompt; its turn is interrupted",
            ))
        }
        Asked::Answered(..) => {
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
    fn the_approval_choices_use_titled_one_of() {
        let schema = approval_schema();
        let decision = &schema["properties"]["decision"];
        assert!(decision.get("enumNames").is_none(), "{decision}");
        assert_eq!(decision["oneOf"][1]["const"], "allow_session");
        // rmcp reads it as a titled single-select and writes it back the same.
        let parsed: rmcp::model::ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form", "message": "m", "requestedSchema": schema
        }))
        .unwrap();
        let back = serde_json::to_value(&parsed).unwrap();
        let decision = &back["requestedSchema"]["properties"]["decision"];
        assert_eq!(
            decision["oneOf"][2],
            json!({"const": "deny", "title": "Deny"})
        );
        assert!(decision.get("enumNames").is_none(), "{decision}");
    }

    #[test]
    fn the_command_is_named_once() {
        let cmd = "echo hi > a.txt";
        let with_note = approval_message("shell", cmd, &format!("run `{cmd}`"), "exec", "s1");
        assert_eq!(with_note.matches(cmd).count(), 1, "{with_note}");
        assert!(with_note
            .starts_with("Snowpea wants to run shell: run `echo hi > a.txt`\nRisk: exec\n"));
        let other = approval_message(
            "write_file",
            "/x/a.txt",
            "outside the working directory",
            "",
            "s1",
        );
        assert_eq!(
            other,
            "Snowpea wants to run write_file: /x/a.txt\noutside the working directory\n(session s1; deny ends the turn)"
        );
        let bare = approval_message("shell", cmd, "", "", "s1");
        assert_eq!(bare.matches(cmd).count(), 1);
    }

    #[test]
    fn elicitations_carry_no_progress_token() {
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.set_progress_token(rmcp::model::ProgressToken(
            rmcp::model::NumberOrString::Number(0),
        ));
        crate::server::strip_progress_token(&mut meta);
        assert!(meta.get_progress_token().is_none());
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
