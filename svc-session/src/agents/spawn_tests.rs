//! The reference implementation's subagent contract at the service (issue 32 item 7; the
//! suite-level flow, with `agent.list` while the child runs, is in
//! e2e/tests/suite/agents.rs): `agent.spawn{name: ""}` runs a general-purpose child, and
//! every child is announced `queued`, then reports `running`, then ends.

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::testkit::Harness;

/// `(kind, status)` of the `subagent.*` events of `agent_id` on `parent`.
async fn flow(h: &Harness, parent: &str, agent_id: &str) -> Vec<(String, String)> {
    h.app.flush().await.unwrap();
    h.app
        .events
        .after(parent, 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.starts_with("subagent.") && e.payload["agentId"] == agent_id)
        .map(|e| {
            let status = e.payload["status"].as_str().unwrap_or_default().to_owned();
            (e.kind, status)
        })
        .collect()
}

/// Regression: `agent.spawn{name: ""}` answered `invalid_params` (params.name), and a child
/// that got a slot at once was announced `running` instead of `queued`.
#[tokio::test]
async fn an_empty_name_runs_a_general_child_announced_queued_then_running_then_done() {
    let h = Harness::new(json!({
        "steps": [{"match": "general errand", "text": "errand done"}],
        "default": {"text": "ok"}
    }))
    .await;
    let parent = h.create("accept").await;
    let r = h
        .app
        .agents
        .spawn(pb::AgentSpawnParams {
            session_id: Some(parent.clone()),
            name: String::new(),
            task: "general errand please".into(),
            model: None,
        })
        .await
        .expect("a general-purpose child");
    let pair = |k: &str, s: &str| (k.to_owned(), s.to_owned());
    let seen = snowpea_testkit::eventually(snowpea_testkit::WAIT, "subagent.done", || async {
        let f = flow(&h, &parent, &r.agent_id).await;
        f.iter().any(|(k, _)| k == "subagent.done").then_some(f)
    })
    .await;
    assert_eq!(
        seen.first(),
        Some(&pair("subagent.spawn", "queued")),
        "{seen:?}"
    );
    assert_eq!(
        seen.get(1),
        Some(&pair("subagent.update", "running")),
        "{seen:?}"
    );
    assert_eq!(
        seen.last(),
        Some(&pair("subagent.done", "done")),
        "{seen:?}"
    );
    let events = h.app.events.after(&parent, 0).await.unwrap();
    let done: &Value = &events
        .iter()
        .find(|e| e.kind == "subagent.done")
        .unwrap()
        .payload;
    assert_eq!(done["ok"], true, "{done}");
    assert_eq!(done["result"], "errand done");
    // The child ran with no definition, in its own session under the parent.
    let child = done["sessionId"].as_str().unwrap();
    let row = h.app.sessions.registry().row(child).await.unwrap().unwrap();
    assert_eq!(row.parent_session_id.as_deref(), Some(parent.as_str()));
    assert_eq!(row.agent, None);
}

/// A child whose turn ends `stalled` (issue 32 item 2) reports `subagent.done{ok: false,
/// status: "error", reason: "error"}` (stalled is not among the reasons `subagent.done`
/// documents), its cause in `result`.
#[tokio::test]
async fn a_stalled_child_ends_error_with_the_cause_in_its_result() {
    let list = json!([{"name": "list_dir", "arguments": {"path": "."}}]);
    let h = Harness::new(json!({
        "steps": [
            {"match": "circle around", "tool_calls": list, "repeat": true},
            {"after_tool": "list_dir", "tool_calls": list, "repeat": true},
            {"match": "loop suspected", "tool_calls": list, "repeat": true}
        ],
        "default": {"text": "ok"}
    }))
    .await;
    let parent = h.create("accept").await;
    let r = h
        .app
        .agents
        .spawn(pb::AgentSpawnParams {
            session_id: Some(parent.clone()),
            name: String::new(),
            task: "circle around the directory".into(),
            model: None,
        })
        .await
        .unwrap();
    let done = snowpea_testkit::eventually(snowpea_testkit::WAIT, "subagent.done", || async {
        h.app.flush().await.unwrap();
        h.app
            .events
            .after(&parent, 0)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.kind == "subagent.done" && e.payload["agentId"] == r.agent_id.as_str())
            .map(|e| e.payload)
    })
    .await;
    assert_eq!(
        (
            done["ok"].as_bool(),
            done["status"].as_str(),
            done["reason"].as_str()
        ),
        (Some(false), Some("error"), Some("error")),
        "{done}"
    );
    assert!(
        done["result"].as_str().unwrap().contains("stalled"),
        "{done}"
    );
}
