//! Agents through the real suite (issue 19 part A): definitions, `session.setAgent`,
//! subagents (`delegate_task`, `agent.spawn`, concurrency, guards, approvals, interrupt,
//! crash), named agents across `snowpea supervisor restart session`, jobs naming an agent,
//! `agent.bindChannel`, `agent.delete`. One suite for the file: every scenario uses its own
//! sessions and task texts and they run one after another.
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::{Client, Error};

const T: Duration = Duration::from_secs(60);

async fn ok(c: &Client, method: &str, params: Value) -> Value {
    tokio::time::timeout(T, c.call(method, params.clone()))
        .await
        .expect("call timed out")
        .unwrap_or_else(|e| panic!("{method} {params}: {e:?}"))
}

/// The protocol error (`error.data.code`, `details`) of a call that must fail.
async fn refused(c: &Client, method: &str, params: Value) -> (String, Value) {
    match tokio::time::timeout(T, c.call(method, params.clone()))
        .await
        .expect("call timed out")
    {
        Err(Error::Rpc(e)) => (
            e.data_code.clone().unwrap_or_default(),
            e.data
                .as_ref()
                .map(|d| d["details"].clone())
                .unwrap_or(Value::Null),
        ),
        other => panic!("{method} {params}: expected an error, got {other:?}"),
    }
}

/// (kind, payload) of every stored event of `sid`.
async fn events(c: &Client, sid: &str) -> Vec<(String, Value)> {
    c.resume(sid, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.payload))
        .collect()
}

/// The `subagent.done` payloads of `sid`.
async fn dones(c: &Client, sid: &str) -> Vec<Value> {
    events(c, sid)
        .await
        .into_iter()
        .filter(|(k, _)| k == "subagent.done")
        .map(|(_, p)| p)
        .collect()
}

/// Waits until `sid` has `n` `subagent.done` events and returns them.
async fn wait_dones(c: &Client, sid: &str, n: usize) -> Vec<Value> {
    snowpea_testkit::eventually(T, "subagent.done events", || async {
        let d = dones(c, sid).await;
        (d.len() >= n).then_some(d)
    })
    .await
}

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn script() -> Value {
    json!({
        "steps": [
            // delegate_task: the parent delegates, the child reads a file and reports.
            {"match": "delegate the review", "tool_calls": [{"name": "delegate_task", "arguments": {"agent": "reviewer", "task": "review notes.txt please", "title": "Review"}}]},
            {"match": "review notes.txt please", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"after_tool": "read_file", "match": "review notes.txt please", "text": "REVIEW: notes look fine"},
            {"after_tool": "delegate_task", "match": "delegate the review", "text": "The reviewer says the notes look fine."},
            // Concurrency: slow children.
            {"match": "slow job", "delaySec": 2.0, "text": "slow done", "repeat": true},
            // Sibling-owned file.
            {"match": "write shared first", "tool_calls": [{"name": "write_file", "arguments": {"path": "shared.txt", "content": "A\n"}}]},
            {"after_tool": "write_file", "match": "write shared first", "text": "wrote A"},
            {"match": "write shared second", "tool_calls": [{"name": "write_file", "arguments": {"path": "shared.txt", "content": "B\n"}}]},
            {"after_tool": "write_file", "match": "write shared second", "text": "could not write B"},
            // A child's approval.
            {"match": "run the checker", "tool_calls": [{"name": "shell", "arguments": {"command": "echo checked > checked.txt"}}]},
            {"after_tool": "shell", "match": "run the checker", "text": "checker ran"},
            // The reference SDK's flow (issue 32 item 7): a general-purpose child (name "").
            {"match": "general errand", "tool_calls": [{"name": "shell", "arguments": {"command": "echo general > general.txt"}}]},
            {"after_tool": "shell", "match": "general errand", "text": "errand done"},
            // Interrupt and crash: a child that hangs.
            {"match": "hang around", "delaySec": 120.0, "text": "never", "repeat": true},
            // session.setAgent: a tool outside the definition's allowlist.
            {"match": "try writing", "tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
            {"after_tool": "write_file", "match": "try writing", "text": "blocked"},
            // agent.create: the drafted definition.
            {"match": "define an agent", "text": "{\"name\": \"researcher\", \"description\": \"Researches topics\", \"model\": \"inherit\", \"tools\": \"*\", \"prompt\": \"You research things carefully.\"}"},
            {"match": "agent job task", "text": "agent job done", "repeat": true},
            // session.setAgent{guardTurn}: the model's next call comes after the switch.
            {"match": "guarded turn", "delaySec": 3.0, "tool_calls": [{"name": "write_file", "arguments": {"path": "guarded.txt", "content": "g"}}]},
            {"after_tool": "write_file", "match": "guarded turn", "text": "guarded done"}
        ],
        "default": {"text": "ok"}
    })
}

#[tokio::test]
async fn delegation_named_agents_and_their_guards_through_the_suite() {
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script()),
        ..Default::default()
    })
    .await;
    let wd = suite.workdir.path().to_path_buf();
    let wds = wd.display().to_string();
    put(
        &wd.join(".snowpea/agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews files\ntools: [read_file, grep]\nmax_turns: 5\n---\nYou review files and report problems.\n",
    );
    put(
        &wd.join(".snowpea/agents/writer.md"),
        "---\nname: writer\ndescription: Writes files\ntools: '*'\n---\nYou write what you are asked to.\n",
    );
    put(&wd.join("notes.txt"), "some notes\n");
    let c = suite.client().await;
    let (asked_tx, mut asked) = tokio::sync::mpsc::unbounded_channel::<Value>();
    // The general errand's approval waits for this gate, so its child is seen running.
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let held = gate.clone();
    c.on_request("approval.request", move |p: Value| {
        let asked_tx = asked_tx.clone();
        let held = held.clone();
        async move {
            let gated = p.to_string().contains("general.txt");
            let _ = asked_tx.send(p);
            if gated {
                let _ = held.acquire().await;
            }
            Ok(json!({"decision": "allow", "scope": "once"}))
        }
    });

    // 1. delegate_task: the child runs a tool and its result reaches the parent's model.
    let parent = c.create_session(&wd, Some("accept")).await.unwrap();
    let out = c
        .prompt_and_collect(&parent, "delegate the review", T)
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    let evs = events(&c, &parent).await;
    let kinds: Vec<&str> = evs
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| k.starts_with("subagent."))
        .collect();
    assert_eq!(kinds.first(), Some(&"subagent.spawn"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"subagent.done"), "{kinds:?}");
    assert!(kinds.contains(&"subagent.update"), "{kinds:?}");
    let done = &dones(&c, &parent).await[0];
    assert_eq!(done["ok"], true, "{done}");
    assert_eq!(done["status"], "done");
    assert_eq!(done["name"], "reviewer");
    assert_eq!(done["result"], "REVIEW: notes look fine");
    assert!(
        done["usage"]["outputTokens"].as_i64().unwrap() > 0,
        "{done}"
    );
    let child = done["sessionId"].as_str().unwrap().to_owned();
    let tool_result = evs
        .iter()
        .find(|(k, p)| k == "tool.result" && p["name"] == "delegate_task")
        .map(|(_, p)| p.clone())
        .expect("delegate_task result");
    assert_eq!(tool_result["ok"], true);
    assert_eq!(tool_result["output"], "REVIEW: notes look fine");
    // The child ran in its own session: kind subagent, parentSessionId, a read_file call.
    let listed = ok(&c, "session.list", json!({"includeClosed": true})).await;
    let row = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == child.as_str())
        .cloned()
        .expect("child session listed");
    assert_eq!(row["kind"], "subagent");
    assert_eq!(row["parentSessionId"], parent.as_str());
    assert_eq!(row["workdir"], wds.as_str());
    let child_evs = events(&c, &child).await;
    assert!(child_evs
        .iter()
        .any(|(k, p)| k == "tool.result" && p["name"] == "read_file" && p["ok"] == true));

    // 2. Four spawns under maxConcurrent 2: two queued, visible in agent.list, all done.
    let busy = c
        .create_session_with(json!({"workdir": wds, "mode": "accept", "maxConcurrent": 2}))
        .await
        .unwrap();
    let mut ids = Vec::new();
    for i in 1..=4 {
        let r = ok(
            &c,
            "agent.spawn",
            json!({"sessionId": busy, "name": "reviewer", "task": format!("slow job {i}")}),
        )
        .await;
        ids.push(r["agentId"].as_str().unwrap().to_owned());
    }
    let listed = ok(&c, "agent.list", json!({})).await;
    let rows: Vec<&Value> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "subagent" && a["parentSessionId"] == busy.as_str())
        .collect();
    assert_eq!(rows.len(), 4, "{listed}");
    assert_eq!(
        rows.iter().filter(|a| a["status"] == "queued").count(),
        2,
        "{listed}"
    );
    let spawned: Vec<Value> = events(&c, &busy)
        .await
        .into_iter()
        .filter(|(k, _)| k == "subagent.spawn")
        .map(|(_, p)| p)
        .collect();
    let statuses: Vec<&str> = spawned
        .iter()
        .map(|p| p["status"].as_str().unwrap())
        .collect();
    // Every child is announced queued (issue 32 item 7); each then reports running.
    assert_eq!(statuses, ["queued", "queued", "queued", "queued"]);
    let done = wait_dones(&c, &busy, 4).await;
    assert!(
        done.iter()
            .all(|d| d["ok"] == true && d["result"] == "slow done"),
        "{done:?}"
    );

    // 3. duplicate_task: the same (agent, task) again is refused, naming the field.
    let (code, details) = refused(
        &c,
        "agent.spawn",
        json!({"sessionId": busy, "name": "reviewer", "task": "Slow  job 1"}),
    )
    .await;
    assert_eq!(code, "invalid_params");
    assert_eq!(details["field"], "params.task");
    assert_eq!(details["reason"], "duplicate_task");

    // Bad input names the field; nothing of the parent is lost.
    let (code, details) =
        refused(&c, "agent.spawn", json!({"name": "reviewer", "task": "x"})).await;
    assert_eq!(
        (code.as_str(), &details["field"]),
        ("invalid_params", &json!("params.sessionId"))
    );
    let (_, details) = refused(
        &c,
        "agent.spawn",
        json!({"sessionId": busy, "name": "reviewer", "task": "  "}),
    )
    .await;
    assert_eq!(details["field"], "params.task");
    let (code, _) = refused(
        &c,
        "agent.spawn",
        json!({"sessionId": busy, "name": "nobody", "task": "x"}),
    )
    .await;
    assert_eq!(code, "not_found");
    let (_, details) = refused(
        &c,
        "agent.spawn",
        json!({"sessionId": busy, "name": "Bad Name", "task": "x"}),
    )
    .await;
    assert_eq!(details["field"], "params.name");
    assert_eq!(dones(&c, &busy).await.len(), 4);

    // 4. A child writing a file a sibling owns is refused file_owned_by_sibling.
    let owner = c.create_session(&wd, Some("accept")).await.unwrap();
    ok(
        &c,
        "agent.spawn",
        json!({"sessionId": owner, "name": "writer", "task": "write shared first"}),
    )
    .await
    .get("agentId")
    .expect("agentId");
    wait_dones(&c, &owner, 1).await;
    ok(
        &c,
        "agent.spawn",
        json!({"sessionId": owner, "name": "writer", "task": "write shared second"}),
    )
    .await;
    let done = wait_dones(&c, &owner, 2).await;
    assert_eq!(
        std::fs::read_to_string(wd.join("shared.txt")).unwrap(),
        "A\n"
    );
    let second = done[1]["sessionId"].as_str().unwrap().to_owned();
    let refusal = events(&c, &second)
        .await
        .into_iter()
        .find(|(k, p)| k == "error" && p["code"] == "file_owned_by_sibling")
        .map(|(_, p)| p);
    assert!(refusal.is_some(), "the sibling's write was refused");

    // 5. A child's approval reaches the parent's client, named with the child's agent.
    let approving = c.create_session(&wd, Some("accept")).await.unwrap();
    ok(
        &c,
        "agent.spawn",
        json!({"sessionId": approving, "name": "writer", "task": "run the checker"}),
    )
    .await;
    let request = snowpea_testkit::within(T, "approval.request", asked.recv())
        .await
        .expect("approval.request");
    assert!(
        request["note"]
            .as_str()
            .unwrap()
            .contains("[subagent writer]"),
        "{request}"
    );
    let done = wait_dones(&c, &approving, 1).await;
    assert_eq!(done[0]["ok"], true, "{:?}", done[0]);
    assert!(wd.join("checked.txt").exists());

    // 6. Interrupting the parent interrupts its children.
    let stopping = c.create_session(&wd, Some("accept")).await.unwrap();
    ok(
        &c,
        "agent.spawn",
        json!({"sessionId": stopping, "name": "reviewer", "task": "hang around A"}),
    )
    .await;
    snowpea_testkit::eventually(T, "child running", || async {
        let l = ok(&c, "agent.list", json!({})).await;
        l["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| {
                a["parentSessionId"] == stopping.as_str()
                    && a["status"] == "running"
                    && a["sessionId"].is_string()
            })
            .then_some(())
    })
    .await;
    c.interrupt(&stopping).await.unwrap();
    let done = wait_dones(&c, &stopping, 1).await;
    assert_eq!(done[0]["status"], "interrupted", "{:?}", done[0]);
    assert_eq!(done[0]["ok"], false);

    // 6b. The reference SDK's subagent contract (issue 32 item 7): `name: ""` runs a
    //     general-purpose child; `subagent.spawn{status:"queued"}` → `subagent.update`
    //     running → `subagent.done{ok:true}`; agent.list shows it with its parent.
    let sdk_parent = c.create_session(&wd, Some("accept")).await.unwrap();
    while asked.try_recv().is_ok() {}
    let r = ok(
        &c,
        "agent.spawn",
        json!({"name": "", "task": "general errand please", "sessionId": sdk_parent}),
    )
    .await;
    let agent_id = r["agentId"].as_str().unwrap().to_owned();
    let request = snowpea_testkit::within(T, "the general child's approval", asked.recv())
        .await
        .expect("approval.request");
    assert!(request.to_string().contains("general.txt"), "{request}");
    let listed = ok(&c, "agent.list", json!({})).await;
    let row = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agentId"] == agent_id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("the child is listed: {listed}"));
    assert_eq!(
        (
            row["kind"].as_str(),
            row["parentSessionId"].as_str(),
            row["status"].as_str()
        ),
        (Some("subagent"), Some(sdk_parent.as_str()), Some("running")),
        "{row}"
    );
    let child = row["sessionId"].as_str().expect("its session").to_owned();
    gate.add_permits(1);
    let done = wait_dones(&c, &sdk_parent, 1).await;
    assert_eq!(
        (done[0]["ok"].as_bool(), done[0]["status"].as_str()),
        (Some(true), Some("done")),
        "{:?}",
        done[0]
    );
    assert_eq!(done[0]["result"], "errand done");
    assert!(wd.join("general.txt").exists());
    let flow: Vec<(String, String)> = events(&c, &sdk_parent)
        .await
        .into_iter()
        .filter(|(k, p)| k.starts_with("subagent.") && p["agentId"] == agent_id.as_str())
        .map(|(k, p)| (k, p["status"].as_str().unwrap_or_default().to_owned()))
        .collect();
    let pair = |k: &str, s: &str| (k.to_owned(), s.to_owned());
    assert_eq!(
        flow.first(),
        Some(&pair("subagent.spawn", "queued")),
        "{flow:?}"
    );
    assert_eq!(
        flow.get(1),
        Some(&pair("subagent.update", "running")),
        "{flow:?}"
    );
    assert_eq!(
        flow.last(),
        Some(&pair("subagent.done", "done")),
        "{flow:?}"
    );
    let sessions = ok(&c, "session.list", json!({"includeClosed": true})).await;
    let row = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == child.as_str())
        .cloned()
        .expect("the child's session");
    assert_eq!(
        (row["kind"].as_str(), row["parentSessionId"].as_str()),
        (Some("subagent"), Some(sdk_parent.as_str()))
    );
    assert!(row["agent"].is_null(), "no definition: {row}");

    // 7. session.setAgent: the allowlist is enforced (tool_inactive), null clears it.
    let persona = c.create_session(&wd, Some("accept")).await.unwrap();
    let r = ok(
        &c,
        "session.setAgent",
        json!({"sessionId": persona, "agent": "reviewer"}),
    )
    .await;
    assert_eq!(
        (r["agent"].as_str(), r["guarded"].as_bool()),
        (Some("reviewer"), Some(false))
    );
    let out = c
        .prompt_and_collect(&persona, "try writing", T)
        .await
        .unwrap();
    assert!(out
        .events
        .iter()
        .any(|e| e.kind == "error" && e.payload["code"] == "tool_inactive"));
    assert!(!wd.join("x.txt").exists());
    let (_, details) = refused(
        &c,
        "session.setAgent",
        json!({"sessionId": persona, "agent": "nobody"}),
    )
    .await;
    assert_eq!(details["field"], "params.agent");
    let r = ok(
        &c,
        "session.setAgent",
        json!({"sessionId": persona, "agent": null}),
    )
    .await;
    assert!(r["agent"].is_null());
    let changed: Vec<Value> = events(&c, &persona)
        .await
        .into_iter()
        .filter(|(k, _)| k == "agent.changed")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(changed.len(), 2);
    assert_eq!(changed[0]["agent"], "reviewer");
    assert!(changed[1]["agent"].is_null());

    // 7b. guardTurn: a write the mode (auto) allows is asked of a person for the rest of the
    //     running turn, with guard "agent-switch".
    let guarded = c.create_session(&wd, Some("auto")).await.unwrap();
    while asked.try_recv().is_ok() {}
    let turn = c.prompt(&guarded, "guarded turn").await.unwrap();
    let r = ok(
        &c,
        "session.setAgent",
        json!({"sessionId": guarded, "agent": "writer", "guardTurn": true}),
    )
    .await;
    assert_eq!(r["guarded"], true, "{r}");
    let request = snowpea_testkit::within(T, "guarded approval.request", asked.recv())
        .await
        .expect("approval.request");
    assert_eq!(request["guard"], "agent-switch", "{request}");
    assert_eq!(request["tool"], "write_file", "{request}");
    snowpea_testkit::eventually(T, "guarded turn done", || async {
        events(&c, &guarded)
            .await
            .iter()
            .any(|(k, p)| k == "turn.done" && p["turnId"] == turn.as_str())
            .then_some(())
    })
    .await;
    assert!(wd.join("guarded.txt").exists());
    // No turn running: no guard.
    let r = ok(
        &c,
        "session.setAgent",
        json!({"sessionId": guarded, "agent": null, "guardTurn": true}),
    )
    .await;
    assert_eq!(r["guarded"], false, "{r}");

    // 8. A named agent keeps its session id and namespace across a restart of svc-session,
    //    and a job naming it runs in its session; a child running then ends `error`.
    let created = ok(
        &c,
        "agent.create",
        json!({"description": "define an agent for research", "named": true}),
    )
    .await;
    assert_eq!(created["name"], "researcher");
    assert!(Path::new(created["path"].as_str().unwrap()).is_file());
    let named = |l: &Value| {
        l["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["kind"] == "named" && a["name"] == "researcher")
            .cloned()
    };
    let before = named(&ok(&c, "agent.list", json!({})).await).expect("named row");
    assert_eq!(before["namespace"], "agent:researcher");
    let agent_sid = before["sessionId"].as_str().unwrap().to_owned();
    let (code, details) = refused(
        &c,
        "agent.bindChannel",
        json!({"name": "researcher", "channel": "fax:1"}),
    )
    .await;
    assert_eq!(
        (code.as_str(), &details["field"]),
        ("invalid_params", &json!("params.channel"))
    );
    // Without credentialsRef the channel uses the platform's own credential, which must exist.
    let (code, details) = refused(
        &c,
        "agent.bindChannel",
        json!({"name": "researcher", "channel": "telegram:123"}),
    )
    .await;
    assert_eq!(
        (code.as_str(), &details["field"]),
        ("invalid_params", &json!("params.credentialsRef"))
    );
    let credentials = suite.home().join("credentials.json");
    std::fs::write(&credentials, json!({"telegram": "123:fake"}).to_string()).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&credentials, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    ok(
        &c,
        "agent.bindChannel",
        json!({"name": "researcher", "channel": "telegram:123"}),
    )
    .await;
    let crashing = c.create_session(&wd, Some("accept")).await.unwrap();
    ok(
        &c,
        "agent.spawn",
        json!({"sessionId": crashing, "name": "reviewer", "task": "hang around B"}),
    )
    .await;
    snowpea_testkit::eventually(T, "child running", || async {
        let l = ok(&c, "agent.list", json!({})).await;
        l["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["parentSessionId"] == crashing.as_str() && a["status"] == "running")
            .then_some(())
    })
    .await;
    let (old, _, _) = suite.process("session");
    let out = suite.snowpea(&["supervisor", "restart", "session"]);
    assert!(out.status.success(), "{out:?}");
    suite.wait_restarted("session", old).await;
    let after = snowpea_testkit::eventually(T, "agent.list after restart", || async {
        c.call("agent.list", json!({}))
            .await
            .ok()
            .and_then(|l| named(&l))
    })
    .await;
    assert_eq!(after["sessionId"], agent_sid.as_str());
    assert_eq!(after["namespace"], "agent:researcher");
    assert_eq!(after["channels"], json!(["telegram:123"]));
    let done = wait_dones(&c, &crashing, 1).await;
    assert_eq!(done[0]["status"], "error", "{:?}", done[0]);
    assert!(done[0]["result"].as_str().unwrap().contains("restarted"));
    let listed = ok(&c, "session.list", json!({})).await;
    let row = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == agent_sid.as_str())
        .cloned()
        .expect("the named agent's session is live");
    assert_eq!(
        (row["kind"].as_str(), row["agent"].as_str()),
        (Some("agent"), Some("researcher"))
    );
    assert_eq!(row["originSurface"], "agent:researcher");

    let mut rx = c.subscribe();
    let job = ok(&c, "job.schedule", json!({"spec": "tomorrow 9am", "task": "agent job task", "agent": "researcher", "workdir": wds})).await;
    let job_id = job["jobId"].as_str().unwrap().to_owned();
    ok(&c, "job.runNow", json!({"jobId": job_id})).await;
    let finished = snowpea_testkit::within(T, "job finished", async {
        loop {
            let n = rx.recv().await.expect("notifications");
            if n.method == "job.event"
                && n.params["jobId"] == job_id.as_str()
                && n.params["kind"] != "started"
                && n.params["kind"] != "updated"
            {
                break n.params;
            }
        }
    })
    .await;
    assert_eq!(finished["kind"], "finished", "{finished}");
    assert_eq!(
        finished["payload"]["sessionId"],
        agent_sid.as_str(),
        "{finished}"
    );
    assert!(events(&c, &agent_sid)
        .await
        .iter()
        .any(|(k, p)| k == "message.done" && p["text"] == "agent job done"));

    // agent.delete: unbinds, cancels its jobs, closes its session; then it is unknown.
    ok(&c, "agent.delete", json!({"name": "researcher"})).await;
    let l = ok(&c, "agent.list", json!({})).await;
    assert!(named(&l).is_none(), "{l}");
    let jobs = ok(&c, "job.list", json!({})).await;
    let state = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["jobId"] == job_id.as_str())
        .map(|j| j["state"].clone());
    assert_eq!(state, Some(json!("cancelled")));
    let (code, _) = refused(&c, "agent.delete", json!({"name": "researcher"})).await;
    assert_eq!(code, "not_found");
}
