//! One host tool call (`tool.invoke`, spec; issue 21 "Invocation").
//!
//! [`HostTool`] is a host's tool as a tool of the turn: the turn's permission pipeline
//! (mode matrix, allowlist, approvals) runs first, exactly as for a built-in tool, keyed by
//! the tag the host registered. Then `tool.invoke` goes to the host connection with the
//! call's whole context (`sessionId`, `turnId`, `callId`, `name`, `args`, `mode`,
//! `workdir`, `workspaceDir`, `parentSessionId`, `origin`, `userTurn`, `job`, `guard`,
//! `attachments`).
//!
//! The deadline (`timeoutMs`, default 120 s) measures **silence**: every `tool.progress`
//! of the call (an empty keepalive too) restarts it, and the clock stops while an approval
//! or question of the session is pending (the host escalated with `approval.ask`, or the
//! model's other call asked). On a timeout — and whenever the call is abandoned before the
//! host answered (`session.interrupt`, the turn dropped) — the host gets the notification
//! `tool.cancel{sessionId, callId}`. When the host's connection closes the call fails at
//! once as "host gone" (never a hang). Progress the host sent just before its answer but
//! that reaches svc-session after it is still reported before the call's `tool.result`
//! when it comes in time, and is otherwise dropped, never emitted after the result
//! ([`HostTools::progress`]).

use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use snowpea_common::bus::RequestError;
use snowpea_proto::session::v1 as pb;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::registry::HostToolDef;
use super::{HostTools, InFlight, HOST_RESULT, MAX_META_BYTES};
use crate::tools::{args, Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use snowpea_session_llm::provider::ToolSpec;

/// Name of the tool that loads deferred host tools ([`super::parallel`]'s sibling
/// `turn/agent.rs` offers it when the host has deferred tools).
pub const TOOL_SEARCH: &str = "tool_search";

/// How often the silence clock checks whether an approval or question pauses it.
const PAUSE_TICK: Duration = Duration::from_millis(50);

/// Cap of the hub's own wait for the answer: the silence deadline ends the call long
/// before (a call kept alive by progress may run up to this long).
const HARD_CAP: Duration = Duration::from_secs(24 * 3600);

/// Host tool names are `&'static str` like every tool's; each distinct name is leaked
/// once (bounded by the set of names ever registered in this process).
static NAMES: LazyLock<Mutex<std::collections::HashSet<&'static str>>> =
    LazyLock::new(Default::default);

fn intern(name: &str) -> &'static str {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// One host tool of one turn.
pub struct HostTool {
    name: &'static str,
    /// The registration.
    pub def: Arc<HostToolDef>,
    /// The host connection it is invoked on.
    pub connection_id: String,
    owner: Arc<HostTools>,
}

impl std::fmt::Debug for HostTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostTool")
            .field("name", &self.name)
            .field("connection_id", &self.connection_id)
            .finish()
    }
}

impl HostTool {
    pub(super) fn new(owner: Arc<HostTools>, def: Arc<HostToolDef>, connection_id: String) -> Self {
        HostTool {
            name: intern(&def.name),
            def,
            connection_id,
            owner,
        }
    }
}

impl Tool for HostTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.def.name.clone(),
            description: self.def.description.clone(),
            parameters: self.def.input_schema.clone(),
        }
    }

    fn permission(&self) -> Permission {
        self.def.permission
    }

    fn category(&self) -> &'static str {
        "host"
    }

    fn plan(&self, a: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        if !a.is_null() {
            args::object(a)?;
        }
        Ok(ToolPlan {
            permission: self.def.permission,
            outside_workdir: vec![],
            summary: format!(
                "host tool {}: {}",
                self.def.name,
                args::one_line(&a.to_string(), 80)
            ),
        })
    }

    fn run(&self, a: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let (owner, def, conn) = (
            self.owner.clone(),
            self.def.clone(),
            self.connection_id.clone(),
        );
        Box::pin(async move { owner.invoke(&def, &conn, a, ctx).await })
    }
}

/// Removes the call from the in-flight table when dropped and, unless the host answered,
/// tells it `tool.cancel` (timeout, interrupt, the turn dropped the call).
struct CallGuard<'a> {
    owner: &'a HostTools,
    call_id: String,
    session_id: String,
    connection_id: String,
    answered: bool,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.owner.calls().remove(&self.call_id);
        if !self.answered && self.owner.hub.is_live(&self.connection_id) {
            self.owner.hub.publish(
                &pb::ToolCancelNotification {
                    call_id: self.call_id.clone(),
                    session_id: self.session_id.clone(),
                },
                vec![self.connection_id.clone()],
            );
            tracing::info!(call_id = %self.call_id, session_id = %self.session_id, "tool.cancel sent to the host");
        }
    }
}

/// The `tool.invoke` params of a call (everything but `args`, which rides verbatim).
pub(super) fn params(
    owner: &HostTools,
    def: &HostToolDef,
    ctx: &ToolContext,
) -> pb::ToolInvokeParams {
    let row = owner.sessions.get(&ctx.session_id).ok().map(|s| s.row());
    let facts = ctx.turn.as_deref();
    let origin = facts.map(|f| f.origin.to_owned());
    pb::ToolInvokeParams {
        call_id: ctx.call_id.clone(),
        name: def.name.clone(),
        session_id: ctx.session_id.clone(),
        turn_id: ctx.turn_id.clone(),
        mode: ctx.mode.clone(),
        workdir: ctx.workdir.display().to_string(),
        workspace_dir: row
            .as_ref()
            .map(|r| r.workspace_dir.clone())
            .filter(|w| !w.is_empty())
            .unwrap_or_else(|| ctx.workdir.display().to_string()),
        // The session a subagent was delegated from (issue 19; `None` for a root session).
        parent_session_id: row.as_ref().and_then(|r| r.parent_session_id.clone()),
        job: if origin.as_deref() == Some("schedule") {
            owner.job_of(&ctx.session_id)
        } else {
            None
        },
        origin,
        user_turn: facts.and_then(|f| f.user_turn.clone()),
        guard: facts.and_then(|f| f.guard.clone()),
        attachments: facts.map(|f| f.attachments.clone()).unwrap_or_default(),
        args: None,
    }
}

/// Reads a host's answer `{ok, output, error, content[], meta}` into a tool output whose
/// meta carries the [`HOST_RESULT`] for `turn/tool_call.rs`; image blocks are kept on disk
/// for `session.toolContent` (unless sensitive) and replaced by `contentRef
/// "<callId>:<i>"` in the event.
pub(super) fn read_answer(owner: &HostTools, ctx: &ToolContext, v: &Value) -> ToolOutput {
    let ok = v.get("ok").and_then(Value::as_bool).unwrap_or(false);
    let mut text = v
        .get("output")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let meta = v.get("meta").filter(|m| m.is_object()).cloned();
    let sensitive = meta
        .as_ref()
        .and_then(|m| m.get("sensitive"))
        .and_then(Value::as_bool)
        == Some(true);
    let blocks: Vec<pb::ContentBlock> = v
        .get("content")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(super::content::block_of).collect())
        .unwrap_or_default();
    let mut images = Vec::new();
    let mut event_blocks = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        match b.r#type.as_str() {
            "image" => {
                let data = b.data.clone().unwrap_or_default();
                let mime = b.media_type.clone().unwrap_or_default();
                if !data.is_empty() {
                    images.push(json!({"mimeType": mime, "data": data}));
                }
                event_blocks.push(pb::ContentBlock {
                    r#type: "image".into(),
                    media_type: b.media_type.clone(),
                    content_ref: Some(format!("{}:{i}", ctx.call_id)),
                    ..Default::default()
                });
            }
            _ => {
                if let Some(t) = b.text.as_deref().filter(|t| !t.is_empty()) {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(t);
                }
                event_blocks.push(pb::ContentBlock {
                    r#type: "text".into(),
                    text: b.text.clone(),
                    ..Default::default()
                });
            }
        }
    }
    if !sensitive && !images.is_empty() {
        if let Err(e) = owner.content.put(&ctx.session_id, &ctx.call_id, &blocks) {
            tracing::warn!(call_id = %ctx.call_id, error = %format!("{e:#}"), "could not keep the host tool's content");
        }
    }
    let meta = meta.filter(|m| {
        let n = m.to_string().len();
        if n > MAX_META_BYTES {
            tracing::warn!(call_id = %ctx.call_id, bytes = n, "host meta above 16 KB dropped");
        }
        n <= MAX_META_BYTES
    });
    let content = if ok {
        text
    } else {
        let err = v
            .get("error")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
            .unwrap_or("the host tool failed without saying why");
        if text.is_empty() {
            err.to_owned()
        } else {
            format!("{err}\n{text}")
        }
    };
    ToolOutput {
        ok,
        content,
        meta: json!({HOST_RESULT: {
            "content": if sensitive { vec![] } else { event_blocks.iter().map(super::content::block_json).collect::<Vec<_>>() },
            "images": images,
            "meta": meta,
            "sensitive": sensitive,
        }}),
        diff: None,
    }
}

/// A failure that is not the host's answer (timeout, host gone), as a host result.
fn failure(message: String) -> ToolOutput {
    ToolOutput {
        ok: false,
        content: message,
        meta: json!({HOST_RESULT: {"content": [], "images": [], "meta": null, "sensitive": false}}),
        diff: None,
    }
}

impl HostTools {
    /// Sends `tool.invoke` for one call and waits for the answer under the silence
    /// deadline (module doc).
    pub(super) async fn invoke(
        &self,
        def: &HostToolDef,
        conn: &str,
        args: Value,
        ctx: ToolContext,
    ) -> ToolOutput {
        if !self.hub.is_live(conn) {
            return failure(format!(
                "host gone: the client that registered `{}` is no longer connected",
                def.name
            ));
        }
        let (progress_tx, mut progress_rx) = mpsc::unbounded_channel();
        let gone = tokio_util::sync::CancellationToken::new();
        self.calls().insert(
            ctx.call_id.clone(),
            InFlight {
                connection_id: conn.to_owned(),
                progress: progress_tx,
                gone: gone.clone(),
            },
        );
        let mut guard = CallGuard {
            owner: self,
            call_id: ctx.call_id.clone(),
            session_id: ctx.session_id.clone(),
            connection_id: conn.to_owned(),
            answered: false,
        };
        let params = params(self, def, &ctx);
        let args = if args.is_object() { args } else { json!({}) };
        let free = [("/args", args)];
        let request = self.hub.request(conn, &params, &free, HARD_CAP);
        tokio::pin!(request);
        let timeout = def.timeout;
        let mut deadline = Instant::now() + timeout;
        let mut tick = tokio::time::interval(PAUSE_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_tick = Instant::now();
        loop {
            tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => {
                    return ToolOutput::error("interrupted by the user");
                }
                _ = gone.cancelled() => {
                    guard.answered = true;
                    return failure(format!(
                        "host gone: the client running `{}` disconnected during the call",
                        def.name
                    ));
                }
                answer = &mut request => {
                    guard.answered = true;
                    if answer.is_ok() {
                        // Progress the host sent just before answering may arrive after it.
                        self.answered(&ctx.call_id, conn, ctx.progress.clone());
                    }
                    // Progress sent before the answer is reported first.
                    while let Ok(message) = progress_rx.try_recv() {
                        if !message.is_empty() {
                            let _ = ctx.progress.send(message);
                        }
                    }
                    return match answer {
                        Ok(v) => match super::answer::check(&v) {
                            Ok(()) => read_answer(self, &ctx, &v),
                            Err(why) => {
                                tracing::info!(tool = %def.name, call_id = %ctx.call_id, %why, "host tool answered a malformed result");
                                failure(format!(
                                    "host tool `{}` answered a malformed result: {why}",
                                    def.name
                                ))
                            }
                        },
                        Err(RequestError::Answered(e)) => failure(format!(
                            "host tool `{}` failed: {}",
                            def.name,
                            e.get("message").and_then(Value::as_str).unwrap_or("error without a message")
                        )),
                        Err(RequestError::ConnectionGone) => failure(format!(
                            "host gone: the client running `{}` disconnected during the call",
                            def.name
                        )),
                        Err(RequestError::Timeout(_)) => {
                            guard.answered = false;
                            failure(format!("host tool `{}` ran past the longest call allowed", def.name))
                        }
                    };
                }
                Some(message) = progress_rx.recv() => {
                    deadline = Instant::now() + timeout;
                    if !message.is_empty() {
                        let _ = ctx.progress.send(message);
                    }
                }
                now = tick.tick() => {
                    if self.paused(&ctx.session_id) {
                        // The clock stops while a person is being asked.
                        deadline += now.saturating_duration_since(last_tick);
                    }
                    last_tick = now;
                    if now >= deadline {
                        return failure(format!(
                            "timeout: host tool `{}` sent no result or progress for {} ms; the host was told tool.cancel",
                            def.name,
                            timeout.as_millis()
                        ));
                    }
                }
            }
        }
    }
}
