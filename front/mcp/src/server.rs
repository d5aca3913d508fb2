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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetMeta, GetPromptRequestParams, GetPromptResponse,
    JsonRpcMessage, ListPromptsResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    RequestMetaObject, ServerConfig, ServerRequest,
};
use rmcp::service::{ElicitationMode, NotificationContext, RequestContext};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::{json, Value};
use snowpea_sdk::Client;
use tokio::sync::{watch, OnceCell};
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

/// Longest wait for a `session.interrupt` another task already sent (shutdown, an approval
/// of a cancelled call).
pub const INTERRUPT_WAIT: Duration = Duration::from_secs(10);

/// A `snowpea_prompt` call in progress: who asked, whether its turn runs yet, and how to stop
/// it. A session can have several (a call queued behind another's turn).
pub struct RunningTurn {
    /// The session it runs in.
    pub session_id: String,
    /// The host that called the tool (elicitations for this session go to it).
    pub peer: Peer<RoleServer>,
    /// Cancelled when the host cancels the `tools/call` request (or hangs up).
    pub cancel: CancellationToken,
    /// True once the daemon runs this call's turn (not waiting behind another turn).
    started: watch::Sender<bool>,
    /// True once `session.interrupt` for this call was sent.
    interrupt_sent: AtomicBool,
    /// True once that `session.interrupt` was answered.
    interrupted: watch::Sender<bool>,
}

impl RunningTurn {
    /// A call that asked for a turn in `session_id`, not running yet.
    pub fn new(session_id: &str, peer: Peer<RoleServer>, cancel: CancellationToken) -> Self {
        RunningTurn {
            session_id: session_id.to_owned(),
            peer,
            cancel,
            started: watch::Sender::new(false),
            interrupt_sent: AtomicBool::new(false),
            interrupted: watch::Sender::new(false),
        }
    }

    /// Marks the call's turn as running in the daemon.
    pub fn mark_started(&self) {
        self.started.send_replace(true);
    }

    /// True once the call's turn runs.
    pub fn is_started(&self) -> bool {
        *self.started.borrow()
    }

    /// Waits (at most `within`) until the call's turn runs; true when it does.
    pub async fn wait_started(&self, within: Duration) -> bool {
        let mut rx = self.started.subscribe();
        let started = tokio::time::timeout(within, rx.wait_for(|s| *s)).await;
        matches!(started, Ok(Ok(_)))
    }

    /// Interrupts the call's turn (`session.interrupt`), once: a second caller waits (at
    /// most [`INTERRUPT_WAIT`]) for the first one's call to be answered. Only for a turn that
    /// runs: interrupting a session whose running turn is another client's would stop that.
    pub async fn interrupt(&self, client: &Client) {
        if self.interrupt_sent.swap(true, Ordering::SeqCst) {
            let mut rx = self.interrupted.subscribe();
            let _ = tokio::time::timeout(INTERRUPT_WAIT, rx.wait_for(|d| *d)).await;
            return;
        }
        match tokio::time::timeout(INTERRUPT_WAIT, client.interrupt(&self.session_id)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "session.interrupt failed"),
            Err(_) => tracing::warn!("session.interrupt was not answered"),
        }
        self.interrupted.send_replace(true);
    }

    /// True once `session.interrupt` was sent for this call.
    pub fn interrupt_sent(&self) -> bool {
        self.interrupt_sent.load(Ordering::SeqCst)
    }
}

/// What every handler shares.
pub struct State {
    /// The Snowpea home (daemon.json, token).
    pub home: PathBuf,
    starter: SuiteStarter,
    client: OnceCell<Arc<Client>>,
    reader: OnceCell<Arc<Client>>,
    peer: OnceLock<Peer<RoleServer>>,
    running: Mutex<HashMap<String, Vec<Arc<RunningTurn>>>>,
    /// Sessions this process created or attached to (their approvals come here).
    pub own_sessions: Mutex<HashSet<String>>,
    /// The session the last `snowpea_prompt` ran in (the scope of `prompts/list`).
    pub last_session: Mutex<Option<String>>,
    /// Cancelled when the host hung up (its input ended, or SIGTERM).
    pub hung_up: CancellationToken,
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
                let connection = crate::daemon::watch_connection(&client);
                lock(&self.tasks).extend([watcher, connection]);
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

    /// Registers a `snowpea_prompt` call (after the others of its session).
    pub fn start_turn(&self, turn: Arc<RunningTurn>) {
        lock(&self.running)
            .entry(turn.session_id.clone())
            .or_default()
            .push(turn);
    }

    /// Forgets a `snowpea_prompt` call.
    pub fn end_turn(&self, turn: &Arc<RunningTurn>) {
        let mut running = lock(&self.running);
        if let Some(turns) = running.get_mut(&turn.session_id) {
            turns.retain(|t| !Arc::ptr_eq(t, turn));
            if turns.is_empty() {
                running.remove(&turn.session_id);
            }
        }
    }

    /// The `snowpea_prompt` calls waiting on a session's turns, oldest first.
    pub fn turns_of(&self, session_id: &str) -> Vec<Arc<RunningTurn>> {
        lock(&self.running)
            .get(session_id)
            .cloned()
            .unwrap_or_default()
    }

    /// Every `snowpea_prompt` call in progress.
    pub fn all_turns(&self) -> Vec<Arc<RunningTurn>> {
        lock(&self.running).values().flatten().cloned().collect()
    }
}

/// True when the host can answer approvals through elicitation: it declared the
/// `elicitation` capability with form mode (an empty `elicitation: {}` means form) and the
/// negotiated protocol revision has elicitation (`2025-06-18` or later). Otherwise the server
/// behaves as for a host without elicitation.
pub fn can_elicit(peer: &Peer<RoleServer>) -> bool {
    let Some(info) = peer.peer_info() else {
        return false;
    };
    info.protocol_version >= ProtocolVersion::V_2025_06_18
        && peer
            .supported_elicitation_modes()
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
                hung_up: CancellationToken::new(),
                tasks: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The host closed stdin: every `snowpea_prompt` call in progress is cancelled, which
    /// interrupts the turns that run ([`crate::tools::prompt`]); a call still queued behind
    /// another client's turn is not withdrawn (see [`SnowpeaMcp::shutdown`]).
    pub fn host_hung_up(&self) {
        if self.state.hung_up.is_cancelled() {
            return;
        }
        self.state.hung_up.cancel();
        let turns = self.state.all_turns();
        let running = turns.iter().filter(|t| t.is_started()).count();
        if running > 0 {
            crate::daemon::diag(&format!(
                "the MCP host closed the connection; interrupting the {running} running turn(s) it started"
            ));
        }
        for turn in turns {
            turn.cancel.cancel();
        }
    }

    /// On exit (the host closed stdin): interrupts the turns this server's `snowpea_prompt`
    /// calls started that still run, stops the watchers and closes the daemon connections
    /// (the sessions themselves stay, for other clients). A call still queued behind another
    /// client's turn cannot be withdrawn alone (`session.interrupt` would stop that other
    /// turn): it is left to run.
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
        self.state.hung_up.cancel();
        let turns = self.state.all_turns();
        let running: Vec<&Arc<RunningTurn>> = turns.iter().filter(|t| t.is_started()).collect();
        for turn in &turns {
            turn.cancel.cancel();
        }
        futures::future::join_all(running.iter().map(|t| t.interrupt(&client))).await;
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
            // A failure was said on stderr by `connect`; the next call tries again.
            let _ = state.client().await;
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

/// The host's transport (stdio) as this server uses it:
/// * an elicitation request it sends carries no `_meta.progressToken`: rmcp gives every
///   outgoing request one from its own counter, but nothing ever reports progress on an
///   elicitation, and a host may take the token for the tool call's own (only the host that
///   calls a tool chooses its token);
/// * the end of its input (the host closed stdin) cancels `hung_up` at once, so the turns
///   this server started are interrupted before rmcp's drain of in-flight answers (and a
///   host's SIGTERM a few seconds later) rather than after it.
pub struct HostTransport<T> {
    /// The transport underneath.
    pub inner: T,
    /// Cancelled when the host's input ends.
    pub hung_up: CancellationToken,
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for HostTransport<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &mut item {
            if matches!(request.request, ServerRequest::ElicitRequest(_)) {
                strip_progress_token(request.request.get_meta_mut());
            }
        }
        self.inner.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        let hung_up = self.hung_up.clone();
        let next = self.inner.receive();
        async move {
            let message = next.await;
            if message.is_none() {
                hung_up.cancel();
            }
            message
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Removes `progressToken` from a request's `_meta`.
pub fn strip_progress_token(meta: &mut RequestMetaObject) {
    meta.0 .0.remove("progressToken");
}
