//! svc-memory: ranked memories (`memory.*`) and browser site memory (`site.*`), served as
//! `snowpea.memory.v1` on a unix socket (DESIGN.md §6, issue 4). It owns
//! `$SNOWPEA_HOME/state/memory.db` and nothing else writes it.
//!
//! Layout: [`memory`] (`memory.*` logic, `MemoryApi`) · [`namespace`] (default, project,
//! agent, browser; `memory.list` scopes) · [`store`] (SQLite, FTS5 trigram index, bm25) · [`ingest`] (browsing memories) ·
//! [`site`] (site memory: validation, urlPattern, counters, authorization) · [`sessions`]
//! (resolving a `sessionId` through svc-session) · [`rpc`] (the generated traits over
//! `MemoryApi` and `site::api::SiteApi`) ·
//! [`config`] (the recall settings, re-read when they change) ·
//! [`error`] (the one mapping to protocol errors).

use std::sync::{Arc, Mutex};

use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;

pub mod config;
pub mod error;
pub mod ingest;
pub mod memory;
pub mod namespace;
pub mod rpc;
pub mod sessions;
pub mod site;
pub mod store;

/// Capabilities this service really implements (`system.hello`): site memory, and its
/// recipes with `site.markPart` (1.15.0), and actions inside frames (`frames`).
pub const CAPABILITIES: &[&str] = &["siteMemory", "siteRecipes", "siteFrameActions"];

/// The service state shared by its gRPC services.
#[derive(Debug)]
pub struct App {
    /// The database.
    pub store: store::Store,
    /// Resolves a `memory.list{sessionId}` to its project root and agent.
    pub sessions: sessions::SessionLookup,
    home: Home,
    recall: Mutex<config::RecallConfig>,
}

impl App {
    /// Opens `$SNOWPEA_HOME/state/memory.db` (migrating it) and the lazy channel to
    /// svc-session.
    pub fn open(home: &Home) -> anyhow::Result<Arc<App>> {
        let store = store::Store::open(&home.database("memory"))?;
        Ok(Arc::new(App {
            store,
            sessions: sessions::SessionLookup::new(home.socket("session")),
            recall: Mutex::new(config::RecallConfig::load(home)),
            home: home.clone(),
        }))
    }

    /// The recall settings in force.
    pub fn recall(&self) -> config::RecallConfig {
        *self.recall.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Re-reads the recall settings whenever the settings owner announces a change of
    /// `memory` (`ServiceBus.SettingsChanged` on `hub`), without a restart.
    pub fn follow_settings(self: &Arc<Self>, hub: &BusHub) -> tokio::task::JoinHandle<()> {
        use tokio::sync::broadcast::error::RecvError;
        let mut changes = hub.settings_changes();
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                match changes.recv().await {
                    Ok(c) if !c.keys.iter().any(|k| k == "memory") => continue,
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                }
                let c = config::RecallConfig::load(&me.home);
                *me.recall.lock().unwrap_or_else(|e| e.into_inner()) = c;
                tracing::info!(search_limit = c.search_limit, "memory settings applied");
            }
        })
    }
}
