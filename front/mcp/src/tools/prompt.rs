//! `snowpea_prompt{text, workdir?, sessionId?, mode?}`: runs one turn of the Snowpea agent and
//! answers when it ends.
//!
//! * No `sessionId`: `session.create {workdir, originSurface: "mcp", mode?}` — `workdir`
//!   (absolute, existing) defaults to the directory `snowpea mcp serve` was started in. This
//!   connection is the new session's origin, so its approvals come here ([`crate::approvals`]).
//! * With `sessionId`: a session this process has not used yet is re-opened
//!   (`session.resume` after its last event) and, when the host can answer approvals
//!   (elicitation), attached (`session.attach`) so they come here; otherwise they stay with
//!   the session's own client and any other connected client can answer them. `workdir` is
//!   then ignored; `mode` is applied with `session.setMode`.
//! * `session.prompt {sessionId, text}`, then the session's events until the turn's
//!   `turn.done` (at most [`TURN_WAIT`]). While it runs, MCP progress notifications (when the
//!   request carried a `progressToken`): each tool call and result, file changes, errors,
//!   approvals waiting for an answer, and the answer text so far (at most every
//!   [`TEXT_PROGRESS_EVERY`]).
//! * `session.prompt` carries `whenBusy: "queue"`: on a session busy with another client's
//!   turn the prompt waits as its own turn (progress `queued in session …`) and the answer is
//!   that turn's ([`run_turn`]).
//! * Cancelling the MCP request sends `session.interrupt` (the turn ends `interrupted`, as
//!   natively; the host gets no answer to a cancelled request); a call still queued behind
//!   another client's turn interrupts its turn when it starts. When the host disconnects,
//!   the turns still running are interrupted the same way ([`crate::server::SnowpeaMcp::shutdown`]).
//!
//! Answer: the final text, then `turn ended: <reason>`, `tools run: …`, `files changed: …`
//! and `sessionId: …` lines ([`crate::turn::TurnSummary::render`]); structured:
//! `{sessionId, turnId, reason, answer, toolsRun: [{name, ok}], filesChanged: [path]}`.
//! `isError` is set when the turn ended in `error`, `timeout` or `empty_response`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::{json, Map, Value};
use snowpea_sdk::{Client, Error as NativeError};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::{definition as def, native, ToolError, ToolOutput};
use crate::args::Args;
use crate::server::{can_elicit, lock, RunningTurn, State};
use crate::transcript::clip;
use crate::turn::{progress_line, TurnSummary};

/// The tool's name.
pub const NAME: &str = "snowpea_prompt";

/// The permission modes a session can run in.
pub const MODES: [&str; 3] = ["plan", "accept", "auto"];

/// Longest a call waits for its turn to end (a turn has its own, shorter, limits in the
/// daemon; this only keeps the wait bounded).
pub const TURN_WAIT: Duration = Duration::from_secs(6 * 3600);

/// How long a cancelled call waits for the interrupted turn's `turn.done`.
pub const CANCEL_GRACE: Duration = Duration::from_secs(15);

/// Least time between two "text so far" progress notifications.
pub const TEXT_PROGRESS_EVERY: Duration = Duration::from_millis(300);

/// How much of the answer a "text so far" notification quotes (its end).
pub const TEXT_PROGRESS_BYTES: usize = 400;

/// The tool's definition.
pub fn definition() -> Value {
    def(
        NAME,
        "Ask the Snowpea agent",
        "Hand a task or question to the Snowpea coding agent and wait for its answer. It \
         works in a project directory with its own tools (files, shell, search, web, MCP \
         servers), memory and approvals, and answers with its final text, the tools it ran, \
         the files it changed and a sessionId. Pass that sessionId to continue the same \
         conversation (it remembers the earlier turns). Progress is reported while it works; \
         cancelling the call interrupts the agent.",
        json!({
            "type": "object",
            "properties": {
                "text": {
                    "type": "string",
                    "description": "The prompt, as a user would type it (a leading / runs a Snowpea slash command). At most 1 MiB (1048576 bytes)."
                },
                "workdir": {
                    "type": "string",
                    "description": "Absolute project directory for a new session. Default: the directory the server was started in. Ignored with sessionId."
                },
                "sessionId": {
                    "type": "string",
                    "description": "Continue this session (from an earlier snowpea_prompt or snowpea_sessions) instead of starting a new one."
                },
                "mode": {
                    "type": "string",
                    "enum": MODES,
                    "description": "Permission mode: plan (read and plan only), accept (file edits run, commands ask first), auto (tools run without asking). Default: the project's setting."
                }
            },
            "required": ["text"],
            "additionalProperties": false
        }),
        false,
    )
}

/// Sends progress notifications for one request (nothing without a progress token).
struct Progress {
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
    count: AtomicU64,
    /// Cancelled when the host hung up: nothing is sent any more (rmcp would hold the send
    /// until its connection is torn down).
    hung_up: tokio_util::sync::CancellationToken,
}

/// Longest wait for one progress notification to be handed to the transport.
const PROGRESS_SEND_WAIT: Duration = Duration::from_secs(2);

impl Progress {
    async fn send(&self, message: String) {
        let Some(token) = self.token.clone() else {
            return;
        };
        if self.hung_up.is_cancelled() {
            return;
        }
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let mut param = ProgressNotificationParam::new(token, n as f64);
        param.message = Some(message);
        match tokio::time::timeout(PROGRESS_SEND_WAIT, self.peer.notify_progress(param)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::debug!(%error, "progress notification failed"),
            Err(_) => tracing::debug!("progress notification not sent in time"),
        }
    }
}

/// Resolves the session: creates one, or re-opens the one named.
async fn open_session(
    state: &Arc<State>,
    client: &Client,
    args: &Args<'_>,
    peer: &Peer<RoleServer>,
) -> Result<String, ToolError> {
    let mode = args.opt_choice("mode", &MODES)?;
    let workdir = args.opt_dir("workdir")?;
    let Some(session_id) = args.opt_str("sessionId")? else {
        let workdir = match workdir {
            Some(dir) => dir,
            None => std::env::current_dir()
                .and_then(std::fs::canonicalize)
                .map_err(|e| {
                    ToolError::Other(format!(
                        "invalid argument workdir: not given, and the server's own directory cannot be used: {e}"
                    ))
                })?,
        };
        let mut params = json!({ "workdir": workdir, "originSurface": "mcp" });
        if let Some(mode) = mode {
            params["mode"] = json!(mode);
        }
        let result = client
            .call("session.create", params)
            .await
            .map_err(native("session.create"))?;
        let id = result
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::Other("session.create answered no sessionId".into()))?
            .to_owned();
        lock(&state.own_sessions).insert(id.clone());
        return Ok(id);
    };
    if session_id.trim().is_empty() {
        return Err(crate::args::ArgError {
            field: "sessionId".into(),
            reason: "must not be empty".into(),
        }
        .into());
    }
    let known = lock(&state.own_sessions).contains(session_id);
    if !known {
        let seq = last_seq(client, session_id).await?;
        client
            .call(
                "session.resume",
                json!({ "sessionId": session_id, "afterSeq": seq }),
            )
            .await
            .map_err(native("session.resume"))?;
        if can_elicit(peer) {
            client
                .call("session.attach", json!({ "sessionId": session_id }))
                .await
                .map_err(native("session.attach"))?;
            lock(&state.own_sessions).insert(session_id.to_owned());
        }
    }
    if let Some(mode) = mode {
        client
            .call(
                "session.setMode",
                json!({ "sessionId": session_id, "mode": mode }),
            )
            .await
            .map_err(native("session.setMode"))?;
    }
    Ok(session_id.to_owned())
}

/// The last seq of a session (`session.list`, closed ones too); a session that is not
/// listed is an error naming `sessionId`.
async fn last_seq(client: &Client, session_id: &str) -> Result<u64, ToolError> {
    let listed = client
        .call("session.list", json!({ "includeClosed": true }))
        .await
        .map_err(native("session.list"))?;
    listed
        .get("sessions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|s| s.get("sessionId").and_then(Value::as_str) == Some(session_id))
        .map(|s| s.get("seq").and_then(Value::as_u64).unwrap_or(0))
        .ok_or_else(|| {
            ToolError::Other(format!(
                "invalid argument sessionId: no session {:?} (snowpea_sessions lists them)",
                clip(session_id, 80)
            ))
        })
}

/// Runs the tool.
pub async fn call(
    state: &Arc<State>,
    args: &Map<String, Value>,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<ToolOutput, ToolError> {
    let args = Args::new(args, &["text", "workdir", "sessionId", "mode"])?;
    let text = args.str("text")?.to_owned();
    // Every argument is checked before anything is created.
    args.opt_choice("mode", &MODES)?;
    args.opt_dir("workdir")?;
    let client = state.client().await.map_err(ToolError::Daemon)?;
    let session_id = open_session(state, &client, &args, &context.peer).await?;
    *lock(&state.last_session) = Some(session_id.clone());

    let token = request
        .meta
        .as_ref()
        .and_then(|m| m.get_progress_token())
        .or_else(|| context.meta.get_progress_token());
    let progress = Progress {
        peer: context.peer.clone(),
        token,
        count: AtomicU64::new(0),
        hung_up: state.hung_up.clone(),
    };
    let turn = Arc::new(RunningTurn::new(
        &session_id,
        context.peer.clone(),
        context.ct.clone(),
    ));
    state.start_turn(turn.clone());
    let outcome = run_turn(&client, &session_id, &text, &progress, &turn).await;
    state.end_turn(&turn);
    let summary = outcome?;
    let tools: Vec<Value> = summary
        .tools
        .iter()
        .map(|t| json!({ "name": t.name, "ok": t.ok }))
        .collect();
    let structured = json!({
        "sessionId": session_id,
        "turnId": summary.turn_id,
        "reason": summary.reason,
        "answer": summary.text_so_far(),
        "toolsRun": tools,
        "filesChanged": summary.files.iter().collect::<Vec<_>>(),
    });
    Ok(ToolOutput {
        text: summary.render(&session_id),
        structured: Some(structured),
        is_error: summary.failed(),
    })
}

/// Sends the prompt and follows the turn to its end, reporting progress.
///
/// The prompt is sent with `whenBusy: "queue"`: when the session is busy with another
/// client's turn it waits behind it as its own turn (with the daemon's default `agent.busy =
/// steer` it would be folded into that turn, and this call's answer would be that turn's).
/// Only this call's turn id's events count ([`TurnSummary`]), and its `turn.done` ends it.
async fn run_turn(
    client: &Client,
    session_id: &str,
    text: &str,
    progress: &Progress,
    turn: &RunningTurn,
) -> Result<TurnSummary, ToolError> {
    // Both subscriptions are taken before the prompt, so no event of the turn is missed.
    let mut events = client.events(session_id);
    let mut notifications = client.subscribe();
    let result = client
        .call(
            "session.prompt",
            json!({ "sessionId": session_id, "text": text, "whenBusy": "queue" }),
        )
        .await
        .map_err(native("session.prompt"))?;
    let turn_id = result
        .get("turnId")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::Other("session.prompt answered no turnId".into()))?
        .to_owned();

    let mut summary = TurnSummary::new(&turn_id);
    let mut deadline = Instant::now() + TURN_WAIT;
    let mut cancelled = false;
    let mut last_text = Instant::now() - TEXT_PROGRESS_EVERY;
    let mut notifications_open = true;
    // Approvals of this session waiting for an answer (`approval.resolved` names only the id).
    let mut pending = std::collections::HashSet::new();
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        tokio::select! {
            next = events.next(remaining) => match next {
                Ok(event) => {
                    let (was_queued, was_running) = (summary.queued, summary.running());
                    if !summary.add(&event) {
                        continue;
                    }
                    if summary.queued && !was_queued && !summary.running() {
                        progress.send(format!(
                            "queued in session {session_id}: another client's turn is running; this prompt runs as its own turn when that one ends"
                        )).await;
                    }
                    if summary.running() && !was_running && !summary.done {
                        turn.mark_started();
                        progress.send(format!("turn started in session {session_id}")).await;
                        if cancelled {
                            // Cancelled while it waited: stop it now that it runs.
                            turn.interrupt(client).await;
                            deadline = Instant::now() + CANCEL_GRACE;
                        }
                    }
                    if summary.done {
                        // Approval news received before the turn ended is still reported
                        // (the two channels are read in no fixed order).
                        while let Ok(n) = notifications.try_recv() {
                            approval_progress(&n, session_id, &mut pending, progress).await;
                        }
                        return Ok(summary);
                    }
                    if let Some(line) = progress_line(&event) {
                        progress.send(line).await;
                    } else if event.kind == "message.delta" && last_text.elapsed() >= TEXT_PROGRESS_EVERY {
                        last_text = Instant::now();
                        let so_far = summary.text_so_far();
                        progress.send(format!("text so far: {}", tail(&so_far, TEXT_PROGRESS_BYTES))).await;
                    }
                }
                Err(NativeError::Timeout) if cancelled => {
                    summary.reason.get_or_insert_with(|| "interrupted".into());
                    return Ok(summary);
                }
                Err(NativeError::Timeout) => {
                    return Err(ToolError::Other(format!(
                        "the turn {turn_id} did not end within {} hours; it may still run (session {session_id})",
                        TURN_WAIT.as_secs() / 3600
                    )));
                }
                Err(e) => return Err(native("session.event")(e)),
            },
            notification = notifications.recv(), if notifications_open => match notification {
                Ok(n) => approval_progress(&n, session_id, &mut pending, progress).await,
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => notifications_open = false,
            },
            _ = turn.cancel.cancelled(), if !cancelled => {
                cancelled = true;
                if summary.running() {
                    turn.interrupt(client).await;
                    deadline = Instant::now() + CANCEL_GRACE;
                    progress.send("cancelled: the turn was interrupted".into()).await;
                } else {
                    // `session.interrupt` now would stop the other client's running turn.
                    progress.send("cancelled: the turn is interrupted as soon as it starts".into()).await;
                }
            }
        }
    }
}

/// Progress for approvals of the session: `approval.pending` (remembered in `pending`, at
/// most 1024) and the `approval.resolved` of one of those.
async fn approval_progress(
    n: &snowpea_sdk::Notification,
    session_id: &str,
    pending: &mut std::collections::HashSet<String>,
    progress: &Progress,
) {
    if n.method == "approval.pending" {
        let request = n.params.get("request").cloned().unwrap_or(Value::Null);
        if request.get("sessionId").and_then(Value::as_str) == Some(session_id)
            && pending.len() < 1024
        {
            if let Some(id) = request.get("requestId").and_then(Value::as_str) {
                pending.insert(id.to_owned());
            }
            let tool = request
                .get("tool")
                .and_then(Value::as_str)
                .unwrap_or("a tool");
            progress.send(format!(
                "waiting for approval of {tool} (answered here when the host supports elicitation, else from another Snowpea client such as snowpea chat)"
            )).await;
        }
    } else if n.method == "approval.resolved"
        && n.params
            .get("requestId")
            .and_then(Value::as_str)
            .is_some_and(|id| pending.remove(id))
    {
        let decision = n
            .params
            .get("decision")
            .and_then(Value::as_str)
            .unwrap_or("?");
        let by = n.params.get("by").and_then(Value::as_str).unwrap_or("?");
        progress
            .send(format!("approval answered: {decision} (by {by})"))
            .await;
    }
}

/// The last `max` bytes of `s` (on a char boundary), with `…` in front when cut.
fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &s[start..])
}

#[cfg(test)]
mod tests {
    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(super::tail("hello world", 5), "…world");
        assert_eq!(super::tail("añb", 2), "…b");
        assert_eq!(super::tail("ab", 5), "ab");
    }
}
