//! One tool call inside a turn: `tool.call`, the permission decision (mode matrix,
//! session-scope allowances, approval), the run with streamed `tool.progress`, and
//! `tool.result` (+ `diff`). A denial never runs the tool: the model gets a failed result
//! and an `error` event carries the code (`mode_denied`, `approval_denied`,
//! `approval_timeout`). A person's deny (`approval_denied`) ends the turn `denied` after
//! the call, the refusal and the person's reason stored as the tool's result for the next
//! model call (spec approval.respond: "deny ends the turn"). Automatic denials — the mode
//! matrix, `denyExec`, an approval timeout — stay tool errors the model can work around and
//! count toward the turn's limit ([`super::agent::MAX_DENIALS`]). In a `scheduled` session
//! nobody is watching, so an approval timeout ends the turn at once too (issue 5).

use std::sync::Arc;

use serde_json::Value;
use snowpea_proto::session::v1 as pb;
use tokio::sync::mpsc;

use super::agent::TurnAccount;
use super::{TurnStart, Turns};
use crate::approval::{Ask, Scope};
use crate::permissions::{self, Verdict};
use crate::session::Session;
use crate::tools::{Tool, ToolContext, ToolOutput};
use snowpea_session_llm::provider::{ToolCall, ToolImage};

/// What the model gets back from one call.
pub(crate) struct Outcome {
    /// Text fed back to the model.
    pub content: String,
    /// Images fed back with it (an MCP tool's image results, from `meta.images`).
    pub images: Vec<ToolImage>,
    /// False when the call failed or was denied.
    pub ok: bool,
    /// True when the turn was interrupted during the call.
    pub interrupted: bool,
    /// The result was marked `meta.sensitive` (spec `tool.result.meta`): the model gets the
    /// text in this turn, the store gets [`REDACTED`], and compaction never sees it.
    pub sensitive: bool,
}

/// What a `meta.sensitive` result's output is stored (and summarised) as.
pub use crate::host_tools::REDACTED;

/// True when a tool's `meta` marks its output sensitive (`meta.sensitive == true`).
pub fn is_sensitive(meta: &Value) -> bool {
    meta.get("sensitive").and_then(Value::as_bool) == Some(true)
}

impl Turns {
    fn tool_result(
        &self,
        session: &Session,
        t: &TurnStart,
        call: &ToolCall,
        ok: bool,
        output: &str,
        meta: Value,
    ) -> Outcome {
        let images = crate::clients::mcp::images_of(&meta);
        let sensitive = is_sensitive(&meta);
        let stored = if sensitive { REDACTED } else { output };
        let result = pb::ToolResultEvent {
            turn_id: t.turn_id.clone(),
            call_id: call.id.clone(),
            name: call.name.clone(),
            ok,
            output: stored.to_owned(),
            error: (!ok).then(|| stored.to_owned()),
            ..Default::default()
        };
        if meta.is_null() {
            self.log.event_to(session, &result);
        } else {
            self.log.event_to_with(session, &result, &[("/meta", meta)]);
        }
        Outcome {
            content: output.to_owned(),
            images,
            ok,
            interrupted: false,
            sensitive,
        }
    }

    /// The `tool.result` of a host tool (issue 21): its content blocks (images as
    /// `contentRef`) and the host's meta on the event; a sensitive result is stored as
    /// `[redacted]` without content, while the model gets the clear output and images.
    fn host_tool_result(
        &self,
        session: &Session,
        t: &TurnStart,
        call: &ToolCall,
        ok: bool,
        output: String,
        host: crate::host_tools::HostResult,
    ) -> Outcome {
        let stored = if host.sensitive {
            crate::host_tools::REDACTED.to_owned()
        } else {
            output.clone()
        };
        let result = pb::ToolResultEvent {
            turn_id: t.turn_id.clone(),
            call_id: call.id.clone(),
            name: call.name.clone(),
            ok,
            output: stored.clone(),
            error: (!ok).then(|| stored.clone()),
            content: host.content,
            ..Default::default()
        };
        match host.meta {
            Some(meta) => self.log.event_to_with(session, &result, &[("/meta", meta)]),
            None => self.log.event_to(session, &result),
        }
        Outcome {
            content: output,
            images: host.images,
            ok,
            interrupted: false,
            sensitive: host.sensitive,
        }
    }

    /// What `tool.invoke` tells a host about the turn `t` (spec 1.22.0–1.25.0).
    fn turn_facts(&self, session: &Session, t: &TurnStart) -> Arc<crate::tools::TurnFacts> {
        let origin = if session.is_unattended() {
            "schedule"
        } else if t.system_reason.is_some() {
            "system"
        } else {
            "human"
        };
        // The person's latest typed prompt (remembered when their turn started), `current`
        // when it started this turn (a delegated child's is its root's); a schedule's run
        // has none.
        let user_turn = match (origin, self.host_tools.as_ref()) {
            ("schedule", _) | (_, None) => None,
            (_, Some(h)) => h.user_turn_of(session, &t.turn_id),
        };
        let attachments = self
            .attachments
            .list(&session.id)
            .map(|r| r.attachments)
            .unwrap_or_default();
        Arc::new(crate::tools::TurnFacts {
            origin,
            user_turn,
            // `agent-switch` while `session.setAgent{guardTurn}` guards the session or a
            // session it was delegated from (`Agents::is_guarded`, the one source).
            guard: self
                .agents()
                .is_some_and(|a| a.is_guarded(session))
                .then(|| crate::agents::set_agent::GUARD_AGENT_SWITCH.to_owned()),
            attachments,
        })
    }

    /// A refused call: a failed `tool.result` and an `error` event with `code`.
    fn denial(
        &self,
        session: &Session,
        t: &TurnStart,
        call: &ToolCall,
        code: &str,
        message: String,
    ) -> Outcome {
        let outcome = self.tool_result(session, t, call, false, &message, Value::Null);
        self.event(
            session,
            &pb::ErrorEvent {
                turn_id: t.turn_id.clone(),
                call_id: Some(call.id.clone()),
                code: code.to_owned(),
                message,
                ..Default::default()
            },
        );
        outcome
    }

    fn interrupted(&self, session: &Session, t: &TurnStart, call: &ToolCall) -> Outcome {
        let mut o = self.tool_result(
            session,
            t,
            call,
            false,
            "interrupted by the user",
            Value::Null,
        );
        o.interrupted = true;
        o
    }

    /// Runs one tool call of the model (see the module doc).
    pub(crate) async fn tool_call(
        &self,
        session: &Arc<Session>,
        t: &TurnStart,
        call: &ToolCall,
        acc: &mut TurnAccount,
    ) -> Outcome {
        self.log.event_to_with(
            session,
            &pb::ToolCallEvent {
                turn_id: t.turn_id.clone(),
                call_id: call.id.clone(),
                name: call.name.clone(),
                ..Default::default()
            },
            &[("/args", call.arguments.clone())],
        );
        if !acc.agent_allows(&call.name) {
            // The agent definition's `tools` is enforced, not only offered (issue 19).
            return self.denial(
                session,
                t,
                call,
                "tool_inactive",
                format!(
                    "tool `{}` is not in the tools of agent `{}`",
                    call.name,
                    acc.agent_name.as_deref().unwrap_or_default()
                ),
            );
        }
        if let Some(a) = self.agents() {
            a.child_progress(
                session,
                crate::agents::spawn::Progress::Tool {
                    name: call.name.clone(),
                },
            );
        }
        if !acc.tool_allowed(&call.name) {
            // A markdown command's `allowed-tools` is enforced, not only offered.
            return self.denial(
                session,
                t,
                call,
                "tool_inactive",
                format!(
                    "tool `{}` is not in this command's allowed-tools",
                    call.name
                ),
            );
        }
        // Host tools first: a host's `browser_*` tool shadows the daemon's.
        let mut found = acc
            .host_tools
            .0
            .iter()
            .chain(self.tools.builtin())
            .chain(&acc.mcp_tools.0)
            .chain(&acc.extra_tools.0)
            .find(|tool| tool.name() == call.name)
            .cloned();
        if found.is_none() && call.name.starts_with(crate::clients::mcp::PREFIX) {
            // An MCP tool missing from this turn's list: svc-mcp was down (or the server not
            // ready) when the turn started. Ask again: a clear `unavailable` while svc-mcp is
            // still unreachable, `not_ready` while the server is not, the tool itself if it is
            // back (issue 6).
            let client = self.tools.mcp();
            match client.list(&session.workdir()).await {
                Ok(listing) => {
                    found = listing
                        .tools
                        .iter()
                        .find(|tool| tool.name() == call.name)
                        .map(|tool| tool.clone() as Arc<dyn Tool>);
                    // Its server is not ready (e.g. still starting after svc-mcp restarted) or
                    // gone: say so instead of `unknown tool`.
                    if found.is_none() {
                        if let Some(out) = crate::clients::mcp::not_callable(&call.name, &listing) {
                            return self.tool_result(
                                session,
                                t,
                                call,
                                false,
                                &out.content,
                                out.meta,
                            );
                        }
                    }
                }
                Err(why) => {
                    let msg = crate::clients::mcp::unavailable_message(&call.name, &why);
                    return self.tool_result(session, t, call, false, &msg, Value::Null);
                }
            }
        }
        let Some(tool) = found else {
            let names: Vec<_> = self
                .tools
                .builtin()
                .iter()
                .chain(&acc.mcp_tools.0)
                .chain(&acc.host_tools.0)
                .map(|tool| tool.name())
                .collect();
            let msg = format!(
                "unknown tool `{}`; available tools: {}",
                call.name,
                names.join(", ")
            );
            return self.tool_result(session, t, call, false, &msg, Value::Null);
        };
        let backend = session.backend();
        let backend_kind = backend.kind();
        let workdir = session.tool_workdir();
        let plan = match tool.plan(&call.arguments, &workdir) {
            Ok(p) => p,
            Err(e) => {
                return self.tool_result(
                    session,
                    t,
                    call,
                    false,
                    &format!("invalid arguments: {e}"),
                    Value::Null,
                )
            }
        };
        let mode = session.mode();
        let deny_exec = session.row().deny_exec;
        let perm = plan.permission.as_str();
        // session.setAgent{guardTurn} (issue 19): every call that is not a read, and every
        // mcp__ call, is asked of a person; the mode may still deny.
        let guarded = (plan.permission != crate::tools::Permission::Read
            || call.name.starts_with(crate::clients::mcp::PREFIX))
            && self.agents().is_some_and(|a| a.is_guarded(session));
        let verdict = match permissions::decide(mode, &plan, deny_exec) {
            Verdict::Allow if guarded => Verdict::Ask,
            v => v,
        };
        match verdict {
            Verdict::Allow => {}
            Verdict::Deny => {
                let msg = if deny_exec && plan.permission == crate::tools::Permission::Exec {
                    format!("denied: `{}` runs a process and this session refuses exec tools (denyExec)", call.name)
                } else {
                    format!(
                        "denied: `{}` needs `{perm}` permission, which {} mode does not allow",
                        call.name,
                        mode.as_str()
                    )
                };
                acc.denials += 1;
                return self.denial(session, t, call, "mode_denied", msg);
            }
            verdict @ Verdict::Ask => {
                let outside = !plan.outside_workdir.is_empty();
                let key = Session::allow_key(&call.name, perm, outside);
                let listed = !guarded
                    && (session.is_allowed(&key)
                        || self
                            .approvals
                            .allowlist()
                            .allows(session, verdict, &call.name, &call.arguments, &plan)
                            .await);
                if !listed {
                    let mut note = plan.summary.clone();
                    if outside {
                        let paths: Vec<_> = plan
                            .outside_workdir
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect();
                        note.push_str(&format!(
                            " — outside the working directory: {}",
                            paths.join(", ")
                        ));
                    }
                    // A child's approval reaches the parent's people, named with its agent.
                    let row = session.row();
                    if row.parent_session_id.is_some() {
                        note = format!(
                            "[subagent {}] {note}",
                            row.agent.as_deref().unwrap_or("(general)")
                        );
                    }
                    let ask = Ask {
                        turn_id: &t.turn_id,
                        tool: &call.name,
                        args: &call.arguments,
                        note,
                        risk: permissions::risk(plan.permission),
                        guard: guarded.then_some(crate::agents::set_agent::GUARD_AGENT_SWITCH),
                        site: None,
                        scope_hint: "once",
                    };
                    let resolution = self.approvals.request(session, ask, &t.cancel).await;
                    if !resolution.allow {
                        return match resolution.by {
                            "interrupted" => self.interrupted(session, t, call),
                            "timeout" => {
                                acc.unattended_denied = session.is_unattended();
                                acc.denials += 1;
                                self.denial(
                                    session,
                                    t,
                                    call,
                                    "approval_timeout",
                                    format!("denied: no approval for `{}` arrived in time (approval_timeout)", call.name),
                                )
                            }
                            _ => {
                                let mut msg =
                                    format!("denied by user: `{}` was not approved", call.name);
                                if let Some(r) = &resolution.reason {
                                    msg.push_str(&format!(" (reason: {r})"));
                                }
                                // A person's refusal ends the turn (not an automatic
                                // denial the model could work around).
                                acc.person_denied = true;
                                self.denial(session, t, call, "approval_denied", msg)
                            }
                        };
                    }
                    // A longer-than-once allow is stored in the allowlist (listed, removable);
                    // a call outside the workdir, which the allowlist never promotes, is
                    // remembered for the session only.
                    // A guarded turn's answers are never remembered.
                    if let Some(scope) = resolution.scope.allowlist().filter(|_| !guarded) {
                        if outside {
                            if resolution.scope == Scope::Session {
                                session.remember_allowed(key);
                            }
                        } else {
                            self.approvals
                                .allowlist()
                                .store_answer(session, scope, &call.name, &call.arguments)
                                .await;
                        }
                    }
                }
            }
        }
        if t.cancel.is_cancelled() {
            return self.interrupted(session, t, call);
        }
        // Plugin hooks may refuse a permitted call, never permit a refused one.
        if let Some(reason) = self.pre_tool_hooks(session, call).await {
            return self.tool_result(
                session,
                t,
                call,
                false,
                &format!("refused by a plugin hook (PreToolUse): {reason}"),
                Value::Null,
            );
        }

        let host_writes = tool.writes(&call.arguments, &workdir);
        if let (Some(a), crate::tools::Writes::Files(files)) = (self.agents(), &host_writes) {
            // A child may not write a file a sibling owns (issue 19).
            if let Err(msg) = a.claim_writes(session, files) {
                return self.denial(session, t, call, "file_owned_by_sibling", msg);
            }
        }
        // A remote backend's files are captured through its own file operations (issue 32).
        let capture = self
            .tools
            .checkpoints()
            .before_call_on(session, &t.turn_id, &t.text, host_writes, backend.clone())
            .await;
        let (progress, mut chunks) = mpsc::unbounded_channel();
        let ctx = ToolContext {
            workdir: workdir.clone(),
            progress,
            cancel: t.cancel.child_token(),
            output_cap: self.limits.output_cap,
            session_id: session.id.clone(),
            mode: session.mode().as_str().to_owned(),
            turn_id: t.turn_id.clone(),
            call_id: call.id.clone(),
            named_agent: crate::agents::named::named_agent_of(&session.row()),
            turn: Some(self.turn_facts(session, t)),
            backend,
        };
        let mut run = tool.run(call.arguments.clone(), ctx);
        let mut seq = 0i64;
        let mut emit_chunk = |chunk: String| {
            self.event(
                session,
                &pb::ToolProgressEvent {
                    turn_id: t.turn_id.clone(),
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    chunk,
                    seq,
                    ..Default::default()
                },
            );
            seq += 1;
        };
        let output: Option<ToolOutput> = loop {
            tokio::select! {
                biased;
                _ = t.cancel.cancelled() => break None,
                Some(chunk) = chunks.recv() => emit_chunk(chunk),
                out = &mut run => break Some(out),
            }
        };
        // Dropping the future kills what the tool started (the shell's process group).
        drop(run);
        while let Ok(chunk) = chunks.try_recv() {
            emit_chunk(chunk);
        }
        if let Some(capture) = capture {
            self.tools
                .checkpoints()
                .after_call(session, &t.turn_id, &t.text, capture)
                .await;
        }
        let Some(mut out) = output else {
            return self.interrupted(session, t, call);
        };
        // Diagnostics of the written file (issue 23): appended to the result and emitted.
        if out.ok && backend_kind == crate::backend::BackendKind::Local {
            if let Some(diff) = out
                .diff
                .as_ref()
                .filter(|_| call.name == "write_file" || call.name == "edit_file")
            {
                let file = workdir.join(&diff.path);
                if let Ok(text) = tokio::fs::read_to_string(&file).await {
                    if let Some(r) = self
                        .tools
                        .lsp()
                        .after_write(&workdir, &file, &diff.path, &text)
                        .await
                    {
                        out.content.push_str(&r.text);
                        self.event(
                            session,
                            &pb::LspDiagnosticsEvent {
                                path: diff.path.clone(),
                                count: r.count as i64,
                                errors: r.errors as i64,
                                warnings: r.warnings as i64,
                                ..Default::default()
                            },
                        );
                    }
                }
            }
        }
        if let Some(diff) = &out.diff {
            self.event(
                session,
                &pb::DiffEvent {
                    turn_id: t.turn_id.clone(),
                    call_id: call.id.clone(),
                    path: diff.path.clone(),
                    patch: diff.diff.clone(),
                    added: diff.added as i64,
                    removed: diff.removed as i64,
                    created: diff.created,
                    ..Default::default()
                },
            );
        }
        let mut meta = out.meta;
        // Host progress that arrived after the host's answer (it travels apart from the
        // answer) is reported before the result; the closed sink drops anything later.
        while let Ok(chunk) = chunks.try_recv() {
            emit_chunk(chunk);
        }
        drop(chunks);
        if let Some(host) = crate::host_tools::take_result(&mut meta) {
            return self.host_tool_result(session, t, call, out.ok, out.content, host);
        }
        // A tool may ask for a redacted copy of its output to be stored (`ask_user`'s
        // secret answers): the model gets the clear text, the event the redacted one.
        let redacted = meta
            .as_object_mut()
            .and_then(|m| m.remove(crate::tools::ask_user::REDACTED_OUTPUT))
            .and_then(|v| v.as_str().map(str::to_owned));
        // PostToolUse hooks see what the model will see; their feedback joins the result.
        let feedback = self
            .post_tool_hooks(
                session,
                call,
                out.ok,
                redacted.as_deref().unwrap_or(&out.content),
            )
            .await
            .map(|f| format!("\n\n[plugin hook] {f}"))
            .unwrap_or_default();
        match redacted {
            Some(stored) => {
                let mut o = self.tool_result(
                    session,
                    t,
                    call,
                    out.ok,
                    &format!("{stored}{feedback}"),
                    meta,
                );
                o.content = format!("{}{feedback}", out.content);
                o
            }
            None => self.tool_result(
                session,
                t,
                call,
                out.ok,
                &format!("{}{feedback}", out.content),
                meta,
            ),
        }
    }
}
