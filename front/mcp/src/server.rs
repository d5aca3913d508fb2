//! The MCP server: [`SnowpeaMcp`] implements `rmcp`'s [`ServerHandler`] and delegates each MCP
//! method to its module — `tools/list` and `tools/call` to [`crate::tools`],
//! `resources/list` and `resources/read` to [`crate::resources`], `prompts/list` and
//! `prompts/get` to [`crate::prompts`]. [`State`] is what they share: the daemon client
//! (connected on first use, starting the suite when needed), the host connection, and the
//! turns `snowpea_prompt` is running (so an approval of that session reaches the host that
//! asked for the turn).
//!
//! Protocol versions: the handshake revisions up to `2025-11-25` (the ones with
//! `initialize`, where a server may send the host requests such as elicitation).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerConfig,
};
use rmcp::service::{ElicitationMode, NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::{json, Value};
use snowpea_sdk::Client;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use crate::daemon::SuiteStarter;

/// Instructions sent in `initialize`: how a model should use the tools.
pub const INSTRUCTIONS: &str = "\
Snowpea is a local coding agent with its own sessions, memory, MCP servers, approvals and \
scheduled jobs. Hand it a task with snowpea_prompt (it answers with the final text, the tools \
it ran, the files it changed and a sessionId; pass that sessionId to continue the same \
conversation). Sessions are shared with the user's other Snowpea clients (snowpea chat), \
who can watch and steer them. Tool calls that need approval are put to you as an \
elicitation when this host supports it; a denial ends the turn.";

/// A `snowpea_prompt` call in progress: who asked, and how to stop it.
pub struct RunningTurn {
    /// The session it runs in.
    pub session_id: String,
    /// The host that called the tool (elicitations for this session go to it).
    pub peer: Peer<RoleServer>,
    /// Cancelled when the host cancels the `tools/call` request.
    pub cancel: CancellationToken,
}

/// What every handler shares.
pub struct State {
    /// The Snowpea home (daemon.json, token).
    pub home: PathBuf,
    starter: SuiteStarter,
    client: OnceCell<Arc<Client>>,
    reader: OnceCell<Arc<Client>>,
    peer: OnceLock<Peer<RoleServer>>,
    running: Mutex<HashMap<String, Arc<RunningTurn>>>,
    /// Sessions this process created or attached to (their approvals come here).
    pub own_sessions: Mutex<HashSet<String>>,
    /// The session the last `snowpea_prompt` ran in (the scope of `prompts/list`).
    pub last_session: Mutex<Option<String>>,
    /// Background tasks (the notification watcher), stopped at shutdown.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Locks a mutex, recovering from poisoning.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// The daemon client: connects on first use (starting the suite if needed); a failed
    /// attempt is retried by the next call. The error is for humans.
    pub async fn client(self: &Arc<Self>) -> Result<Arc<Client>, String> {
        let client = self
            .client
            .get_or_try_init(|| async {
                let client = crate::daemon::connect(&self.home, &self.starter, "main").await?;
                crate::approvals::register(self, &client);
                let watcher = crate::resources::watch_sessions(self, &client);
                lock(&self.tasks).push(watcher);
                Ok::<_, String>(client)
            })
            .await?;
        Ok(client.clone())
    }

    /// The connection for transcript reads (`session.resume`), apart from the one that
    /// follows turns (see [`crate::daemon::connect`]); connected on first use.
    pub async fn reader(self: &Arc<Self>) -> Result<Arc<Client>, String> {
        let client = self
            .reader
            .get_or_try_init(|| crate::daemon::connect(&self.home, &self.starter, "reader"))
            .await?;
        Ok(client.clone())
    }

    /// The host connection, once the host initialized.
    pub fn peer(&self) -> Option<Peer<RoleServer>> {
        self.peer.get().cloned()
    }

    fn set_peer(&self, peer: &Peer<RoleServer>) {
        let _ = self.peer.set(peer.clone());
    }

    /// Registers a running `snowpea_prompt` turn (replacing an older one of the session).
    pub fn start_turn(&self, turn: Arc<RunningTurn>) {
        lock(&self.running).insert(turn.session_id.clone(), turn);
    }

    /// Forgets a running turn (only if it is still the registered one).
    pub fn end_turn(&self, turn: &Arc<RunningTurn>) {
        let mut running = lock(&self.running);
        if running
            .get(&turn.session_id)
            .is_some_and(|t| Arc::ptr_eq(t, turn))
        {
            running.remove(&turn.session_id);
        }
    }

    /// The running turn of a session, if a `snowpea_prompt` call is waiting on one.
    pub fn running_turn(&self, session_id: &str) -> Option<Arc<RunningTurn>> {
        lock(&self.running).get(session_id).cloned()
    }
}

/// True when the host declared form elicitation (it can answer approvals).
pub fn can_elicit(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// The MCP server (a cheap handle; clones share one [`State`]).
#[derive(Clone)]
pub struct SnowpeaMcp {
    /// The shared state.
    pub state: Arc<State>,
}

impl SnowpeaMcp {
    /// A server for `home`, not yet connected to the daemon.
    pub fn new(home: PathBuf, starter: SuiteStarter) -> Self {
        SnowpeaMcp {
            state: Arc::new(State {
                home,
                starter,
                client: OnceCell::new(),
                reader: OnceCell::new(),
                peer: OnceLock::new(),
                running: Mutex::new(HashMap::new()),
                own_sessions: Mutex::new(HashSet::new()),
                last_session: Mutex::new(None),
                tasks: Mutex::new(Vec::new()),
            }),
        }
    }

    /// On exit: interrupts the turns still running for the host, stops the watcher and
    /// closes the daemon connection (the sessions themselves stay, for other clients).
    pub async fn shutdown(&self) {
        for task in lock(&self.state.tasks).drain(..) {
            task.abort();
        }
        if let Some(reader) = self.state.reader.get().cloned() {
            reader.close().await;
        }
        let Some(client) = self.state.client.get().cloned() else {
            return;
        };
        let running: Vec<Arc<RunningTurn>> = lock(&self.state.running).values().cloned().collect();
        for turn in running {
            turn.cancel.cancel();
        }
        client.close().await;
    }
}

/// A model type from its wire JSON (the shapes are the MCP spec's; building them from JSON
/// keeps this crate independent of the SDK's constructors).
pub fn wire<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value)
        .map_err(|e| McpError::internal_error(format!("building an MCP result: {e}"), None))
}

impl ServerHandler for SnowpeaMcp {
    fn get_info(&self) -> ServerConfig {
        let info = json!({
            "protocolVersion": ProtocolVersion::V_2025_11_25,
            "capabilities": {
                "tools": { "listChanged": false },
                "resources": { "listChanged": true },
                "prompts": { "listChanged": true },
            },
            "serverInfo": {
                "name": "snowpea",
                "title": "Snowpea",
                "version": env!("CARGO_PKG_VERSION"),
            },
            "instructions": INSTRUCTIONS,
        });
        serde_json::from_value(info).expect("the server info is well-formed")
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.state.set_peer(&context.peer);
        // Connect now (in the background) so session list changes reach the host from the
        // start; a failure is reported by the first tool call that needs the daemon.
        let state = self.state.clone();
        tokio::spawn(async move {
            if let Err(error) = state.client().await {
                tracing::warn!(%error, "connecting to the daemon failed");
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.state.set_peer(&context.peer);
        wire(json!({ "tools": crate::tools::definitions() }))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.state.set_peer(&context.peer);
        crate::tools::call(&self.state, request, context)
            .await
            .map(CallToolResponse::from)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.state.set_peer(&context.peer);
        crate::resources::list(&self.state).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.state.set_peer(&context.peer);
        crate::resources::read(&self.state, &request.uri)
            .await
            .map(ReadResourceResponse::from)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.state.set_peer(&context.peer);
        crate::prompts::list(&self.state).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.state.set_peer(&context.peer);
        crate::prompts::get(&self.state, &request)
            .await
            .map(GetPromptResponse::from)
    }
}
