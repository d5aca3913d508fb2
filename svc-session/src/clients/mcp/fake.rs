//! A scripted svc-mcp for tests: serves `McpInternalService` on a unix socket (normally the
//! harness home's `run/mcp.sock`), answers `ListTools` from a [`Script`] that tests may change
//! while it runs, records every `CallToolRequest`, and can be told never to answer (a frozen
//! svc-mcp). [`set_timeouts`] shortens the session's waits for one home, so a test of a
//! frozen svc-mcp takes milliseconds.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use snowpea_common::home::Home;

use snowpea_proto::mcp::v1::mcp_internal_service_server::{
    McpInternalService, McpInternalServiceServer,
};
pub use snowpea_proto::mcp::v1::McpServerState as ServerState;
use snowpea_proto::mcp::v1::{
    CallToolReply, CallToolRequest, ListToolsReply, ListToolsRequest, McpTool,
};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use super::Timeouts;

static TIMEOUTS: LazyLock<Mutex<HashMap<PathBuf, Timeouts>>> = LazyLock::new(Default::default);

/// Every [`super::McpClient::new`] of `home` uses `timeouts` from now on.
pub fn set_timeouts(home: &Home, timeouts: Timeouts) {
    TIMEOUTS
        .lock()
        .unwrap()
        .insert(home.root().to_path_buf(), timeouts);
}

/// The timeouts [`set_timeouts`] set for `home`.
pub(super) fn timeouts_for(home: &Home) -> Option<Timeouts> {
    TIMEOUTS.lock().unwrap().get(home.root()).copied()
}

/// Timeouts short enough for tests: `list` for `ListTools`; a `CallTool` of a server with
/// no `toolTimeoutSec` waits `call`.
pub fn short(list: Duration, call: Duration) -> Timeouts {
    Timeouts {
        list,
        call_margin: call,
        default_tool: Duration::ZERO,
    }
}

/// What the fake answers.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// `ListTools` tools.
    pub tools: Vec<McpTool>,
    /// `ListTools` server states.
    pub servers: Vec<ServerState>,
    /// `ListTools` never answers.
    pub hang_list: bool,
    /// `CallTool` never answers.
    pub hang_call: bool,
}

/// A tool of `server` with the permission tag svc-mcp would report.
pub fn tool(server: &str, name: &str, permission: &str) -> McpTool {
    McpTool {
        server: server.into(),
        name: name.into(),
        description: format!("{name} of {server}"),
        input_schema_json: r#"{"type":"object"}"#.into(),
        permission: permission.into(),
        transport: "stdio".into(),
        scope: "global".into(),
        tool_timeout_sec: 0,
    }
}

/// A server in `state`.
pub fn server(name: &str, state: &str) -> ServerState {
    ServerState {
        name: name.into(),
        state: state.into(),
        error: None,
    }
}

#[derive(Debug, Default)]
struct Shared {
    script: Mutex<Script>,
    calls: Mutex<Vec<CallToolRequest>>,
}

#[derive(Debug, Clone)]
struct Service(Arc<Shared>);

#[tonic::async_trait]
impl McpInternalService for Service {
    async fn list_tools(
        &self,
        _req: Request<ListToolsRequest>,
    ) -> Result<Response<ListToolsReply>, Status> {
        let s = self.0.script.lock().unwrap().clone();
        if s.hang_list {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(ListToolsReply {
            tools: s.tools,
            servers: s.servers,
        }))
    }

    async fn call_tool(
        &self,
        req: Request<CallToolRequest>,
    ) -> Result<Response<CallToolReply>, Status> {
        let req = req.into_inner();
        self.0.calls.lock().unwrap().push(req.clone());
        let hang = self.0.script.lock().unwrap().hang_call;
        if hang {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(CallToolReply {
            ok: true,
            content: format!(
                "ran {}/{} with {}",
                req.server, req.tool, req.arguments_json
            ),
            is_error: false,
            meta_json: serde_json::json!({"server": req.server, "tool": req.tool}).to_string(),
            images: vec![],
        }))
    }
}

/// A running fake svc-mcp; stops when dropped.
#[derive(Debug)]
pub struct FakeMcp {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeMcp {
    /// Serves `script` on `socket` (its directory is created).
    pub fn serve(socket: &Path, script: Script) -> FakeMcp {
        if let Some(dir) = socket.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        let _ = std::fs::remove_file(socket);
        let listener = tokio::net::UnixListener::bind(socket).unwrap();
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            calls: Mutex::default(),
        });
        let service = McpInternalServiceServer::new(Service(shared.clone()));
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(UnixListenerStream::new(listener))
                .await;
        });
        FakeMcp { shared, task }
    }

    /// Changes what it answers from now on.
    pub fn update(&self, f: impl FnOnce(&mut Script)) {
        f(&mut self.shared.script.lock().unwrap());
    }

    /// Every `CallTool` request received so far.
    pub fn calls(&self) -> Vec<CallToolRequest> {
        self.shared.calls.lock().unwrap().clone()
    }
}

impl Drop for FakeMcp {
    fn drop(&mut self) {
        self.task.abort();
    }
}
