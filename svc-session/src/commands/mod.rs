//! Slash commands: `command.list`, and what a command turn runs (`command.run` and a
//! `session.prompt` starting with `/` both start one in [`crate::turn::Turns`]; protocol
//! 1.25.0 "command.*", upstream-behaviour §3 "Commands").
//!
//! [`Commands`] is the one registry: the built-ins (one file each, `commands/<name>.rs`,
//! each a [`Builtin`] declaring name, summary, argument schema and risk tiers) and the
//! markdown commands of the skill roots (`commands/*.md`, user-invocable `SKILL.md`s, plugin
//! commands; [`markdown`]). A later root wins a name clash, so a project command replaces a
//! built-in of the same name. Every reload of the skill roots is broadcast as
//! `commands.changed{commands, reason}` ([`Commands::watch`]). No tables.
//!
//! **Risk tiers** (`read`, `low_write`, `medium_write`, `high_risk`; `docs/OPERATIONS.md`
//! "snowpea cmd"): the status forms (`status`, bare where declared, `list`, `current`) are
//! `read`. A `medium_write`/`high_risk` call from the headless plane (a `command.run` of a
//! connection whose `clientKind` is `cli`, or the `session_command_run` tool) needs
//! `--yes`/`--confirm` in its args (`confirm: true` in the schema); without it the command
//! fails with `CONFIRM_REQUIRED` before it changes anything.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::checkpoints::Checkpoints;
use crate::compaction::Compaction;
use crate::events::EventLog;
use crate::models::Models;
use crate::permission::Allowlist;
use crate::session::{Session, Sessions};
use crate::settings::Settings;
use crate::tools::Tools;
use snowpea_session_error::Result;
use snowpea_session_skills::{Kind, Skills};

pub mod agent_tools;
pub mod args;
pub mod markdown;
pub mod workflow;

mod accept;
mod agent;
mod allow;
mod allowlist;
mod auto;
mod busy;
mod compact;
mod deepinit;
mod delegate;
mod effort;
mod export;
mod help;
mod mcp;
mod memory;
mod mode;
mod model;
mod modes;
mod plan;
mod ralph;
mod review;
mod schedule;
mod scope;
mod session_command;
mod skill;
mod team;
mod tools;
mod ultrawork;
mod undo;
mod usage;

pub use args::Args;
pub use skill::extract_draft as skill_draft;

/// Risk tier of one call of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Risk {
    /// Reads only.
    Read,
    /// A small, easily undone change (export a file, run a model turn whose tools ask).
    LowWrite,
    /// Changes how the session or daemon behaves (mode, MCP servers, undo).
    MediumWrite,
    /// Deletes or clears something that cannot be undone.
    HighRisk,
}

impl Risk {
    /// The spelling of the tier.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Read => "read",
            Risk::LowWrite => "low_write",
            Risk::MediumWrite => "medium_write",
            Risk::HighRisk => "high_risk",
        }
    }

    /// True for the tiers that need a confirmation on the headless plane.
    pub fn needs_confirm(self) -> bool {
        self >= Risk::MediumWrite
    }
}

/// Stable failure codes of the command plane (`snowpea cmd`, `session_command_run`), carried
/// beside the protocol code as `error.commandCode`.
pub mod codes {
    /// Bad arguments (`invalid_params`).
    pub const INVALID_ARGS: &str = "INVALID_ARGS";
    /// No such command, or what it names does not exist (`not_found`).
    pub const NOT_FOUND: &str = "NOT_FOUND";
    /// The command needs a session and none was given.
    pub const SESSION_REQUIRED: &str = "SESSION_REQUIRED";
    /// A medium/high-risk write without `--yes` / `confirm: true`.
    pub const CONFIRM_REQUIRED: &str = "CONFIRM_REQUIRED";
    /// The capability is not configured or not in this build (`not_implemented`).
    pub const NOT_CONFIGURED: &str = "NOT_CONFIGURED";
    /// The command ran and failed.
    pub const EXECUTION_FAILED: &str = "EXECUTION_FAILED";
    /// The command needs an interactive turn (a model turn) and cannot run headless.
    pub const HEADLESS_UNSUPPORTED: &str = "HEADLESS_UNSUPPORTED";
}

/// Why a command failed: the protocol code of its `error` event, the stable code, and a
/// message.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// Protocol error code (`not_found`, `invalid_params`, `not_implemented`, …).
    pub code: &'static str,
    /// Stable code of [`codes`].
    pub stable: &'static str,
    /// Human-readable detail.
    pub message: String,
}

impl Failure {
    /// Bad arguments.
    pub fn args(message: impl Into<String>) -> Self {
        Failure {
            code: "invalid_params",
            stable: codes::INVALID_ARGS,
            message: message.into(),
        }
    }
    /// Something named does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Failure {
            code: "not_found",
            stable: codes::NOT_FOUND,
            message: message.into(),
        }
    }
    /// The capability is not in this build.
    pub fn not_implemented(message: impl Into<String>) -> Self {
        Failure {
            code: "not_implemented",
            stable: codes::NOT_CONFIGURED,
            message: message.into(),
        }
    }
    /// The command ran and failed.
    pub fn failed(code: &'static str, message: impl Into<String>) -> Self {
        Failure {
            code,
            stable: codes::EXECUTION_FAILED,
            message: message.into(),
        }
    }
    /// From a component error.
    pub fn from_error(e: snowpea_session_error::Error) -> Self {
        let rpc = e.into_rpc();
        let code: &'static str = rpc.code.wire();
        let stable = match code {
            "invalid_params" => codes::INVALID_ARGS,
            "not_found" => codes::NOT_FOUND,
            _ => codes::EXECUTION_FAILED,
        };
        Failure {
            code,
            stable,
            message: rpc.message,
        }
    }
}

/// What a finished command hands back to its turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Done: `text` for people (a `message.done{role:"system"}`), `data` for scripts.
    Done {
        /// Human-readable result.
        text: String,
        /// Structured result (`snowpea cmd --json` `data`).
        data: Value,
    },
    /// Continue the turn as a normal model turn with this prompt.
    Prompt(PromptTurn),
    /// Continue the turn with several model steps ([`workflow`]: `/ralph`, `/ultrawork`,
    /// `/deepinit`).
    Workflow(workflow::WorkflowRun),
}

impl Reply {
    /// A [`Reply::Done`].
    pub fn done(text: impl Into<String>, data: Value) -> Self {
        Reply::Done {
            text: text.into(),
            data,
        }
    }
}

/// A model turn a command continues with.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromptTurn {
    /// What the model is given for the command: `message.user.expansion.text` (the event's
    /// `text` stays the command as typed; issue 32 item 4).
    pub text: String,
    /// The body is a skill's (`message.user.expansion.kind` `skill`); else `command`.
    pub skill: bool,
    /// When set, only these tools may be called (frontmatter `allowed-tools`; entries
    /// `Name` or `Name(…)`, matched on the name, case-insensitively, `*` suffix allowed).
    pub allowed_tools: Option<Vec<String>>,
    /// What runs after the model answered (e.g. saving a drafted SKILL.md).
    pub after: Option<AfterTurn>,
}

/// Work done when a command's model turn completed.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterTurn {
    /// Save the answer as the SKILL.md of `name` at `path` (`skill.create` draft).
    SaveSkill {
        /// Skill name.
        name: String,
        /// Target SKILL.md.
        path: PathBuf,
    },
}

/// The outcome of a built-in.
pub type Outcome = std::result::Result<Reply, Failure>;

/// A boxed future of a built-in's run.
pub type Run<'a> = Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// One call of a command.
#[derive(Debug, Clone)]
pub struct Call {
    /// The session it runs in.
    pub session: Arc<Session>,
    /// Its parsed arguments.
    pub args: Args,
    /// The turn it runs as (empty for a `session_command_run` tool call).
    pub turn_id: String,
    /// True on the headless plane (confirmation rule, no model turns).
    pub headless: bool,
}

/// A built-in command (one file each).
pub trait Builtin: Send + Sync {
    /// Name without the slash.
    fn name(&self) -> &'static str;
    /// One-line summary.
    fn summary(&self) -> &'static str;
    /// Usage line, e.g. `/plan [status]`.
    fn usage(&self) -> &'static str;
    /// The subcommands it takes (`status`, `on`, …), if any.
    fn subcommands(&self) -> &'static [&'static str] {
        &[]
    }
    /// Its highest tier.
    fn risk(&self) -> Risk;
    /// The tier of this call. Default: the status forms (`status`, `list`, `current`, and
    /// the bare command when [`Builtin::bare_is_read`]) are `read`, everything else
    /// [`Builtin::risk`].
    fn tier(&self, args: &Args) -> Risk {
        match args.sub() {
            None if self.bare_is_read() => Risk::Read,
            Some("status" | "list" | "current") => Risk::Read,
            _ => self.risk(),
        }
    }
    /// True when the bare command only reports (default true).
    fn bare_is_read(&self) -> bool {
        true
    }
    /// Checks the arguments before the confirmation rule, so a call that could never run
    /// fails `INVALID_ARGS` instead of asking for `--yes` first (issue 32 item 10).
    /// Default: nothing to check before the run.
    fn check(&self, _args: &Args) -> std::result::Result<(), Failure> {
        Ok(())
    }
    /// `Some(why)` while the capability is not in this build (listed, answers
    /// `not_implemented`).
    fn unavailable(&self) -> Option<&'static str> {
        None
    }
    /// Runs it.
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a>;
}

/// A command as the registry lists it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Name.
    pub name: String,
    /// Summary.
    pub summary: String,
    /// `builtin`, `global`, `project`, `skill` or `plugin:<name>`.
    pub source: String,
    /// JSON Schema of its arguments (with `x-risk`, `x-readForms`, `x-usage`).
    pub args_schema: Value,
    /// Highest tier.
    pub risk: Risk,
    /// What runs.
    pub target: Target,
}

/// What a listed command runs.
#[derive(Debug, Clone)]
pub enum Target {
    /// A built-in (index into the registry).
    Builtin(usize),
    /// A markdown command or skill.
    Markdown(Box<snowpea_session_skills::Entry>),
}

/// The components the session-changing built-ins act through (`/model`, `/effort`:
/// [`Models`]; `/compact`: [`Compaction`]; `/busy`: [`Settings`]; `/allow`, `/allowlist`:
/// [`Allowlist`]; `/memory forget`: svc-memory's client) — the same calls as
/// `session.setModel`, `session.setEffort`, `session.compact`, `settings.set`,
/// `permission.allowlist.*` and `memory.delete`.
#[derive(Debug, Clone)]
pub struct Peers {
    /// `session.setModel` / `session.setEffort`.
    pub models: Arc<Models>,
    /// `session.compact`.
    pub compaction: Arc<Compaction>,
    /// `settings.set`.
    pub settings: Arc<Settings>,
    /// `permission.allowlist.*`.
    pub allowlist: Arc<Allowlist>,
    /// `memory.delete` (svc-memory over its socket).
    pub memory: crate::clients::memory::MemoryClient,
}

/// The command registry (see the module doc).
pub struct Commands {
    pub(crate) log: EventLog,
    pub(crate) sessions: Arc<Sessions>,
    pub(crate) tools: Arc<Tools>,
    pub(crate) checkpoints: Arc<Checkpoints>,
    pub(crate) skills: Arc<Skills>,
    pub(crate) peers: Peers,
    /// `/team`: set once the teams component exists (it is built after the turns, which
    /// need this registry).
    pub(crate) teams: std::sync::OnceLock<Arc<crate::teams::Teams>>,
    /// `/agent`, `/delegate` (issue 19), attached once both exist.
    agents: std::sync::OnceLock<std::sync::Weak<crate::agents::Agents>>,
}

impl std::fmt::Debug for Commands {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Commands").finish_non_exhaustive()
    }
}

/// Every built-in, in `/help` order.
fn builtins() -> Vec<Box<dyn Builtin>> {
    vec![
        Box::new(help::Help),
        Box::new(plan::Plan),
        Box::new(accept::Accept),
        Box::new(auto::Auto),
        Box::new(mode::ModeCmd),
        Box::new(tools::ToolsCmd),
        Box::new(model::Model),
        Box::new(effort::Effort),
        Box::new(compact::Compact),
        Box::new(busy::Busy),
        Box::new(mcp::Mcp),
        Box::new(schedule::Schedule),
        Box::new(allow::Allow),
        Box::new(allowlist::Allowlist),
        Box::new(memory::Memory),
        Box::new(usage::Usage),
        Box::new(export::Export),
        Box::new(undo::Undo),
        Box::new(skill::SkillCmd),
        Box::new(agent::Agent),
        Box::new(delegate::Delegate),
        Box::new(team::Team),
        Box::new(review::Review),
        Box::new(ralph::Ralph),
        Box::new(ultrawork::Ultrawork),
        Box::new(deepinit::Deepinit),
        Box::new(session_command::SessionCommand),
    ]
}

/// The `argsSchema` of a built-in.
fn builtin_schema(b: &dyn Builtin) -> Value {
    let mut props = serde_json::Map::new();
    if !b.subcommands().is_empty() {
        props.insert(
            "subcommand".into(),
            json!({"type": "string", "enum": b.subcommands()}),
        );
    }
    props.insert(
        "args".into(),
        json!({"type": "array", "items": {"type": "string"}, "description": b.usage()}),
    );
    if b.risk().needs_confirm() {
        props.insert(
            "confirm".into(),
            json!({"type": "boolean", "description": "Confirms a medium_write/high_risk write (--yes / --confirm in the raw args); required on the headless plane."}),
        );
    }
    // The tier of the bare command and of each subcommand, as the daemon decides it.
    let mut tiers = serde_json::Map::new();
    let mut read_forms: Vec<&str> = Vec::new();
    for form in std::iter::once("").chain(b.subcommands().iter().copied()) {
        let tier = Args::parse(form).map(|a| b.tier(&a)).unwrap_or(b.risk());
        if tier == Risk::Read {
            read_forms.push(form);
        }
        tiers.insert(form.to_owned(), json!(tier.as_str()));
    }
    let mut schema = json!({
        "type": "object",
        "properties": props,
        "x-usage": b.usage(),
        "x-risk": b.risk().as_str(),
        "x-tiers": tiers,
        "x-readForms": read_forms,
        "x-needsConfirm": b.risk().needs_confirm(),
    });
    if let Some(why) = b.unavailable() {
        schema["x-available"] = json!(false);
        schema["x-unavailable"] = json!(why);
    }
    schema
}

/// Splits a prompt starting with `/` into the command name and its raw args (everything
/// after the first space); `None` for any other text (or a bare `/`).
pub fn parse_slash(text: &str) -> Option<(String, String)> {
    crate::turn::slash::parse(text).map(|c| (c.name, c.args))
}

impl Commands {
    /// The registry over its peers.
    pub fn new(
        log: EventLog,
        sessions: Arc<Sessions>,
        tools: Arc<Tools>,
        checkpoints: Arc<Checkpoints>,
        skills: Arc<Skills>,
        peers: Peers,
    ) -> Self {
        Commands {
            log,
            sessions,
            tools,
            checkpoints,
            skills,
            peers,
            teams: std::sync::OnceLock::new(),
            agents: std::sync::OnceLock::new(),
        }
    }

    /// Hands `/team` the teams component (once, at composition in `app.rs`).
    pub fn set_teams(&self, teams: Arc<crate::teams::Teams>) {
        let _ = self.teams.set(teams);
    }
    /// Gives `/agent` and `/delegate` the agents component.
    pub fn attach_agents(&self, agents: &Arc<crate::agents::Agents>) {
        let _ = self.agents.set(Arc::downgrade(agents));
    }

    /// The agents component, once attached (`not_implemented` before, which never happens
    /// in a running service).
    pub(crate) fn agents(&self) -> Result<Arc<crate::agents::Agents>, Failure> {
        self.agents
            .get()
            .and_then(std::sync::Weak::upgrade)
            .ok_or_else(|| Failure::not_implemented("the agents component is not running"))
    }

    /// Every command visible from `workdir` (global set when `None`): built-ins, then the
    /// markdown commands and skills of the roots; a later one wins a name clash. Sorted by
    /// name.
    pub fn table(&self, workdir: Option<&std::path::Path>) -> Vec<Listed> {
        table_of(&self.skills, workdir)
    }

    /// The protocol form of a table.
    pub fn to_pb(table: &[Listed]) -> Vec<pb::Command> {
        table
            .iter()
            .map(|c| pb::Command {
                name: c.name.clone(),
                summary: c.summary.clone(),
                source: c.source.clone(),
                args_schema: Some(snowpea_proto::wkt::to_struct(&c.args_schema)),
            })
            .collect()
    }

    /// `command.list`: the table of the session's workdir, or the global one.
    pub async fn list(&self, p: pb::CommandListParams) -> Result<pb::CommandListResult> {
        let workdir = match p.session_id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => Some(self.sessions.get(id)?.workdir()),
            None => None,
        };
        let skills = self.skills.clone();
        let table =
            snowpea_session_skills::blocking(move || Ok(table_of(&skills, workdir.as_deref())))
                .await?;
        Ok(pb::CommandListResult {
            commands: Self::to_pb(&table),
        })
    }

    /// Broadcasts `commands.changed{commands, reason}` (the global table) on every reload
    /// of the skill roots, and sends the caller of each `session.create` / `session.resume`
    /// the table of that session's workdir (its project roots are re-read: `reason`
    /// `session.create` / `session.resume`), for as long as the process runs.
    pub fn watch(self: &Arc<Self>) {
        let mut rx = self.skills.subscribe();
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let reason = match rx.recv().await {
                    Ok(r) => r,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => "reload".into(),
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                };
                let Some(cmds) = this.upgrade() else { break };
                let table = cmds.table(None);
                cmds.log.publish(&pb::CommandsChangedNotification {
                    commands: Self::to_pb(&table),
                    reason,
                });
            }
        });
        let mut opened = self.sessions.subscribe_opened();
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let o = match opened.recv().await {
                    Ok(o) => o,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "commands.changed for opened sessions skipped");
                        continue;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                };
                let Some(cmds) = this.upgrade() else { break };
                cmds.send_table(o).await;
            }
        });
    }

    /// Sends the table of `o.workdir` to the connection that opened the session.
    async fn send_table(&self, o: crate::session::Opened) {
        let Some(conn) = o.connection_id else { return };
        let skills = self.skills.clone();
        let workdir = o.workdir;
        let table =
            match snowpea_session_skills::blocking(move || Ok(table_of(&skills, Some(&workdir))))
                .await
            {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(error = %e, "command table not read");
                    return;
                }
            };
        self.sessions.hub().publish(
            &pb::CommandsChangedNotification {
                commands: Self::to_pb(&table),
                reason: o.reason.to_owned(),
            },
            vec![conn],
        );
    }

    /// Finds `name` (a leading `/` stripped) in the table of `session`'s workdir (the
    /// project roots are read on the blocking pool).
    pub async fn find(&self, session: &Session, name: &str) -> Option<Listed> {
        let name = name.trim_start_matches('/').to_owned();
        let skills = self.skills.clone();
        let workdir = session.workdir();
        snowpea_session_skills::blocking(move || {
            Ok(table_of(&skills, Some(&workdir))
                .into_iter()
                .find(|c| c.name == name))
        })
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "command table not read");
            None
        })
    }

    /// The tier of one call of `cmd`.
    pub fn tier_of(&self, cmd: &Listed, args: &Args) -> Risk {
        match &cmd.target {
            Target::Builtin(i) => static_builtins()[*i].tier(args),
            Target::Markdown(_) => cmd.risk,
        }
    }

    /// Runs `name` with the raw `args` in `session` (a command turn, or a
    /// `session_command_run` tool call when `turn_id` is empty): looks it up, parses the
    /// args, applies the confirmation rule, and runs it.
    pub async fn execute(
        &self,
        session: &Arc<Session>,
        name: &str,
        raw_args: &str,
        turn_id: &str,
        headless: bool,
    ) -> Outcome {
        let Some(cmd) = self.find(session, name).await else {
            return Err(Failure::not_found(format!(
                "unknown command /{name}; /help lists the commands"
            )));
        };
        let mut args = Args::parse(raw_args).map_err(Failure::args)?;
        if let Target::Builtin(i) = &cmd.target {
            args.normalize_sub(static_builtins()[*i].subcommands());
            static_builtins()[*i].check(&args)?;
        }
        let tier = self.tier_of(&cmd, &args);
        if headless && tier.needs_confirm() && !args.confirmed {
            return Err(Failure {
                code: "invalid_params",
                stable: codes::CONFIRM_REQUIRED,
                message: format!(
                    "/{} is a {} write: pass --yes (confirm: true) to run it",
                    format!("{} {}", cmd.name, args.raw.trim()).trim_end(),
                    tier.as_str()
                ),
            });
        }
        let call = Call {
            session: session.clone(),
            args,
            turn_id: turn_id.to_owned(),
            headless,
        };
        match &cmd.target {
            Target::Builtin(i) => {
                let b = &static_builtins()[*i];
                if let Some(why) = b.unavailable() {
                    return Err(Failure::not_implemented(format!("/{}: {why}", b.name())));
                }
                b.run(self, &call).await
            }
            Target::Markdown(entry) => {
                if headless {
                    return Err(Failure {
                        code: "invalid_params",
                        stable: codes::HEADLESS_UNSUPPORTED,
                        message: format!(
                            "/{} runs a model turn; use `snowpea run` or an interactive client",
                            cmd.name
                        ),
                    });
                }
                Ok(markdown::run(entry, &call.args))
            }
        }
    }

    /// Runs a built-in tool of the session by name with `args` (what `/schedule` and
    /// `/memory` use, so they act through the same code as the model's tools).
    pub(crate) async fn run_tool(
        &self,
        session: &Session,
        name: &str,
        args: Value,
    ) -> std::result::Result<crate::tools::ToolOutput, Failure> {
        let Some(tool) = self
            .tools
            .builtin()
            .iter()
            .find(|t| t.name() == name)
            .cloned()
        else {
            return Err(Failure::not_implemented(format!(
                "the {name} tool is not available"
            )));
        };
        let workdir = session.tool_workdir();
        tool.plan(&args, &workdir).map_err(Failure::args)?;
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let ctx = crate::tools::ToolContext {
            workdir,
            progress: tx,
            cancel: tokio_util::sync::CancellationToken::new(),
            output_cap: 64 * 1024,
            session_id: session.id.clone(),
            mode: session.mode().as_str().to_owned(),
            // A command's tool run is no model call: no turn or call id to report.
            turn_id: String::new(),
            call_id: String::new(),
            named_agent: crate::agents::named::named_agent_of(&session.row()),
            turn: None,
            backend: session.backend(),
        };
        let out = tool.run(args, ctx).await;
        if out.ok {
            Ok(out)
        } else {
            Err(Failure::failed("unavailable", out.content))
        }
    }
}

/// Every built-in, built once.
fn static_builtins() -> &'static [Box<dyn Builtin>] {
    static B: std::sync::OnceLock<Vec<Box<dyn Builtin>>> = std::sync::OnceLock::new();
    B.get_or_init(builtins)
}

/// The command table visible from `workdir` over the skill roots of `skills` (see
/// [`Commands::table`]).
pub fn table_of(skills: &Skills, workdir: Option<&std::path::Path>) -> Vec<Listed> {
    let mut by: std::collections::BTreeMap<String, Listed> = std::collections::BTreeMap::new();
    for (i, b) in static_builtins().iter().enumerate() {
        let summary = match b.unavailable() {
            Some(why) => format!("{} (unavailable: {why})", b.summary()),
            None => b.summary().to_owned(),
        };
        by.insert(
            b.name().to_owned(),
            Listed {
                name: b.name().to_owned(),
                summary,
                source: "builtin".into(),
                args_schema: builtin_schema(b.as_ref()),
                risk: b.risk(),
                target: Target::Builtin(i),
            },
        );
    }
    for e in skills.catalog(workdir) {
        if !matches!(e.kind, Kind::Command | Kind::Skill) || !e.front.user_invocable {
            continue;
        }
        if e.error.is_some() && e.kind == Kind::Skill {
            // A broken skill stays visible in skill.list with its error.
            continue;
        }
        by.insert(e.name.clone(), markdown::listed(e));
    }
    by.into_values().collect()
}

#[cfg(test)]
#[path = "commands_tests.rs"]
mod tests;
