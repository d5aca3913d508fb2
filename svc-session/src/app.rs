//! The session service's core state, shared by every gRPC service of this process: the
//! database (read side), the event writer, the bus hub, the registry of live sessions,
//! the pending approvals and the built-in tools. Behaviour lives in the modules named
//! after what they do (`session`, `turn`, `approval`, `recovery`); this file only builds
//! the state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;

use crate::approval::Approvals;
use crate::events::EventLog;
use crate::session::Session;
use crate::store::{self, Store};
use crate::tools::{self, Tool};

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

/// The service state.
pub struct App {
    pub(crate) config: AppConfig,
    pub(crate) store: Store,
    pub(crate) log: EventLog,
    pub(crate) hub: Arc<BusHub>,
    pub(crate) sessions: Mutex<HashMap<String, Arc<Session>>>,
    pub(crate) approvals: Approvals,
    pub(crate) tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl App {
    /// Opens the database under `config.home`, loads the saved sessions, repairs what a
    /// crash left open (committed before this returns) and starts watching connections
    /// to re-bind session origins.
    pub async fn open(config: AppConfig, hub: Arc<BusHub>) -> anyhow::Result<Arc<App>> {
        let path = config.home.database("session");
        let store = Store::open(&path)?;
        let log = EventLog::start(&path, hub.clone())?;
        let saved = store.read(|c| store::sessions::list(c, false))?;
        let sessions = saved
            .into_iter()
            .map(|row| (row.id.clone(), Arc::new(Session::new(row))))
            .collect();
        // Commands a killed svc-session of this home left running die before anything starts.
        let mark = snowpea_common::orphans::mark("session", config.home.root());
        snowpea_common::orphans::reap(&mark);
        let mut tools = tools::builtin(&mark);
        tools.extend(crate::tools::memory::for_home(&config.home));
        tools.extend(crate::tools::schedule::for_home(&config.home));
        let app = Arc::new(App {
            config,
            store,
            log,
            hub,
            sessions: Mutex::new(sessions),
            approvals: Approvals::default(),
            tools,
        });
        app.recover().await?;
        crate::session::origin::spawn_watcher(&app);
        Ok(app)
    }

    /// The bus hub notifications and server→client requests go through.
    pub fn hub(&self) -> &Arc<BusHub> {
        &self.hub
    }

    /// Waits until every event and write queued so far is committed and published.
    pub async fn flush(&self) -> anyhow::Result<()> {
        self.log.flush().await
    }
}
