//! Plugin hooks (issue 18 "Skills and plugins": `hooks/hooks.json` of an installed plugin;
//! Claude Code's hook events; protocol 1.25.0 event `hook.continue`). No JSON-RPC methods,
//! no tables.
//!
//! [`Hooks`] holds the hooks of every plugin under `$SNOWPEA_HOME/plugins` ([`config`]),
//! reloaded whenever the skill roots are (install, remove, `skill.reload`, …). The turn runs
//! them at these points ([`HookEvent`]):
//!
//! * `SessionStart` — after `session.create` / `session.resume` (`source` `startup` /
//!   `resume`); what it prints reaches the model as a `[system]` notice of the next call;
//! * `UserPromptSubmit` — before a prompt's model turn (`prompt`); a block ends the turn
//!   `denied` before any model call, printed text joins the prompt as `[system]` context;
//! * `PreToolUse` — before a tool runs, after the permission decision (`tool_name`,
//!   `tool_input`); a block refuses the call (the model gets the reason as the tool's error).
//!   A hook can refuse, never allow: approvals are not skipped;
//! * `PostToolUse` — after a tool ran (`tool_response` too); a block's reason is appended to
//!   the result the model gets;
//! * `Stop` — when the model answers without tool calls; a block continues the turn with the
//!   reason handed to the model (`hook.continue{count, reason}`), at most
//!   [`MAX_STOP_CONTINUES`] times per turn (`stop_hook_active` tells the hook it already did).
//!
//! A hook gets the event as JSON on stdin (`session_id`, `cwd`, `hook_event_name` and the
//! fields above) and answers the Claude Code way: exit 0 (stdout is context, or a JSON
//! object with `decision: "block"` + `reason`, `continue: false` + `stopReason`,
//! `hookSpecificOutput.permissionDecision: "deny"` + `permissionDecisionReason`,
//! `hookSpecificOutput.additionalContext`), exit 2 (a block, stderr the reason), anything
//! else a non-blocking failure. Safety ([`exec`]): argv only, never a shell string; a clean
//! environment; a timeout (`timeout`, default 30 s, at most 120 s) killing its process group;
//! output bounded. A hook that cannot start, times out or fails is logged (plugin, event,
//! exit code — never the event's input) and ignored: it never breaks the turn.

pub mod config;
pub mod exec;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::{json, Value};

use crate::session::Sessions;
use config::HookDef;
use exec::Ran;
use snowpea_session_skills::Skills;

/// Most times Stop hooks may continue one turn.
pub const MAX_STOP_CONTINUES: i64 = 3;
/// Longest context or reason kept from one hook, in bytes.
pub const MAX_TEXT_BYTES: usize = 8 * 1024;

/// When a hook runs (Claude Code's event names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    /// Before a tool runs.
    PreToolUse,
    /// After a tool ran.
    PostToolUse,
    /// Before a prompt's model turn.
    UserPromptSubmit,
    /// After `session.create` / `session.resume`.
    SessionStart,
    /// When the model finished answering.
    Stop,
}

impl HookEvent {
    /// The name in `hooks.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::Stop => "Stop",
        }
    }

    /// Parses a `hooks.json` event name (others are `None`).
    pub fn parse(s: &str) -> Option<HookEvent> {
        [
            HookEvent::PreToolUse,
            HookEvent::PostToolUse,
            HookEvent::UserPromptSubmit,
            HookEvent::SessionStart,
            HookEvent::Stop,
        ]
        .into_iter()
        .find(|e| e.as_str() == s)
    }
}

/// Claude Code's names of the built-in tools, so a plugin's `matcher` written for them
/// (`Write|Edit`, `Bash`) applies to ours.
pub const TOOL_ALIASES: &[(&str, &str)] = &[
    ("shell", "Bash"),
    ("write_file", "Write"),
    ("edit_file", "Edit"),
    ("read_file", "Read"),
    ("list_dir", "LS"),
    ("glob", "Glob"),
    ("grep", "Grep"),
    ("web_fetch", "WebFetch"),
    ("web_search", "WebSearch"),
];

/// What the hooks of one event decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// A hook blocked: its reason.
    pub block: Option<String>,
    /// Text the hooks printed for the model, in hook order.
    pub context: Vec<String>,
}

/// What one hook is told (beside `session_id`, `cwd` and `hook_event_name`).
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// The session.
    pub session_id: &'a str,
    /// Its workdir (also the hook's working directory).
    pub workdir: &'a Path,
    /// The tool of a tool event (matched against `matcher`).
    pub tool: Option<&'a str>,
    /// The event's own fields (`prompt`, `tool_input`, …).
    pub fields: Value,
}

/// The hooks component (see the module doc).
pub struct Hooks {
    plugins_dir: PathBuf,
    mark: Option<String>,
    hooks: RwLock<Arc<Vec<HookDef>>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks").finish_non_exhaustive()
    }
}

fn clip(s: &str) -> String {
    let s = s.trim();
    if s.len() <= MAX_TEXT_BYTES {
        return s.to_owned();
    }
    let cut = crate::tools::args::floor_char_boundary(s, MAX_TEXT_BYTES);
    format!("{}…", &s[..cut])
}

/// Reads one hook's answer (see the module doc); `None` for a non-blocking failure.
pub fn verdict_of(ran: &Ran) -> Option<(Option<String>, Option<String>)> {
    match ran {
        Ran::Exited {
            code: Some(0),
            stdout,
            ..
        } => {
            let out = stdout.trim();
            match serde_json::from_str::<Value>(out) {
                Ok(Value::Object(o)) => {
                    let s = |v: Option<&Value>| v.and_then(Value::as_str).map(clip);
                    let specific = o.get("hookSpecificOutput");
                    let block = if o.get("decision").and_then(Value::as_str) == Some("block") {
                        Some(s(o.get("reason")).unwrap_or_else(|| "blocked by a hook".into()))
                    } else if o.get("continue") == Some(&Value::Bool(false)) {
                        Some(s(o.get("stopReason")).unwrap_or_else(|| "stopped by a hook".into()))
                    } else if specific
                        .and_then(|h| h.get("permissionDecision"))
                        .and_then(Value::as_str)
                        == Some("deny")
                    {
                        Some(
                            s(specific.and_then(|h| h.get("permissionDecisionReason")))
                                .unwrap_or_else(|| "denied by a hook".into()),
                        )
                    } else {
                        None
                    };
                    let context = s(specific.and_then(|h| h.get("additionalContext")))
                        .filter(|c| !c.is_empty());
                    Some((block, context))
                }
                _ => Some((None, Some(clip(out)).filter(|c| !c.is_empty()))),
            }
        }
        Ran::Exited {
            code: Some(2),
            stderr,
            ..
        } => Some((
            Some(
                Some(clip(stderr))
                    .filter(|r| !r.is_empty())
                    .unwrap_or_else(|| "blocked by a hook".into()),
            ),
            None,
        )),
        _ => None,
    }
}

impl Hooks {
    /// The hooks of the plugins under `$SNOWPEA_HOME/plugins`; the processes they start
    /// carry `mark` ([`snowpea_common::orphans::mark`]) when given.
    pub fn open(plugins_dir: PathBuf, mark: Option<String>) -> Self {
        let h = Hooks {
            plugins_dir,
            mark,
            hooks: RwLock::new(Arc::new(Vec::new())),
        };
        h.reload();
        h
    }

    /// Reads the plugins' `hooks/hooks.json` again.
    pub fn reload(&self) {
        let loaded = config::load(&self.plugins_dir);
        for e in &loaded.errors {
            tracing::warn!(error = %e, "plugin hook skipped");
        }
        tracing::info!(hooks = loaded.hooks.len(), "plugin hooks loaded");
        *self.hooks.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(loaded.hooks);
    }

    /// The hooks that apply to `event` (and `tool`).
    pub fn matching(&self, event: HookEvent, tool: Option<&str>) -> Vec<HookDef> {
        let all = self.hooks.read().unwrap_or_else(|p| p.into_inner()).clone();
        all.iter()
            .filter(|h| h.event == event)
            .filter(|h| match (&h.matcher, tool) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(m), Some(t)) => {
                    m.is_match(t)
                        || TOOL_ALIASES
                            .iter()
                            .any(|(ours, theirs)| *ours == t && m.is_match(theirs))
                }
            })
            .cloned()
            .collect()
    }

    /// Runs the hooks of `event` (at once, each bounded by its timeout) and combines their
    /// answers: the first block in hook order wins; contexts are kept in hook order.
    pub async fn run(&self, event: HookEvent, input: Input<'_>) -> Verdict {
        let hooks = self.matching(event, input.tool);
        if hooks.is_empty() {
            return Verdict::default();
        }
        let mut body = json!({
            "session_id": input.session_id,
            "cwd": input.workdir,
            "hook_event_name": event.as_str(),
        });
        if let (Some(b), Value::Object(fields)) = (body.as_object_mut(), input.fields) {
            b.extend(fields);
        }
        let runs = hooks
            .iter()
            .map(|h| exec::run(h, &body, input.workdir, self.mark.as_deref()));
        let results = futures::future::join_all(runs).await;
        let mut v = Verdict::default();
        for (h, ran) in hooks.iter().zip(&results) {
            match verdict_of(ran) {
                Some((block, context)) => {
                    if v.block.is_none() {
                        v.block = block;
                    }
                    v.context.extend(context);
                }
                None => {
                    let why = match ran {
                        Ran::Exited { code, stderr, .. } => format!(
                            "exit {}: {}",
                            code.map_or("signal".to_string(), |c| c.to_string()),
                            stderr
                                .lines()
                                .next()
                                .unwrap_or_default()
                                .chars()
                                .take(200)
                                .collect::<String>()
                        ),
                        Ran::NotStarted(e) => format!("not started: {e}"),
                        Ran::TimedOut => format!("timed out after {} s", exec::secs(h.timeout)),
                    };
                    tracing::warn!(plugin = %h.plugin, event = event.as_str(), failure = %why, "hook failed; ignored");
                }
            }
        }
        v
    }

    /// Reloads on every reload of the skill roots (install, remove, `skill.reload`, …), and
    /// runs `SessionStart` hooks after each `session.create` / `session.resume`, queueing
    /// what they print as a `[system]` notice for the session's next model call.
    pub fn watch(self: &Arc<Self>, skills: &Skills, sessions: &Arc<Sessions>) {
        use tokio::sync::broadcast::error::RecvError;
        let mut reloads = skills.subscribe();
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                match reloads.recv().await {
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break,
                }
                let Some(h) = this.upgrade() else { break };
                tokio::task::spawn_blocking(move || h.reload()).await.ok();
            }
        });
        let mut opened = sessions.subscribe_opened();
        let this = Arc::downgrade(self);
        let sessions = Arc::downgrade(sessions);
        tokio::spawn(async move {
            loop {
                let o = match opened.recv().await {
                    Ok(o) => o,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                };
                let (Some(h), Some(sessions)) = (this.upgrade(), sessions.upgrade()) else {
                    break;
                };
                if h.matching(HookEvent::SessionStart, None).is_empty() {
                    continue;
                }
                let Ok(session) = sessions.get(&o.session_id) else {
                    continue;
                };
                // Each session's start hooks run on their own; a slow one delays nobody.
                tokio::spawn(async move {
                    let source = if o.reason == "session.resume" {
                        "resume"
                    } else {
                        "startup"
                    };
                    let v = h
                        .run(
                            HookEvent::SessionStart,
                            Input {
                                session_id: &session.id,
                                workdir: &o.workdir,
                                tool: None,
                                fields: json!({"source": source}),
                            },
                        )
                        .await;
                    for c in v.context {
                        crate::turn::busy::push_notice(&session, c);
                    }
                });
            }
        });
    }
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
