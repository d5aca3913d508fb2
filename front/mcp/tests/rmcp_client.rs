//! `snowpea mcp serve` driven by rmcp's client side (the official Rust MCP SDK) over the
//! child's stdio, against a real suite with the scripted provider (issue 38): initialize and
//! the listings; a turn whose approval the host denies through elicitation (the turn ends
//! `denied`, the command never runs; the elicitation has no progress token, a titled `oneOf`
//! and names the command once); a prompt on a session busy with a native client's turn
//! answered by its own queued turn; cancellation of a running `snowpea_prompt` request
//! interrupting the turn (checked from a native client), also while an approval elicitation
//! is open; a host on protocol 2025-03-26 never elicited; a host hanging up interrupting
//! the turn it started; a transcript resource read; protocol errors for an unknown tool and
//! a foreign resource URI. A second test starts the suite from `snowpea mcp serve` and
//! kills the gateway: stderr says so.
//!
//! Needs the workspace binaries (`cargo build --workspace --bins`).

mod common;

use std::path::Path;
use std::process::Stdio;
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
use snowpea_sdk::{Client, SessionEvent};
use snowpea_testkit::suite::bin_dir;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

/// Bound of every wait on the server.
const WAIT: Duration = Duration::from_secs(60);

/// One elicitation as the host received it.
#[derive(Debug, Clone)]
struct Asked {
    message: String,
    /// The request's `requestedSchema`.
    schema: Value,
    /// True when the request carried a `_meta.progressToken`.
    progress_token: bool,
}

/// The test's MCP host: denies every elicitation (except one about "hung", which it never
/// answers) and forwards progress messages.
struct Host {
    /// The protocol revision it asks for in `initialize`.
    protocol: &'static str,
    elicitations: Arc<Mutex<Vec<Asked>>>,
    progress: mpsc::UnboundedSender<String>,
    /// Told when an elicitation that will never be answered arrived.
    hung: mpsc::UnboundedSender<()>,
}

impl Host {
    fn new(
        protocol: &'static str,
    ) -> (
        Self,
        mpsc::UnboundedReceiver<String>,
        mpsc::UnboundedReceiver<()>,
    ) {
        let (progress, progress_rx) = mpsc::unbounded_channel();
        let (hung, hung_rx) = mpsc::unbounded_channel();
        let host = Host {
            protocol,
            elicitations: Arc::new(Mutex::new(Vec::new())),
            progress,
            hung,
        };
        (host, progress_rx, hung_rx)
    }
}

impl ClientHandler for Host {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": self.protocol,
            "capabilities": { "elicitation": { "form": {} } },
            "clientInfo": { "name": "rmcp-test-host", "version": "1.0.0" }
        }))
        .unwrap()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let wire = serde_json::to_value(&request).unwrap();
        let message = wire["message"].as_str().unwrap_or_default().to_owned();
        self.elicitations.lock().unwrap().push(Asked {
            message: message.clone(),
            schema: wire["requestedSchema"].clone(),
            progress_token: context.meta.get_progress_token().is_some(),
        });
        if message.contains("hung") {
            let _ = self.hung.send(());
            std::future::pending::<()>().await;
        }
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

/// `snowpea mcp serve --home <home>` started in `workdir`.
fn server_command(home: &Path, workdir: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(bin_dir().join("snowpea"));
    command
        .args(["mcp", "serve", "--home"])
        .arg(home)
        .current_dir(workdir);
    command
}

/// Sends `snowpea_prompt` as a cancellable request.
async fn send_prompt(
    client: &RunningService<RoleClient, Host>,
    arguments: Value,
) -> rmcp::service::RequestHandle<RoleClient> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("snowpea_prompt").with_arguments(args(arguments)),
    ));
    within(
        "send snowpea_prompt",
        client
            .peer()
            .send_cancellable_request(request, PeerRequestOptions::no_options()),
    )
    .await
    .unwrap()
}

/// Waits for a progress message starting with `prefix`.
async fn progress_starting(progress: &mut mpsc::UnboundedReceiver<String>, prefix: &str) {
    within(&format!("progress {prefix:?}"), async {
        while let Some(message) = progress.recv().await {
            if message.starts_with(prefix) {
                return;
            }
        }
        panic!("the progress channel closed");
    })
    .await;
}

/// The id of the session's last started turn.
async fn last_started(native: &Client, session_id: &str) -> String {
    let events = native.resume(session_id, 0).await.unwrap();
    let started = events
        .iter()
        .rev()
        .find(|e| e.kind == "turn.started")
        .unwrap();
    started.payload["turnId"].as_str().unwrap().to_owned()
}

/// The `turn.done` of `turn_id` (or, without one, the last turn's) once it ended.
async fn turn_done(native: &Client, session_id: &str, turn_id: Option<&str>) -> SessionEvent {
    snowpea_testkit::eventually(WAIT, "turn.done", || async {
        let events = native.resume(session_id, 0).await.ok()?;
        events
            .iter()
            .rev()
            .find(|e| e.kind == "turn.done" && turn_id.is_none_or(|t| e.payload["turnId"] == t))
            .cloned()
    })
    .await
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
    let native = Arc::new(suite.client().await);
    let (answerer, answered) = common::answer_native_approvals(native.clone());
    let workdir = std::fs::canonicalize(suite.workdir.path()).unwrap();

    let transport = TokioChildProcess::new(server_command(suite.home(), &workdir))
        .expect("spawn snowpea mcp serve");
    let (host, mut progress, mut hung) = Host::new("2025-11-25");
    let elicitations = host.elicitations.clone();
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
    // The command is named once; no progress token the host never gave; the 2025-11-25
    // titled enum form rather than the deprecated enumNames.
    assert_eq!(
        asked[0].message.matches("echo denied > denied.txt").count(),
        1,
        "{asked:?}"
    );
    assert!(!asked[0].progress_token, "{asked:?}");
    let decision = &asked[0].schema["properties"]["decision"];
    assert!(decision.get("enumNames").is_none(), "{decision}");
    assert_eq!(
        decision["oneOf"][0],
        json!({"const": "allow", "title": "Allow once"})
    );
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

    // A session busy with a native client's turn: the MCP prompt waits as its own turn and
    // answers with that turn's text (not folded into the native turn as a steer).
    while progress.try_recv().is_ok() {}
    let busy = native
        .call(
            "session.prompt",
            json!({"sessionId": session_id, "text": "busy native turn"}),
        )
        .await
        .unwrap();
    let busy_turn = busy["turnId"].as_str().unwrap().to_owned();
    let result = within(
        "snowpea_prompt (busy session)",
        client.call_tool(
            CallToolRequestParams::new("snowpea_prompt").with_arguments(args(
                json!({"text": "what did you write", "sessionId": session_id}),
            )),
        ),
    )
    .await
    .unwrap();
    let text = text_of(&result);
    assert!(text.starts_with("I wrote a.txt earlier."), "{text}");
    assert!(text.contains("turn ended: complete"), "{text}");
    let structured = serde_json::to_value(&result).unwrap()["structuredContent"].clone();
    assert_ne!(structured["turnId"], busy_turn.as_str());
    let mut seen = Vec::new();
    while let Ok(m) = progress.try_recv() {
        seen.push(m);
    }
    assert!(
        seen.iter().any(|m| m.starts_with("queued in session")),
        "{seen:?}"
    );
    let native_done = turn_done(&native, &session_id, Some(&busy_turn)).await;
    assert_eq!(native_done.payload["reason"], "complete");

    // Cancelling the request interrupts the turn.
    while progress.try_recv().is_ok() {}
    let handle = send_prompt(
        &client,
        json!({"text": "slow answer", "sessionId": session_id}),
    )
    .await;
    progress_starting(&mut progress, "turn started").await;
    let slow_turn = last_started(&native, &session_id).await;
    handle.cancel(Some("test cancels".into())).await.unwrap();
    let done = turn_done(&native, &session_id, Some(&slow_turn)).await;
    assert_eq!(done.payload["reason"], "interrupted");

    // Cancelling while an approval elicitation is open interrupts the turn (not a denial):
    // the daemon resolves the approval `interrupted`, nobody answers it `deny`.
    let mut resolved = native.subscribe();
    let handle = send_prompt(
        &client,
        json!({"text": "hang on approval", "sessionId": session_id}),
    )
    .await;
    within("the elicitation that hangs", hung.recv())
        .await
        .unwrap();
    let turn_id = last_started(&native, &session_id).await;
    handle.cancel(Some("test cancels".into())).await.unwrap();
    let done = turn_done(&native, &session_id, Some(&turn_id)).await;
    assert_eq!(done.payload["reason"], "interrupted", "{done:?}");
    assert!(!workdir.join("hung.txt").exists());
    let resolution = within("approval.resolved", async {
        loop {
            match resolved.recv().await {
                Ok(n) if n.method == "approval.resolved" => return n.params,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("notifications ended: {e}"),
            }
        }
    })
    .await;
    assert_eq!(resolution["by"], "interrupted", "{resolution}");
    within("close", client.cancel()).await.unwrap();

    // A host on protocol 2025-03-26 (no elicitation in that revision) is never elicited,
    // even though it declared the capability: the native client answers.
    let transport = TokioChildProcess::new(server_command(suite.home(), &workdir))
        .expect("spawn snowpea mcp serve");
    let (old_host, _progress, _hung) = Host::new("2025-03-26");
    let old_asked = old_host.elicitations.clone();
    let old = within("initialize (2025-03-26)", old_host.serve(transport))
        .await
        .expect("initialize");
    assert_eq!(
        old.peer_info().unwrap().protocol_version.to_string(),
        "2025-03-26"
    );
    let result = within(
        "snowpea_prompt (2025-03-26)",
        old.call_tool(
            CallToolRequestParams::new("snowpea_prompt").with_arguments(args(
                json!({"text": "run the native command", "workdir": workdir}),
            )),
        ),
    )
    .await
    .unwrap();
    let text = text_of(&result);
    assert!(
        text.contains("Native ran.") && text.contains("tools run: shell"),
        "{text}"
    );
    assert!(old_asked.lock().unwrap().is_empty());
    assert_eq!(answered.load(std::sync::atomic::Ordering::SeqCst), 1);
    within("close", old.cancel()).await.unwrap();

    // A host that hangs up while its turn runs: the turn is interrupted.
    let transport = TokioChildProcess::new(server_command(suite.home(), &workdir))
        .expect("spawn snowpea mcp serve");
    let (host, mut progress, _hung) = Host::new("2025-11-25");
    let client = within("initialize", host.serve(transport))
        .await
        .expect("initialize");
    let _handle = send_prompt(&client, json!({"text": "slow answer", "workdir": workdir})).await;
    progress_starting(&mut progress, "turn started").await;
    let listed = native.call("session.list", json!({})).await.unwrap();
    let running: Vec<String> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["running"] == true)
        .filter_map(|s| s["sessionId"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(running.len(), 1, "{listed}");
    within("close", client.cancel()).await.unwrap();
    let done = turn_done(&native, &running[0], None).await;
    assert_eq!(done.payload["reason"], "interrupted");

    answerer.abort();
    native.close().await;
}

/// The next stderr line of the server that contains `wanted` (every line is a diagnostic).
async fn stderr_line(lines: &mut mpsc::UnboundedReceiver<String>, wanted: &str) -> String {
    within(&format!("stderr {wanted:?}"), async {
        while let Some(line) = lines.recv().await {
            assert!(line.starts_with("snowpea mcp serve: "), "{line}");
            if line.contains(wanted) {
                return line;
            }
        }
        panic!("stderr closed before {wanted:?}");
    })
    .await
}

/// Stops the suite `snowpea mcp serve` started (on drop, so a failed test does too).
struct StopSuite<'a>(&'a snowpea_testkit::suite::Suite);

impl Drop for StopSuite<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new(bin_dir().join("snowpea"))
            .args(["supervisor", "stop", "--home"])
            .arg(self.0.home())
            .output();
    }
}

#[tokio::test]
async fn stderr_says_when_it_starts_the_suite_and_when_the_gateway_is_back() {
    let mut suite = common::suite().await;
    suite.stop();
    let _stop = StopSuite(&suite);
    let workdir = std::fs::canonicalize(suite.workdir.path()).unwrap();
    let mut command = server_command(suite.home(), &workdir);
    command
        .env(
            "SNOWPEA_PROVIDER",
            format!("fake:{}", suite.home().join("script.json").display()),
        )
        .env("SNOWPEA_BIN_DIR", bin_dir())
        .env("SNOWPEA_STOP_GRACE_MS", "2000")
        .env("SNOWPEA_UPDATE_INDEX_URL", "http://127.0.0.1:9/snowpea");
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn snowpea mcp serve");
    let (line_tx, mut lines) = mpsc::unbounded_channel();
    let mut stderr = tokio::io::BufReader::new(stderr.expect("stderr")).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            eprintln!("server: {line}");
            let _ = line_tx.send(line);
        }
    });
    let (host, _progress, _hung) = Host::new("2025-11-25");
    let client = within("initialize", host.serve(transport))
        .await
        .expect("initialize");
    let listed = within(
        "snowpea_sessions",
        client.call_tool(CallToolRequestParams::new("snowpea_sessions")),
    )
    .await
    .unwrap();
    assert_ne!(listed.is_error, Some(true), "{}", text_of(&listed));
    let started = stderr_line(&mut lines, "started the Snowpea suite").await;
    assert!(
        started.contains(&suite.home().display().to_string()),
        "{started}"
    );

    let old = suite.kill9("gateway");
    suite.wait_restarted("gateway", old).await;
    stderr_line(&mut lines, "lost the connection to the Snowpea gateway").await;
    stderr_line(&mut lines, "reconnected to the Snowpea gateway").await;
    let listed = within(
        "snowpea_sessions (after the restart)",
        client.call_tool(CallToolRequestParams::new("snowpea_sessions")),
    )
    .await
    .unwrap();
    assert_ne!(listed.is_error, Some(true), "{}", text_of(&listed));
    within("close", client.cancel()).await.unwrap();
}
