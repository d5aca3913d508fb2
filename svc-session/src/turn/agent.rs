//! The agent loop of one turn (issue 2 "A turn"):
//!
//! `turn.started` → `message.user` → per model call `message.delta`… (and
//! `message.reasoning`…) and one `usage` → per tool call `tool.call` → `tool.progress`… →
//! `tool.result` (+ `diff`) → the next model call with the results … until the model
//! answers without tool calls; then `message.done` → `context` → `turn.done{reason}` (the last
//! one emitted by the driver, see [`super::Turns`]).
//!
//! Safety nets: an answer with no text and no tool call gets one `[system]` nudge
//! ([`EMPTY_NUDGE`]); empty again, the turn ends `empty_response` after an `error{code:
//! "empty_response"}` event (spec `turn.done`, 1.23.0). Tool rounds that repeat earlier
//! calls without progress get `loop.suspected` and a nudge, then end `stalled`
//! ([`super::loop_guard`] has the thresholds). Otherwise the tool-round budget ends it
//! (`budget`).
//!
//! The history sent to the model is rebuilt from the stored events ([`super::history`]),
//! so it survives restarts. Dropping the provider stream cancels a model call; the turn's
//! cancellation token reaches running tools (a shell is killed).

use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use snowpea_proto::session::v1 as pb;

use super::{history, refs, slash, system_prompt, TurnEnd, TurnStart, Turns};
use crate::session::Session;
use snowpea_session_llm::provider::{
    ChatMessage, ModelRequest, Provider, ProviderError, StreamEvent, ThinkingBlock, ToolCall,
};

/// What one turn accumulated, for the closing events.
#[derive(Debug, Default, Clone)]
pub(crate) struct TurnAccount {
    /// Every answer text of the turn, concatenated (`message.done.text`).
    pub text: String,
    /// Automatic denials so far (the mode matrix, `denyExec`, an approval timeout): tool
    /// errors the model can work around; the [`MAX_DENIALS`]th ends the turn `denied`.
    pub denials: u32,
    /// A person refused a call (`approval.resolved{by:"user"}`): the turn ends `denied` after
    /// that call (spec approval.respond: "deny ends the turn"); the refusal, with the
    /// person's reason, stays in the history as the tool's result for the next model call.
    pub person_denied: bool,
    /// An approval was refused or timed out in an unattended (scheduled) session: the turn
    /// ends `denied` at once, and the run is reported `denied` / `denied_by_timeout`
    /// (issue 5; spec approval.respond: "deny ends the turn").
    pub unattended_denied: bool,
    /// Tokens of the last model call (input + output), and whether estimated.
    pub context_used: Option<(u64, bool)>,
    /// Vendor in use.
    pub provider: Option<String>,
    /// Model in use.
    pub model: Option<String>,
    /// Context window of the model, when known.
    pub window: Option<u64>,
    /// MCP tools of the turn (issue 6), listed from svc-mcp when the turn starts.
    pub mcp_tools: crate::clients::mcp::TurnTools,
    /// The command plane's and skills' tools of the turn (`session_command_list`,
    /// `session_command_run`, `skill_view`).
    pub extra_tools: crate::clients::mcp::TurnTools,
    /// A markdown command's `allowed-tools`: only these may be offered and called.
    pub allowed_tools: Option<Vec<String>>,
    /// Times `Stop` hooks continued this turn (`hook.continue.count`).
    pub stop_continues: i64,
    /// The session's agent definition's `tools` (issue 19): only these may be offered and
    /// called; `None` is every tool.
    pub agent_tools: Option<Vec<String>>,
    /// The name of that definition (for the `tool_inactive` message).
    pub agent_name: Option<String>,
    /// The host tools of the turn (issue 21; `tool_search` among them when the host has
    /// deferred tools), listed when the turn starts.
    pub host_tools: crate::clients::mcp::TurnTools,
    /// Names of the host tools registered `parallel: "safe"`.
    pub host_parallel: std::collections::HashSet<String>,
}

impl TurnAccount {
    /// True when the turn may offer and call `tool` (always, unless a command's
    /// `allowed-tools` limits it).
    pub fn tool_allowed(&self, tool: &str) -> bool {
        self.allowed_tools
            .as_deref()
            .is_none_or(|a| crate::commands::markdown::tool_allowed(a, tool))
            && self.agent_allows(tool)
    }

    /// True when the session's agent definition allows `tool` (always without one).
    pub fn agent_allows(&self, tool: &str) -> bool {
        self.agent_tools
            .as_deref()
            .is_none_or(|a| crate::commands::markdown::tool_allowed(a, tool))
    }
}

/// How a turn ended, for its `turn.done` and what follows it.
#[derive(Debug)]
pub(crate) struct TurnOutcome {
    /// `turn.done.reason`.
    pub end: TurnEnd,
    /// Every answer text of the turn (`message.done.text`; autoSpeak reads it aloud).
    pub text: String,
}

/// How one model call ended.
enum Call {
    /// The model finished this call (with the signed thinking blocks it streamed, kept on
    /// the assistant message for the next call of the turn).
    Done {
        text: String,
        calls: Vec<ToolCall>,
        thinking: Vec<ThinkingBlock>,
    },
    /// Interrupted mid-stream.
    Interrupted { text: String },
    /// The provider failed.
    Failed { code: &'static str, message: String },
}

/// Automatic denials (mode matrix, `denyExec`, approval timeout) in one turn that end it
/// with `denied`, so a model that keeps retrying refused calls cannot loop until the
/// tool-round budget. A person's deny ends the turn at once ([`TurnAccount::person_denied`]).
pub const MAX_DENIALS: u32 = 3;

/// The `[system]` note a model gets after an answer with no text and no tool call; the next
/// empty answer ends the turn `empty_response`.
pub const EMPTY_NUDGE: &str = "Your last answer was empty: no text and no tool call. \
     Answer the user's request now, or call a tool to make progress.";

/// The protocol error code of a provider failure.
pub fn provider_error_code(e: &ProviderError) -> &'static str {
    match e {
        ProviderError::Http {
            status: 401 | 403, ..
        } => "auth_expired",
        ProviderError::Http { .. } | ProviderError::Network { .. } | ProviderError::Config(_) => {
            "unavailable"
        }
        ProviderError::Protocol { .. } => "internal",
    }
}

/// Context window of a model: `settings.providers.<vendor>.contextWindow`, else a few
/// well-known model families, else unknown.
pub fn context_window(settings: &Value, vendor: &str, model: &str) -> Option<u64> {
    if let Some(n) = settings
        .pointer(&format!("/providers/{vendor}/contextWindow"))
        .and_then(Value::as_u64)
    {
        return Some(n);
    }
    let m = model.to_ascii_lowercase();
    if m.contains("claude") {
        Some(200_000)
    } else if m.contains("gpt-4.1") {
        Some(1_047_576)
    } else if m.contains("gpt-4o") {
        Some(128_000)
    } else {
        None
    }
}

/// `used / window` in percent with one decimal, `None` when the window is unknown.
pub fn percent(used: u64, window: Option<u64>) -> Option<f64> {
    window.filter(|w| *w > 0).map(|w| {
        let p = used as f64 * 100.0 / w as f64;
        (p * 10.0).round() / 10.0
    })
}

impl Turns {
    /// Runs one turn up to its `context` event and returns how it ended. The driver
    /// ([`Turns::drive`]) emits `turn.done` itself, in the same step that frees the running
    /// slot, so no client sees `turn.done` while the session still counts as running.
    ///
    /// A text starting with `/` is a slash command ([`super::command`]).
    pub(crate) async fn run_turn(&self, session: &Arc<Session>, t: &TurnStart) -> TurnOutcome {
        if let Some((name, args)) = crate::commands::parse_slash(&t.text) {
            return self.command_turn(session, t, &name, &args).await;
        }
        self.model_turn(session, t, None, None).await
    }

    /// The model turn of `t.text` (the prompt as typed), or — in a command turn, whose
    /// `turn.started` was already emitted — of the command's `expansion` (a skill's or
    /// markdown command's body, a workflow step's prompt: `message.user{text: t.text,
    /// expansion}`, the model given `expansion.text`), its tools limited to `allowed_tools`
    /// when set.
    pub(crate) async fn model_turn(
        &self,
        session: &Arc<Session>,
        t: &TurnStart,
        expansion: Option<pb::message_user_event::Expansion>,
        allowed_tools: Option<Vec<String>>,
    ) -> TurnOutcome {
        let command_turn = expansion.is_some();
        let text = expansion
            .as_ref()
            .map_or(t.text.as_str(), |e| e.text.as_str());
        // Earlier turns must be committed before the history is read back.
        if let Err(e) = self.log.flush().await {
            tracing::error!(error = %format!("{e:#}"), "flush before turn failed");
        }
        if let Some(a) = self.agents() {
            a.turn_starting(&session.id, &t.turn_id);
        }
        let mut messages = match self.log.of_kinds(&session.id, history::KINDS).await {
            Ok(rows) => {
                // Images attached to earlier prompts go again, newest first, within caps;
                // they are read from disk, so on the blocking pool.
                let store = self.attachments.clone();
                let session_id = session.id.clone();
                let rebuilt = tokio::task::spawn_blocking(move || {
                    let images_of = |turn_id: &str| store.images_of_turn(&session_id, turn_id);
                    history::rebuild_with(
                        rows,
                        &images_of,
                        history::Replay {
                            max_images: crate::attachments::REPLAY_MAX_IMAGES,
                            max_bytes: crate::attachments::REPLAY_MAX_BYTES,
                        },
                    )
                })
                .await;
                match rebuilt {
                    Ok(messages) => messages,
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(e) => {
                        tracing::error!(error = %e, session_id = %session.id, "cannot read history");
                        Vec::new()
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, session_id = %session.id, "cannot read history");
                Vec::new()
            }
        };
        match &t.system_reason {
            // session.continue: no message.user; the [system] input rides in `note`.
            Some(reason) => self.event(
                session,
                &pb::TurnStartedEvent {
                    turn_id: t.turn_id.clone(),
                    prompt: None,
                    queued: t.queued,
                    initiator: "system".into(),
                    reason: Some(reason.clone()),
                    note: Some(t.text.clone()),
                    ..Default::default()
                },
            ),
            // A command turn announced itself before its command ran.
            None if command_turn => {}
            None => {
                self.event(
                    session,
                    &pb::TurnStartedEvent {
                        turn_id: t.turn_id.clone(),
                        prompt: Some(t.text.clone()),
                        queued: t.queued,
                        initiator: "user".into(),
                        ..Default::default()
                    },
                );
            }
        }
        let input = if t.system_reason.is_none() {
            self.user_message(
                session,
                &t.turn_id,
                &t.text,
                expansion.as_ref(),
                false,
                &t.attachments,
            )
        } else {
            ChatMessage::user(text.to_owned())
        };
        messages.push(input);
        let mut acc = TurnAccount {
            allowed_tools,
            ..Default::default()
        };
        let end = self
            .agent_loop(session, t, text, &mut messages, &mut acc)
            .await;

        self.event(
            session,
            &pb::MessageDoneEvent {
                turn_id: t.turn_id.clone(),
                text: acc.text.clone(),
                role: "assistant".into(),
                ..Default::default()
            },
        );
        let (used, estimated) = match acc.context_used {
            Some(reported) => reported,
            None => (
                snowpea_session_llm::tokens::estimate_blocking(
                    messages.clone(),
                    String::new(),
                    acc.model.clone().unwrap_or_default(),
                )
                .await,
                true,
            ),
        };
        let percent = percent(used, acc.window);
        self.event(
            session,
            &pb::ContextEvent {
                turn_id: t.turn_id.clone(),
                used: used as i64,
                window: acc.window.map(|w| w as i64),
                percent,
                estimated,
                model: acc.model.clone(),
                provider: acc.provider.clone(),
                ..Default::default()
            },
        );
        session.update(|r| {
            r.context_used = used as i64;
            r.context_window = acc.window.map(|w| w as i64);
        });
        self.sessions.save(session);
        TurnOutcome {
            end,
            text: acc.text,
        }
    }

    /// Emits `message.user` for `text` as the user typed it (with a command's `expansion`,
    /// whose body the model gets instead), its resolved `@` references ([`refs`]) and its
    /// attachments as listed, and returns what the model gets: the text (or the expansion)
    /// plus the reference and attachment blocks, with the attached images.
    ///
    /// Only the model sees those blocks (spec `session.prompt`: "only the model sees the
    /// rendered page"; issue 32 item 3): they are stored as the event's model-only `input`
    /// ([`crate::events`]) for the history of later turns, never published.
    pub(crate) fn user_message(
        &self,
        session: &Session,
        turn_id: &str,
        text: &str,
        expansion: Option<&pb::message_user_event::Expansion>,
        steered: bool,
        attachments: &crate::attachments::Prepared,
    ) -> ChatMessage {
        let given = expansion.map_or(text, |e| e.text.as_str());
        let resolved = if slash::parse(given).is_some() {
            refs::Resolved::default()
        } else {
            refs::resolve(&session.workdir(), given)
        };
        let mut context = resolved.context;
        context.push_str(&attachments.context);
        for a in attachments.listed.iter().filter(|a| a.kind == "image") {
            context.push_str(&format!("\n\n[image {} attached]", a.name));
        }
        let input = (!context.is_empty()).then(|| format!("{given}{context}"));
        let event = pb::MessageUserEvent {
            turn_id: turn_id.to_owned(),
            text: text.to_owned(),
            steered,
            refs: resolved
                .refs
                .iter()
                .map(snowpea_proto::wkt::to_struct)
                .collect(),
            attachments: attachments.listed.clone(),
            expansion: expansion.cloned(),
            ..Default::default()
        };
        match &input {
            Some(input) => self.log.event_to_with_model_only(
                session,
                &event,
                serde_json::json!({ history::MODEL_INPUT: input }),
            ),
            None => self.event(session, &event),
        }
        ChatMessage::user(input.unwrap_or_else(|| given.to_owned()))
            .with_images(attachments.images.clone())
    }

    fn error_event(&self, session: &Session, turn_id: &str, code: &str, message: &str) {
        self.event(
            session,
            &pb::ErrorEvent {
                turn_id: turn_id.to_owned(),
                code: code.to_owned(),
                message: message.to_owned(),
                ..Default::default()
            },
        );
    }

    async fn agent_loop(
        &self,
        session: &Arc<Session>,
        t: &TurnStart,
        text: &str,
        messages: &mut Vec<ChatMessage>,
        acc: &mut TurnAccount,
    ) -> TurnEnd {
        // Plugin hooks see a person's prompt (not a system turn's input) before the model.
        if t.system_reason.is_none() {
            match self.prompt_hooks(session, text).await {
                Err(reason) => {
                    self.error_event(
                        session,
                        &t.turn_id,
                        "mode_denied",
                        &format!("a plugin hook (UserPromptSubmit) blocked this prompt: {reason}"),
                    );
                    return TurnEnd::Denied;
                }
                Ok(context) if !context.is_empty() => {
                    // The hooks' context rides with the prompt (not stored in the history).
                    let block: Vec<String> =
                        context.iter().map(|c| format!("[system] {c}")).collect();
                    match messages.last_mut() {
                        Some(m) if m.role == snowpea_session_llm::provider::Role::User => {
                            m.content.push_str("\n\n");
                            m.content.push_str(&block.join("\n"));
                        }
                        _ => messages.push(super::busy::notice_message(&context)),
                    }
                }
                Ok(_) => {}
            }
        }
        let workdir = session.workdir();
        let docs = match self.models.settings(&workdir) {
            Ok(d) => d,
            Err(e) => {
                self.error_event(
                    session,
                    &t.turn_id,
                    "invalid_params",
                    &format!("cannot read settings: {e:#}"),
                );
                return TurnEnd::Error;
            }
        };
        let settings = docs.effective.clone();
        let row = session.row();
        self.providers
            .refresh_if_expiring(row.provider.as_deref())
            .await;
        // The session's agent definition and the delegation tool (issue 19).
        let profile = match self.agents() {
            Some(a) => a.turn_profile(session).await,
            None => crate::agents::TurnProfile::default(),
        };
        acc.agent_tools = profile.allowed_tools();
        acc.agent_name = profile.definition.as_ref().map(|d| d.name.clone());
        let chosen = match self.models.in_effect_with(
            &docs,
            &row,
            profile.explicit_model.as_deref(),
            profile.agent_model.as_deref(),
        ) {
            Ok(c) => c,
            Err((e, message)) => {
                self.error_event(session, &t.turn_id, provider_error_code(&e), &message);
                return TurnEnd::Error;
            }
        };
        let provider = chosen.provider.clone();
        let model = chosen.model.clone();
        let vendor = chosen.vendor.clone();
        let vision = settings
            .pointer(&format!("/providers/{vendor}/vision"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(true);
        if !vision {
            // Earlier prompts' images are not sent to a model without vision (a placeholder
            // says so); only images in this turn's own prompt are an error.
            let current = messages
                .iter()
                .rposition(|m| m.role == snowpea_session_llm::provider::Role::User);
            for (i, m) in messages.iter_mut().enumerate() {
                if m.role == snowpea_session_llm::provider::Role::User
                    && Some(i) != current
                    && !m.images.is_empty()
                {
                    for _ in std::mem::take(&mut m.images) {
                        m.content.push_str("\n\n");
                        m.content.push_str(
                            "[an image attached earlier is not sent: this model takes no images]",
                        );
                    }
                }
            }
        }
        if !vision
            && messages
                .iter()
                .rev()
                .find(|m| m.role == snowpea_session_llm::provider::Role::User)
                .is_some_and(|m| !m.images.is_empty())
        {
            self.error_event(
                session,
                &t.turn_id,
                "invalid_params",
                &format!(
                    "{vendor}:{model} does not accept images (providers.{vendor}.vision is false); \
                     send the prompt without the image or pick a vision model with session.setModel"
                ),
            );
            return TurnEnd::Error;
        }
        acc.window = context_window(&settings, &vendor, &model);
        acc.provider = Some(vendor.clone());
        acc.model = Some(model.clone());
        session.update(|r| {
            r.provider_in_use = Some(vendor.clone());
            r.model_in_use = Some(model.clone());
        });
        self.sessions.save(session);

        // MCP tools of the ready servers of this workdir (issue 6); none while svc-mcp is down.
        acc.mcp_tools.0 = self
            .tools
            .mcp()
            .tools(std::path::Path::new(&row.workdir))
            .await;
        let command_tools = self.commands.agent_tools(session).await;
        // Host tools (issue 21): the session's host, waited for when a scheduled run's host
        // is not connected; deferred ones are offered by name until `tool_search` loads them.
        let host = self.host_turn_tools(session, t, acc).await;
        // Recall (issue 4): the best memories for the user's message from the project, agent
        // and global namespaces; skipped with a warning when svc-memory is down.
        let recalled = crate::clients::memory::MemoryClient::new(self.home.socket("memory"))
            .recall(
                &row.workdir,
                profile.memory_agent.as_deref(),
                text,
                crate::clients::memory::top_k(&settings),
            )
            .await;
        let recall = crate::clients::memory::recall_block(&recalled);
        // Delegation mode (`/team on`, `agents.delegateByDefault`): the lead hands the work
        // to subagents, when it may delegate at all.
        let delegating = row
            .delegation
            .unwrap_or_else(|| crate::session::delegation::by_default(&settings));
        // The tools offered and the system prompt, from the agent definition in force; rebuilt
        // when session.setAgent changes it during the turn (it applies from the next call).
        let offer = |acc: &mut TurnAccount, profile: &crate::agents::TurnProfile| {
            acc.agent_tools = profile.allowed_tools();
            acc.agent_name = profile.definition.as_ref().map(|d| d.name.clone());
            acc.extra_tools.0 = command_tools.clone();
            acc.extra_tools.0.extend(profile.tools.iter().cloned());
            let shadowed: std::collections::HashSet<&str> =
                acc.host_tools.0.iter().map(|tool| tool.name()).collect();
            let turn_tools: Vec<_> = acc
                .host_tools
                .0
                .iter()
                .filter(|tool| !host.deferred.contains(tool.name()))
                .chain(
                    self.tools
                        .builtin()
                        .iter()
                        .filter(|tool| !shadowed.contains(tool.name())),
                )
                .chain(&acc.mcp_tools.0)
                .chain(&acc.extra_tools.0)
                .filter(|tool| acc.tool_allowed(tool.name()))
                .cloned()
                .collect();
            let specs: Vec<_> = turn_tools.iter().map(|tool| tool.spec()).collect();
            let mut system = system_prompt::build(&session.row(), &turn_tools);
            system.push_str(&host.prompt);
            if let Some(persona) = profile.persona() {
                system.push_str(&persona);
            }
            if delegating
                && turn_tools
                    .iter()
                    .any(|tool| tool.name() == crate::agents::delegate::NAME)
            {
                system.push_str(crate::session::delegation::delegation_prompt());
            }
            if let Some(block) = &recall {
                system.push_str(block);
            }
            (specs, system)
        };
        let (mut base_specs, mut system) = offer(acc, &profile);
        let mut agent_in_force = row.agent.clone();
        // Settings `agent.max_tool_rounds` / `agent.max_tokens` (validated by settings.set;
        // a hand-edited bad value is ignored) win over the service's defaults.
        let agent_setting = |key: &str| {
            snowpea_common::settings::get(&settings, key)
                .and_then(serde_json::Value::as_u64)
                .filter(|n| (1..=u64::from(u32::MAX)).contains(n))
        };
        let budget_setting = agent_setting("agent.max_tool_rounds")
            .map_or(self.limits.max_tool_rounds, |n| n as usize);
        let mut max_tool_rounds = profile.max_rounds().unwrap_or(budget_setting);
        let max_tokens = agent_setting("agent.max_tokens").map(|n| n as u32);
        let auto_compact = crate::compaction::auto_threshold(&settings);
        let mut loops = super::loop_guard::LoopGuard::default();
        // The model was nudged after an empty answer (reset by an answer with content).
        let mut nudged_empty = false;
        let mut round = 0;
        while round < max_tool_rounds {
            round += 1;
            let now_agent = session.row().agent;
            if now_agent != agent_in_force {
                agent_in_force = now_agent;
                if let Some(a) = self.agents() {
                    let profile = a.turn_profile(session).await;
                    (base_specs, system) = offer(acc, &profile);
                    max_tool_rounds = profile.max_rounds().unwrap_or(budget_setting);
                }
            }
            // Auto-compaction (issue 16) at the start of a model call, over the threshold of
            // a known window.
            if let (Some(threshold), Some(window)) = (auto_compact, acc.window) {
                let used = snowpea_session_llm::tokens::estimate_blocking(
                    messages.clone(),
                    system.clone(),
                    model.clone(),
                )
                .await;
                if percent(used, Some(window)).is_some_and(|p| p >= threshold)
                    && crate::compaction::has_older(&settings, messages)
                {
                    let call = crate::compaction::CompactionCall {
                        turn_id: Some(&t.turn_id),
                        instructions: None,
                        auto: true,
                        cancel: &t.cancel,
                    };
                    let done = self
                        .compaction
                        .run(session, std::mem::take(messages), call)
                        .await;
                    *messages = done.messages;
                }
            }
            // Notices and steered prompts join before every model call (issue 16).
            if self.fold_waiting(session, t, messages) {
                // A person's new words: repeats after them are not the model's loop.
                loops.restart_streak();
            }
            let mut specs = base_specs.clone();
            specs.extend(host.loaded_specs(&acc.host_tools));
            let request = ModelRequest {
                model: model.clone(),
                system: system.clone(),
                messages: messages.clone(),
                tools: specs,
                max_tokens,
                effort: chosen.effort.effort.map(str::to_owned),
            };
            let (text, calls, thinking) = match self
                .model_call(session, t, provider.as_ref(), request, acc)
                .await
            {
                Call::Done {
                    text,
                    calls,
                    thinking,
                } => (text, calls, thinking),
                Call::Interrupted { text } => {
                    messages.push(ChatMessage::assistant(text, vec![]));
                    return TurnEnd::Interrupted;
                }
                Call::Failed { code, message } => {
                    self.error_event(session, &t.turn_id, code, &message);
                    return TurnEnd::Error;
                }
            };
            if let Some(a) = self.agents() {
                a.child_progress(
                    session,
                    crate::agents::spawn::Progress::Message {
                        text: text.clone(),
                        tool_calls: !calls.is_empty(),
                    },
                );
            }
            messages
                .push(ChatMessage::assistant(text.clone(), calls.clone()).with_thinking(thinking));
            if calls.is_empty() {
                if self.has_steers(session) {
                    // A prompt steered in while the model answered: it gets its answer in
                    // this turn.
                    continue;
                }
                if text.trim().is_empty() {
                    // No text and no tool call: one nudge, then `empty_response`.
                    if !std::mem::replace(&mut nudged_empty, true) {
                        tracing::info!(session_id = %session.id, turn_id = %t.turn_id, "empty answer; nudging the model");
                        messages.push(super::busy::notice_message(&[EMPTY_NUDGE.to_owned()]));
                        continue;
                    }
                    self.error_event(
                        session,
                        &t.turn_id,
                        "empty_response",
                        "the model answered with no text and no tool call, again after a nudge",
                    );
                    return TurnEnd::EmptyResponse;
                }
                // An answer with content ends the empty streak (a Stop hook may continue).
                nudged_empty = false;
                if let Some(reason) = self.stop_hooks(session, t, acc, &text).await {
                    // A Stop hook asks for more: its instruction is the model's next input.
                    messages.push(super::busy::notice_message(&[reason]));
                    continue;
                }
                return TurnEnd::Complete;
            }
            nudged_empty = false;
            for batch in self.batches(&calls, acc) {
                let outcomes = self.run_batch(session, t, &batch, acc).await;
                let mut interrupted = false;
                for (call, outcome) in batch.iter().zip(outcomes) {
                    loops.record(&call.name, &call.arguments, outcome.ok, &outcome.content);
                    messages.push(
                        ChatMessage::tool_result(call, outcome.content, !outcome.ok)
                            .with_images(outcome.images)
                            .sensitive(outcome.sensitive),
                    );
                    interrupted |= outcome.interrupted;
                }
                if interrupted {
                    return TurnEnd::Interrupted;
                }
                if acc.person_denied || acc.denials >= MAX_DENIALS || acc.unattended_denied {
                    return TurnEnd::Denied;
                }
            }
            match loops.end_round() {
                super::loop_guard::Verdict::Continue => {}
                super::loop_guard::Verdict::Suspected { tool, count } => {
                    tracing::info!(session_id = %session.id, turn_id = %t.turn_id, tool = %tool, count, "loop suspected");
                    self.event(
                        session,
                        &pb::LoopSuspectedEvent {
                            turn_id: t.turn_id.clone(),
                            tool: tool.clone(),
                            count: i64::from(count),
                            ..Default::default()
                        },
                    );
                    messages.push(super::busy::notice_message(&[super::loop_guard::nudge(
                        &tool, count,
                    )]));
                }
                super::loop_guard::Verdict::Stalled => {
                    tracing::warn!(session_id = %session.id, turn_id = %t.turn_id, "tool rounds stalled");
                    return TurnEnd::Stalled;
                }
            }
        }
        tracing::warn!(session_id = %session.id, turn_id = %t.turn_id, "tool-round budget exhausted");
        TurnEnd::Budget
    }

    async fn model_call(
        &self,
        session: &Session,
        t: &TurnStart,
        provider: &dyn Provider,
        request: ModelRequest,
        acc: &mut TurnAccount,
    ) -> Call {
        let input_estimate = snowpea_session_llm::tokens::estimate_blocking(
            request.messages.clone(),
            request.system.clone(),
            acc.model.clone().unwrap_or_else(|| request.model.clone()),
        )
        .await;
        let mut stream = provider.stream(request);
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut thinking = Vec::new();
        let mut usage = None;
        let mut reasoning_chars = 0usize;
        let idle = self.limits.provider_idle_timeout;
        loop {
            let next = tokio::select! {
                biased;
                _ = t.cancel.cancelled() => return Call::Interrupted { text },
                n = tokio::time::timeout(idle, stream.next()) => n,
            };
            match next {
                Err(_) => {
                    return Call::Failed {
                        code: "unavailable",
                        message: format!(
                            "{}: no data from the model for {}s",
                            provider.vendor(),
                            idle.as_secs()
                        ),
                    }
                }
                Ok(None) | Ok(Some(Ok(StreamEvent::Done { .. }))) => break,
                Ok(Some(Ok(StreamEvent::TextDelta(d)))) => {
                    if d.is_empty() {
                        continue;
                    }
                    self.event(
                        session,
                        &pb::MessageDeltaEvent {
                            turn_id: t.turn_id.clone(),
                            text: d.clone(),
                            ..Default::default()
                        },
                    );
                    text.push_str(&d);
                    acc.text.push_str(&d);
                }
                Ok(Some(Ok(StreamEvent::ReasoningDelta(d)))) => {
                    reasoning_chars += d.chars().count();
                    self.event(
                        session,
                        &pb::MessageReasoningEvent {
                            turn_id: t.turn_id.clone(),
                            text: d,
                            chars: reasoning_chars as i64,
                            ..Default::default()
                        },
                    );
                }
                Ok(Some(Ok(StreamEvent::ToolCall(c)))) => calls.push(c),
                Ok(Some(Ok(StreamEvent::Thinking(b)))) => thinking.push(b),
                Ok(Some(Ok(StreamEvent::Model(_)))) => {}
                Ok(Some(Ok(StreamEvent::Usage(u)))) => usage = Some(u),
                Ok(Some(Err(e))) => {
                    return Call::Failed {
                        code: provider_error_code(&e),
                        message: e.to_string(),
                    }
                }
            }
        }
        drop(stream);
        // llama.cpp's timings, when the server sent them (capability `llmTimings`).
        let timings = usage.as_ref().and_then(|u| u.timings.clone());
        let (input, output, cached, estimated) = match usage {
            Some(u) => (u.input_tokens, u.output_tokens, u.cached_tokens, false),
            None => {
                let out_chars = text.len()
                    + calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.to_string().len())
                        .sum::<usize>();
                (input_estimate, (out_chars as u64).div_ceil(4), 0, true)
            }
        };
        acc.context_used = Some((input + output, estimated));
        if let Some(a) = self.agents() {
            a.child_progress(
                session,
                crate::agents::spawn::Progress::Usage {
                    input: input as i64,
                    output: output as i64,
                },
            );
        }
        self.event(
            session,
            &pb::UsageEvent {
                turn_id: t.turn_id.clone(),
                input_tokens: input as i64,
                output_tokens: output as i64,
                cached_input_tokens: (cached > 0).then_some(cached as i64),
                model: acc.model.clone(),
                provider: acc.provider.clone(),
                timings: timings.unwrap_or_default().into_iter().collect(),
                ..Default::default()
            },
        );
        Call::Done {
            text,
            calls,
            thinking,
        }
    }
}
