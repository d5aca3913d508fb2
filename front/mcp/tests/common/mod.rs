//! Shared by the integration tests: the scripted turns, the suite, and the native client that
//! answers "native" approvals (the second client of the approval rules).

#![allow(dead_code)]

use std::sync::Arc;

use serde_json::{json, Value};
use snowpea_sdk::Client;
use snowpea_testkit::suite::{Suite, SuiteOptions};
use tokio::sync::broadcast::error::RecvError;

/// The scripted provider's turns for both tests.
pub fn script() -> Value {
    json!({"steps": [
        {"match": "write the file",
         "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hello mcp\n"}}]},
        {"after_tool": "write_file", "match": "write the file", "text": "Wrote a.txt."},
        {"match": "what did you write", "text": "I wrote a.txt earlier.", "repeat": true},
        {"match": "slow answer", "delaySec": 60, "text": "too late", "repeat": true},
        {"match": "busy native turn", "delaySec": 3, "text": "Native busy turn done.", "repeat": true},
        {"match": "hang on approval",
         "tool_calls": [{"name": "shell", "arguments": {"command": "echo hung > hung.txt"}}]},
        {"after_tool": "shell", "match": "hang on approval", "text": "should not be reached"},
        {"match": "run the elicited command",
         "tool_calls": [{"name": "shell", "arguments": {"command": "echo elicited > elicited.txt"}}]},
        {"after_tool": "shell", "match": "run the elicited command", "text": "Elicited ran."},
        {"match": "run the native command",
         "tool_calls": [{"name": "shell", "arguments": {"command": "echo native > native.txt"}}]},
        {"after_tool": "shell", "match": "run the native command", "text": "Native ran."},
        {"match": "deny this command",
         "tool_calls": [{"name": "shell", "arguments": {"command": "echo denied > denied.txt"}}]},
        {"after_tool": "shell", "match": "deny this command", "text": "should not be reached"}
    ], "default": {"text": "ok"}})
}

/// A suite on a temp home with [`script`], sessions in `accept` mode (file edits run, shell
/// commands ask).
pub async fn suite() -> Suite {
    Suite::start_with(SuiteOptions {
        script: Some(script()),
        settings: Some(json!({"permissions": {"defaultMode": "accept"}})),
        ..Default::default()
    })
    .await
}

/// A second native client that answers (allow) every approval whose command mentions
/// "native", as a person in `snowpea chat` would; counts what it answered.
pub fn answer_native_approvals(
    client: Arc<Client>,
) -> (
    tokio::task::JoinHandle<()>,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = answered.clone();
    let mut rx = client.subscribe();
    let task = tokio::spawn(async move {
        loop {
            let n = match rx.recv().await {
                Ok(n) => n,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            if n.method != "approval.pending" {
                continue;
            }
            let request = &n.params["request"];
            let command = request["args"]["command"].as_str().unwrap_or_default();
            if !command.contains("native") {
                continue;
            }
            let id = request["requestId"].as_str().unwrap_or_default();
            client
                .call(
                    "approval.respond",
                    json!({"requestId": id, "decision": "allow", "scope": "once"}),
                )
                .await
                .expect("approval.respond from the second client");
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    (task, answered)
}
