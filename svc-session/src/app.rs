//! The composition root of svc-session: [`App`] is only its components, built here in
//! dependency order (docs/ARCHITECTURE.md "svc-session components"). Each component
//! owns its state and its tables, in the folder named after its JSON-RPC family; the rpc
//! files call the component. This is the only `impl App` of the crate.

use std::sync::Arc;
use std::time::Duration;

use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;

use crate::agents::Agents;
use crate::approval::Approvals;
use crate::backend::Backends;
use crate::checkpoints::Checkpoints;
use crate::commands::Commands;
use crate::compaction::Compaction;
use crate::events::EventLog;
use crate::file::Files;
use crate::host_tools::{HostTools, Hosts};
use crate::llm::Sampler;
use crate::models::Models;
use crate::permission::Allowlist;
use crate::question::Questions;
use crate::runs::Runs;
use crate::session::turn_guards::TurnGuards;
use crate::session::{Registry, Sessions};
use crate::settings::Settings;
use crate::setup::Setup;
use crate::store::{self, Store};
use crate::teams::{SubagentTaskRunner, Teams};
use crate::tools::Tools;
use crate::turn::{TurnLimits, Turns};
use crate::usage::Usage;
use crate::web::WebSearch;
use snowpea_session_llm::provider::Providers;
use snowpea_session_skills::Skills;

/// Environment lookup (injected so tests never change the process environment).
pub use snowpea_session_llm::EnvFn;

/// Knobs of the service.
#[derive(Clone)]
pub struct AppConfig {
    /// The Snowpea home (database, settings, session workspaces).
    pub home: Home,
    /// Environment lookup for provider selection (`SNOWPEA_PROVIDER`, API keys).
    pub env: EnvFn,
    /// Most model calls with tool use in one turn before it ends with `budget`, unless the
    /// settings say `agent.max_tool_rounds` (reference default 200).
    pub max_tool_rounds: usize,
    /// Cap on a tool's output fed back to the model, in bytes.
    pub output_cap: usize,
    /// Longest wait for the next streamed item of a model call before the turn fails.
    pub provider_idle_timeout: Duration,
    /// Language-server timings (idle stop, `initialize`, diagnostics wait).
    pub lsp_times: crate::lsp::LspTimes,
}

impl std::fmt::Debug for AppConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppConfig")
            .field("home", &self.home)
            .field("max_tool_rounds", &self.max_tool_rounds)
            .field("output_cap", &self.output_cap)
            .finish()
    }
}

impl AppConfig {
    /// Defaults for `home`, reading the real process environment.
    pub fn new(home: Home) -> Self {
        AppConfig {
            home,
            env: Arc::new(|k| std::env::var(k).ok()),
            max_tool_rounds: 200,
            output_cap: 64 * 1024,
            provider_idle_timeout: Duration::from_secs(300),
            lsp_times: crate::lsp::LspTimes::default(),
        }
    }
}

/// The service: its components, composed.
pub struct App {
    /// The event writer and reader (`events`, `turns` tables).
    pub events: EventLog,
    /// `session.*` (the `sessions` table and the live registry).
    pub sessions: Arc<Sessions>,
    /// `session.prompt` / `session.interrupt` and the agent loop.
    pub turns: Arc<Turns>,
    /// Summarising a history (`session.compact`, auto-compaction).
    pub compaction: Arc<Compaction>,
    /// `session.setModel` / `session.setEffort` and the model of every call.
    pub models: Arc<Models>,
    /// `approval.*` (the `approvals` table and the pending requests).
    pub approvals: Arc<Approvals>,
    /// `question.*` (the `questions` table and the pending batches of `ask_user`).
    pub questions: Arc<Questions>,
    /// `permission.allowlist.*` (the `allowlist` table and the settings files' entries).
    pub allowlist: Arc<Allowlist>,
    /// `tool.list` and the tools turns call.
    pub tools: Arc<Tools>,
    /// `tool.register/unregister/progress`, `tool.invoke` (issue 21).
    pub host_tools: Arc<HostTools>,
    /// `checkpoint.*` (the `checkpoints`/`checkpoint_files` tables and the blob store).
    pub checkpoints: Arc<Checkpoints>,
    /// `provider.*` (`credentials.json`, settings `providers`) and the provider of a turn.
    pub providers: Providers,
    /// `skill.*` (skills and plugins of the search roots).
    pub skills: Arc<Skills>,
    /// `command.list` and the slash-command registry (`command.run` starts a turn).
    pub commands: Arc<Commands>,
    /// The installed plugins' hooks (run by turns; no JSON-RPC methods).
    pub hooks: Arc<crate::hooks::Hooks>,
    /// Unattended runs for svc-scheduler (`SessionInternalService`).
    pub runs: Runs,
    /// `settings.*` and `system.reloadSettings`: the owner of the settings files.
    pub settings: Arc<Settings>,
    /// `setup.*`: the setup wizard.
    pub setup: Setup,
    /// `usage.summary` (reads the `usage_calls`/`usage_daily` index).
    pub usage: Usage,
    /// `file.complete` (its per-workdir listing cache).
    pub files: Files,
    /// `llm.sample` (one tool-less call on a session's provider).
    pub sampler: Sampler,
    /// `web.search` (the search provider chain).
    pub web: WebSearch,
    /// `team.*` (the `teams`/`team_tasks` tables, the team guides, the workers' worktrees).
    pub teams: Arc<Teams>,
    /// `agent.*`, `session.setAgent`, subagents and named agents (issue 19).
    pub agents: Arc<Agents>,
    /// `backend.set`: where each session's tools run.
    pub backends: Backends,
    /// `lsp.catalog`, `lsp.status`: the language servers.
    pub lsp: Arc<crate::lsp::Lsp>,
    hub: Arc<BusHub>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").finish_non_exhaustive()
    }
}

impl App {
    /// Opens the database under `config.home`, loads the saved sessions, repairs what a
    /// crash left open (committed before this returns) and starts watching connections
    /// to re-bind session origins.
    pub async fn open(config: AppConfig, hub: Arc<BusHub>) -> anyhow::Result<Arc<App>> {
        let home = config.home.clone();
        let path = home.database("session");
        let store = Store::open(&path)?;
        let events = EventLog::start(&path, hub.clone(), store.clone())?;
        let saved = store
            .read("session.open", |c| store::sessions::list(c, false))
            .await?;
        let registry = Registry::new(store.clone(), saved);
        let settings = Arc::new(Settings::new(home.clone(), hub.clone()));
        let setup = Setup::new(home.clone(), settings.clone(), config.env.clone());
        // Commands a killed svc-session of this home left running die before anything starts.
        let mark = snowpea_common::orphans::mark("session", home.root());
        snowpea_common::orphans::reap(&mark);
        let checkpoints = Arc::new(Checkpoints::new(
            home.clone(),
            events.clone(),
            store.clone(),
            registry.clone(),
        ));
        let questions = Arc::new(Questions::new(
            home.clone(),
            events.clone(),
            hub.clone(),
            store.clone(),
            registry.clone(),
        ));
        let web = WebSearch::new(home.clone(), config.env.clone());
        let lsp = crate::lsp::Lsp::new(home.clone(), Some(mark.clone()), config.lsp_times);
        let hosts = Arc::new(Hosts::default());
        let tools = Arc::new(
            Tools::open(
                &home,
                &mark,
                registry.clone(),
                checkpoints.clone(),
                questions.clone(),
                lsp.clone(),
                web.clone(),
            )
            .with_hosts(hosts.clone(), hub.clone()),
        );
        let allowlist = Arc::new(Allowlist::new(
            home.clone(),
            events.clone(),
            store.clone(),
            registry.clone(),
        ));
        let guards = Arc::new(TurnGuards::new(registry.clone()));
        let approvals = Arc::new(Approvals::new(
            home.clone(),
            events.clone(),
            hub.clone(),
            registry.clone(),
            allowlist.clone(),
            guards.clone(),
        ));
        let backends = Backends::new(
            registry.clone(),
            events.clone(),
            mark.clone(),
            (config.env)("DOCKER_HOST").filter(|h| !h.is_empty()),
        );
        // Containers of a docker backend a stopped svc-session of this home left (issue 23).
        tokio::spawn(crate::backend::docker::remove_leftovers(mark.clone()));
        let host_tools = HostTools::new(
            &home,
            hub.clone(),
            registry.clone(),
            hosts.clone(),
            tools.clone(),
            approvals.clone(),
            questions.clone(),
        );
        let providers = Providers::new(home.clone(), config.env.clone(), hub.clone());
        let sessions = Arc::new(
            Sessions::new(
                home.clone(),
                store.clone(),
                events.clone(),
                hub.clone(),
                registry.clone(),
                questions.clone(),
                checkpoints.clone(),
                providers.clone(),
            )
            .with_hosts(hosts),
        );
        // `~/.claude` is searched too (skills, agents, commands, Claude Code's plugins).
        let claude_home = (config.env)("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| std::path::PathBuf::from(h).join(".claude"));
        let skills = Arc::new(Skills::open(
            home.clone(),
            claude_home,
            Arc::new(registry.clone()),
        ));
        let models = Arc::new(Models::new(
            home.clone(),
            events.clone(),
            sessions.clone(),
            providers.clone(),
        ));
        let compaction = Arc::new(Compaction::new(
            events.clone(),
            sessions.clone(),
            models.clone(),
        ));
        let commands = Arc::new(Commands::new(
            events.clone(),
            sessions.clone(),
            tools.clone(),
            checkpoints.clone(),
            skills.clone(),
            crate::commands::Peers {
                models: models.clone(),
                compaction: compaction.clone(),
                settings: settings.clone(),
                allowlist: allowlist.clone(),
                memory: crate::clients::memory::MemoryClient::new(home.socket("memory")),
            },
        ));
        commands.watch();
        let limits = TurnLimits {
            max_tool_rounds: config.max_tool_rounds,
            output_cap: config.output_cap,
            provider_idle_timeout: config.provider_idle_timeout,
        };
        let hooks = Arc::new(crate::hooks::Hooks::open(
            skills.plugins_dir(),
            Some(mark.clone()),
        ));
        hooks.watch(&skills, &sessions);
        let turns = Arc::new(
            Turns::new(
                home.clone(),
                limits,
                events.clone(),
                sessions.clone(),
                approvals.clone(),
                tools.clone(),
                providers.clone(),
                commands.clone(),
                models.clone(),
                compaction.clone(),
                crate::attachments::Attachments::new(home.clone()),
                hooks.clone(),
            )
            .with_host_tools(host_tools.clone()),
        );
        let sampler = Sampler::new(
            home.clone(),
            registry.clone(),
            events.clone(),
            providers.clone(),
        );
        let agents = Agents::new(
            home.clone(),
            store.clone(),
            events.clone(),
            sessions.clone(),
            turns.clone(),
            skills.clone(),
            models.clone(),
            providers.clone(),
            guards,
        );
        commands.attach_agents(&agents);
        let runs = Runs::new(
            sessions.clone(),
            turns.clone(),
            events.clone(),
            agents.clone(),
        );
        let teams = Arc::new(Teams::new(
            home.clone(),
            store.clone(),
            events.clone(),
            sessions.clone(),
            providers.clone(),
            skills.clone(),
            Arc::new(SubagentTaskRunner::new(agents.clone())),
        ));
        commands.set_teams(teams.clone());
        crate::recovery::recover(&store, &events, &registry).await?;
        // After the sessions are repaired: delegations a crash cut short end `error`, named
        // agents keep their sessions (before any chat binding is routed).
        agents.restore().await?;
        questions.restore().await?;
        if let Some(mut late) = questions.take_late_answers() {
            // Answers to a batch a restart orphaned start a turn of its session.
            let turns = turns.clone();
            tokio::spawn(async move {
                while let Some(a) = late.recv().await {
                    let p = snowpea_proto::session::v1::SessionPromptParams {
                        session_id: a.session_id.clone(),
                        text: a.text,
                        when_busy: Some("queue".into()),
                        ..Default::default()
                    };
                    let ctx = snowpea_common::context::CallContext::default();
                    if let Err(e) = turns.prompt(&ctx, p).await {
                        tracing::warn!(session_id = %a.session_id, error = %e, "could not hand late answers to the session");
                    }
                }
            });
        }
        crate::session::origin::spawn_watcher(&sessions);
        {
            // A team a killed svc-session left running: its worktrees and branches go.
            let dead = teams.dead().await?;
            let teams = teams.clone();
            tokio::spawn(async move {
                if let Err(e) = teams.recover(dead).await {
                    tracing::warn!(error = %e, "could not clean up the teams a previous run left");
                }
            });
        }
        Ok(Arc::new(App {
            events,
            sessions,
            turns,
            compaction,
            models,
            approvals,
            questions,
            allowlist,
            tools,
            host_tools,
            checkpoints,
            providers,
            skills,
            commands,
            hooks,
            runs,
            settings,
            setup,
            usage: Usage::new(store.clone()),
            files: Files::new(registry.clone()),
            sampler,
            web,
            teams,
            agents,
            backends,
            lsp,
            hub,
        }))
    }

    /// The bus hub notifications and server→client requests go through.
    pub fn hub(&self) -> &Arc<BusHub> {
        &self.hub
    }

    /// On a clean stop: closes every session's backend (ssh connections, containers) and
    /// stops the language servers (issue 23). Bounded by each backend's own timeouts.
    pub async fn shutdown(&self) {
        for session in self.sessions.registry().all() {
            session
                .replace_backend(crate::backend::local())
                .close()
                .await;
        }
        self.lsp.shutdown().await;
    }

    /// Waits until every event and write queued so far is committed and published.
    pub async fn flush(&self) -> anyhow::Result<()> {
        self.events.flush().await
    }
}
