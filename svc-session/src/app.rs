//! The composition root of svc-session: [`App`] is only its components, built here in
//! dependency order (docs/ARCHITECTURE.md "svc-session components"). Each component
//! owns its state and its tables, in the folder named after its JSON-RPC family; the rpc
//! files call the component. This is the only `impl App` of the crate.

use std::sync::Arc;
use std::time::Duration;

use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;

use crate::approval::Approvals;
use crate::checkpoints::Checkpoints;
use crate::compaction::Compaction;
use crate::events::EventLog;
use crate::models::Models;
use crate::provider::Providers;
use crate::runs::Runs;
use crate::session::{Registry, Sessions};
use crate::store::{self, Store};
use crate::tools::Tools;
use crate::turn::{TurnLimits, Turns};

/// Environment lookup (injected so tests never change the process environment).
pub type EnvFn = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Knobs of the service.
#[derive(Clone)]
pub struct AppConfig {
    /// The Snowpea home (database, settings, session workspaces).
    pub home: Home,
    /// Environment lookup for provider selection (`SNOWPEA_PROVIDER`, API keys).
    pub env: EnvFn,
    /// Most model calls with tool use in one turn before it ends with `budget`.
    pub max_tool_rounds: usize,
    /// Cap on a tool's output fed back to the model, in bytes.
    pub output_cap: usize,
    /// Longest wait for the next streamed item of a model call before the turn fails.
    pub provider_idle_timeout: Duration,
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
            max_tool_rounds: 50,
            output_cap: 64 * 1024,
            provider_idle_timeout: Duration::from_secs(300),
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
    /// `tool.list` and the tools turns call.
    pub tools: Arc<Tools>,
    /// `checkpoint.*` (the `checkpoints`/`checkpoint_files` tables and the blob store).
    pub checkpoints: Arc<Checkpoints>,
    /// Unattended runs for svc-scheduler (`SessionInternalService`).
    pub runs: Runs,
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
        // Commands a killed svc-session of this home left running die before anything starts.
        let mark = snowpea_common::orphans::mark("session", home.root());
        snowpea_common::orphans::reap(&mark);
        let checkpoints = Arc::new(Checkpoints::new(
            home.clone(),
            events.clone(),
            store.clone(),
            registry.clone(),
        ));
        let tools = Arc::new(Tools::open(
            &home,
            &mark,
            registry.clone(),
            checkpoints.clone(),
        ));
        let approvals = Arc::new(Approvals::new(
            home.clone(),
            events.clone(),
            hub.clone(),
            registry.clone(),
        ));
        let sessions = Arc::new(Sessions::new(
            home.clone(),
            store.clone(),
            events.clone(),
            hub.clone(),
            registry.clone(),
            approvals.clone(),
            checkpoints.clone(),
            Providers::new(home.clone(), config.env.clone()),
        ));
        let limits = TurnLimits {
            max_tool_rounds: config.max_tool_rounds,
            output_cap: config.output_cap,
            provider_idle_timeout: config.provider_idle_timeout,
        };
        let models = Arc::new(Models::new(
            home.clone(),
            events.clone(),
            sessions.clone(),
            Providers::new(home.clone(), config.env.clone()),
        ));
        let compaction = Arc::new(Compaction::new(
            events.clone(),
            sessions.clone(),
            models.clone(),
        ));
        let turns = Arc::new(Turns::new(
            home.clone(),
            limits,
            events.clone(),
            sessions.clone(),
            approvals.clone(),
            tools.clone(),
            models.clone(),
            compaction.clone(),
            crate::attachments::Attachments::new(home.clone()),
        ));
        let runs = Runs::new(sessions.clone(), turns.clone(), events.clone());
        crate::recovery::recover(&store, &events, &registry).await?;
        crate::session::origin::spawn_watcher(&sessions);
        Ok(Arc::new(App {
            events,
            sessions,
            turns,
            compaction,
            models,
            approvals,
            tools,
            checkpoints,
            runs,
            hub,
        }))
    }

    /// The bus hub notifications and server→client requests go through.
    pub fn hub(&self) -> &Arc<BusHub> {
        &self.hub
    }

    /// Waits until every event and write queued so far is committed and published.
    pub async fn flush(&self) -> anyhow::Result<()> {
        self.events.flush().await
    }
}
