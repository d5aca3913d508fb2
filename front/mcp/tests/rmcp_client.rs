//! `snowpea mcp serve` driven by rmcp's client side (the official Rust MCP SDK) over the
//! child's stdio, against a real suite with the scripted provider (issue 38): initialize and
//! the listings; a turn whose approval the host denies through elicitation (the turn ends
//! `denied`, the command never runs); cancellation of a running `snowpea_prompt` request
//! interrupting the turn (checked from a native client); a transcript resource read; and
//! protocol errors for an unknown tool and a foreign resource URI.
//!
//! Needs the workspace binaries (`cargo build --workspace --bins`).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ProgressNotificationParam, ReadResourceRequestParams,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient, ServiceExt};
use serde_json::{json, Value};
use snowpea_testkit::suite::bin_dir;
use tokio::sync::mpsc;

/// Bound of every wait on the server.
const WAIT: Duration = Duration::from_secs(60);

/// The test's MCP host: denies every elicitation and forwards progress messages.
struct Host {
    elicitations: Arc<Mutex<Vec<String>>>,
    progress: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Host {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": { "elicitation": { "form": {} } },
            "clientInfo": { "name": "rmcp-test-host", "version": "1.0.0" }
        }))
        .unwrap()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            other => format!("{other:?}"),
        };
        self.elicitations.lock().unwrap().push(message);
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({"decision": "deny", "reason": "not today"}));
        Ok(result)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(params.message.unwrap_or_default());
    }
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    let v = serde_json::to_value(result).unwrap();
    v["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

#[tokio::test]
async fn rmcp_client_denies_by_elicitation_and_cancels_a_turn() {
    let suite = common::suite().await;
    let native = suite.client().await;
    let workdir = std::fs::canonicalize(suite.workdir.path()).unwrap();

    let mut command = tokio::process::Command::new(bin_dir().join("snowpea"));
    command
        .args(["mcp", "serve", "--home"])
        .arg(suite.home())
        .current_dir(&workdir);
    let transport = TokioChildProcess::new(command).expect("spawn snowpea mcp serve");
    let elicitations = Arc::new(Mutex::new(Vec::new()));
    let (progress_tx, mut progress) = mpsc::unbounded_channel();
    let host = Host {
        elicitations: elicitations.clone(),
        progress: progress_tx,
    };
    let client: RunningService<RoleClient, Host> = within("initialize", host.serve(transport))
        .await
        .expect("initialize");

    // Initialize and the listings.
    let info = client.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("snowpea")
    );
    let tools = within("tools/list", client.list_all_tools()).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for name in [
        "snowpea_prompt",
        "snowpea_sessions",
        "snowpea_session_history",
        "snowpea_memory_search",
        "snowpea_memory_write",
        "snowpea_schedule",
        "snowpea_jobs",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    let prompts = within("prompts/list", client.list_prompts(None))
        .await
        .unwrap();
    assert!(!prompts.prompts.is_empty());

    // A denial through elicitation ends the turn as natively; the command never ran.
    let result = within(
        "snowpea_prompt (denied)",
        client.call_tool(
            CallToolRequestParams::new("snowpea_prompt").with_arguments(args(
                json!({"text": "deny this command", "workdir": workdir}),
            )),
        ),
    )
    .await
    .unwrap();
    let text = text_of(&result);
    assert!(text.contains("turn ended: denied"), "{text}");
    assert!(text.contains("shell (failed)"), "{text}");
    assert!(!workdir.join("denied.txt").exists());
    let asked = elicitations.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains("echo denied > denied.txt"), "{asked:?}");
    let structured = serde_json::to_value(&result).unwrap()["structuredContent"].clone();
    let session_id = structured["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(structured["reason"], "denied");

    // The transcript as a resource.
    let read = within(
        "resources/read",
        client.read_resource(ReadResourceRequestParams::new(format!(
            "snowpea://session/{session_id}"
        ))),
    )
    .await
    .unwrap();
    let contents = serde_json::to_value(&read).unwrap();
    let transcript = contents["contents"][0]["text"].as_str().unwrap();
    assert!(
        transcript.contains("user: deny this command"),
        "{transcript}"
    );
    assert!(transcript.contains("turn done (denied)"), "{transcript}");
    let foreign = within(
        "resources/read (foreign)",
        client.read_resource(ReadResourceRequestParams::new("file:///etc/passwd")),
    )
    .await;
    assert!(foreign.is_err(), "a foreign URI is refused: {foreign:?}");
    let unknown = within(
        "tools/call (unknown)",
        client.call_tool(CallToolRequestParams::new("no_such_tool")),
    )
    .await;
    assert!(unknown.is_err(), "an unknown tool is a protocol error");

    // Cancelling the request interrupts the turn.
    while progress.try_recv().is_ok() {}
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("snowpea_prompt").with_arguments(args(
            json!({"text": "slow answer", "sessionId": session_id}),
        )),
    ));
    let handle = within(
        "send snowpea_prompt (slow)",
        client
            .peer()
            .send_cancellable_request(request, PeerRequestOptions::no_options()),
    )
    .await
    .unwrap();
    within("turn started progress", async {
        while let Some(message) = progress.recv().await {
            if message.starts_with("turn started") {
                return;
            }
        }
        panic!("the progress channel closed");
    })
    .await;
    handle.cancel(Some("test cancels".into())).await.unwrap();
    let done = snowpea_testkit::eventually(WAIT, "the cancelled turn's turn.done", || async {
        let events = native.resume(&session_id, 0).await.ok()?;
        events
            .iter()
            .rev()
            .find(|e| e.kind == "turn.done")
            .filter(|e| e.payload["reason"] == "interrupted")
            .cloned()
    })
    .await;
    assert_eq!(done.payload["reason"], "interrupted");

    within("close", client.cancel()).await.unwrap();
    native.close().await;
}
