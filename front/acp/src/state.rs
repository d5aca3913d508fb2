//! What the agent holds: the daemon client (opened by `initialize`), the editor connection,
//! and one [`SessionLink`] per ACP session this process opened (`session/new` or
//! `session/load`). ACP session ids are the native `sessionId`s.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use snowpea_sdk::Client;
use tokio::sync::{broadcast, watch, OnceCell};
use tokio::task::JoinHandle;

use crate::daemon::SuiteStarter;
use crate::updates::ToolCalls;
use crate::{errors, Conn};

/// How a native turn ended, as the forwarder saw its `turn.done`.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    /// The native `turnId`.
    pub turn_id: String,
    /// `turn.done.reason` (`None` when absent).
    pub reason: Option<String>,
    /// The message of the last `error` event of the turn, if any.
    pub error: Option<String>,
    /// True when the turn's last `message.done` said `truncated` (the output limit).
    pub truncated: bool,
}

/// One ACP session bound to a native session.
pub struct SessionLink {
    /// The native (and ACP) session id.
    pub id: String,
    /// The session's working directory (the ACP `cwd`); relative tool paths are joined to it.
    pub workdir: PathBuf,
    /// Every `turn.done` of the session, as the forwarder sends them.
    pub turns: broadcast::Sender<TurnEnd>,
    /// Bumped by `session/cancel`: prompts and permission requests waiting on it give up.
    pub cancel: watch::Sender<u64>,
    /// Texts of prompts this process sent whose `message.user` has not come back yet (that
    /// echo is not re-sent to the editor, which shows its own prompt).
    pub own_prompts: Mutex<VecDeque<String>>,
    /// Open tool calls (for titles, locations and diffs).
    pub tools: Mutex<ToolCalls>,
    /// The error and truncation facts of the running turn, collected by the forwarder.
    pub turn_facts: Mutex<(Option<String>, bool)>,
    /// MCP servers added for this session from the editor's `mcpServers` (native names).
    pub mcp_servers: Mutex<Vec<String>>,
    /// The task forwarding native events as `session/update`s.
    pub forwarder: Mutex<Option<JoinHandle<()>>>,
}

impl SessionLink {
    /// A link with no forwarder yet.
    pub fn new(id: String, workdir: PathBuf) -> Self {
        SessionLink {
            id,
            workdir,
            turns: broadcast::channel(64).0,
            cancel: watch::channel(0).0,
            own_prompts: Mutex::new(VecDeque::new()),
            tools: Mutex::new(ToolCalls::default()),
            turn_facts: Mutex::new((None, false)),
            mcp_servers: Mutex::new(Vec::new()),
            forwarder: Mutex::new(None),
        }
    }
}

/// The ACP agent's state, shared by every handler.
pub struct AcpAgent {
    /// The Snowpea home (daemon.json, token).
    pub home: PathBuf,
    starter: SuiteStarter,
    client: OnceCell<Arc<Client>>,
    conn: OnceLock<Conn>,
    sessions: Mutex<HashMap<String, Arc<SessionLink>>>,
}

/// Locks a mutex, recovering from poisoning.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AcpAgent {
    /// An agent for `home`, not yet connected.
    pub fn new(home: PathBuf, starter: SuiteStarter) -> Self {
        AcpAgent {
            home,
            starter,
            client: OnceCell::new(),
            conn: OnceLock::new(),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Connects to the daemon (starting the suite if needed) once; later calls return the
    /// same client. Registers the server→client request handlers and the notification pump.
    pub async fn connect(self: &Arc<Self>, cx: &Conn) -> Result<Arc<Client>, String> {
        let _ = self.conn.set(cx.clone());
        let client = self
            .client
            .get_or_try_init(|| async {
                let client = crate::daemon::connect(&self.home, &self.starter).await?;
                self.wire(&client);
                Ok::<_, String>(client)
            })
            .await?
            .clone();
        Ok(client)
    }

    /// Wires the handlers on a new client (called once, right after the first connect).
    fn wire(self: &Arc<Self>, client: &Arc<Client>) {
        crate::permission::register(self, client);
        crate::commands::watch_changes(self, client);
    }

    /// The daemon client, or the "initialize first" error.
    pub fn client(&self) -> Result<Arc<Client>, agent_client_protocol::Error> {
        self.client
            .get()
            .cloned()
            .ok_or_else(errors::not_initialized)
    }

    /// The editor connection (set by the first request).
    pub fn conn(&self) -> Option<Conn> {
        self.conn.get().cloned()
    }

    /// The link of an open ACP session.
    pub fn session(&self, id: &str) -> Result<Arc<SessionLink>, agent_client_protocol::Error> {
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| errors::unknown_session(id))
    }

    /// The link of an open ACP session, if any.
    pub fn find(&self, id: &str) -> Option<Arc<SessionLink>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// Every open link.
    pub fn links(&self) -> Vec<Arc<SessionLink>> {
        lock(&self.sessions).values().cloned().collect()
    }

    /// Registers a link (replacing and stopping an older one for the same session).
    pub fn insert(&self, link: Arc<SessionLink>) {
        if let Some(old) = lock(&self.sessions).insert(link.id.clone(), link) {
            if let Some(task) = lock(&old.forwarder).take() {
                task.abort();
            }
        }
    }

    /// Removes a link, stopping its forwarder.
    pub fn remove(&self, id: &str) -> Option<Arc<SessionLink>> {
        let link = lock(&self.sessions).remove(id)?;
        if let Some(task) = lock(&link.forwarder).take() {
            task.abort();
        }
        Some(link)
    }

    /// On exit: removes the MCP servers added for the editor's sessions and closes the
    /// daemon connection (the sessions themselves stay, for other clients).
    pub async fn shutdown(&self) {
        let Some(client) = self.client.get().cloned() else {
            return;
        };
        let ids: Vec<String> = lock(&self.sessions).keys().cloned().collect();
        for id in ids {
            if let Some(link) = self.remove(&id) {
                crate::mcp::remove_all(&client, &link).await;
            }
        }
        client.close().await;
    }
}
