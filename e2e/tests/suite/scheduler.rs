//! `job.*` through the real suite over WebSocket (issue 5): every method through the gateway,
//! a run through the real svc-session (scripted provider) as a session of kind `scheduled`,
//! `job.event` kinds, a due occurrence on the real clock, kill -9 of svc-session during a
//! run, and invalid specs as `invalid_params` naming `spec`.

use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::Suite;
use snowpea_sdk::{Client, Error};
use snowpea_testkit::assert_eventually;

const T: Duration = Duration::from_secs(30);

async fn ok(c: &Client, method: &str, params: Value) -> Value {
    tokio::time::timeout(T, c.call(method, params.clone()))
        .await
        .expect("call timed out")
        .unwrap_or_else(|e| panic!("{method} {params}: {e:?}"))
}

/// A suite running the scripted model `script`, a client and its notification stream.
async fn scripted_suite(
    script: Value,
) -> (
    Suite,
    Client,
    tokio::sync::broadcast::Receiver<snowpea_sdk::Notification>,
) {
    let suite = Suite::start_with(snowpea_e2e::SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let c = suite.client().await;
    let rx = c.subscribe();
    (suite, c, rx)
}

/// The next `job.event` of `job_id` (kind, payload).
async fn job_event(
    rx: &mut tokio::sync::broadcast::Receiver<snowpea_sdk::Notification>,
    job_id: &str,
) -> (String, Value) {
    loop {
        let n = tokio::time::timeout(T, rx.recv())
            .await
            .expect("a job.event in time")
            .expect("notification stream");
        if n.method == "job.event" && n.params["jobId"] == job_id {
            return (
                n.params["kind"].as_str().unwrap().to_owned(),
                n.params["payload"].clone(),
            );
        }
    }
}

#[tokio::test]
async fn every_job_method_through_the_gateway_with_a_real_run() {
    let suite = Suite::start().await;
    let c = suite.client().await;
    let mut rx = c.subscribe();
    let workdir = suite.workdir.path().display().to_string();

    let p = ok(&c, "job.preview", json!({"spec": "매일 9시"})).await;
    assert_eq!(
        (p["kind"].as_str(), p["normalized"].as_str()),
        (Some("cron"), Some("0 9 * * *"))
    );
    assert!(p["nextRunAt"].as_str().unwrap().ends_with('Z'));

    match tokio::time::timeout(
        T,
        c.call(
            "job.schedule",
            json!({"spec": "when pigs fly", "task": "x"}),
        ),
    )
    .await
    .unwrap()
    {
        Err(Error::Rpc(e)) => {
            assert_eq!(e.code, -32602);
            assert_eq!(e.data_code.as_deref(), Some("invalid_params"));
            assert_eq!(e.data.as_ref().unwrap()["details"]["field"], "params.spec");
            assert!(e.message.contains("cannot read"), "{}", e.message);
        }
        other => panic!("expected invalid_params, got {other:?}"),
    }

    let r = ok(
        &c,
        "job.schedule",
        json!({"spec": "tomorrow 9am", "task": "say ok", "workdir": workdir, "mode": "plan"}),
    )
    .await;
    let id = r["jobId"].as_str().unwrap().to_owned();
    assert!(r["nextRunAt"].is_string());
    let jobs = ok(&c, "job.list", json!({})).await;
    let j = &jobs["jobs"][0];
    assert_eq!(
        (
            j["jobId"].as_str(),
            j["kind"].as_str(),
            j["state"].as_str(),
            j["createdVia"].as_str()
        ),
        (
            Some(id.as_str()),
            Some("once"),
            Some("scheduled"),
            Some("rpc")
        )
    );

    // job.runNow → a real unattended turn in svc-session.
    assert_eq!(ok(&c, "job.runNow", json!({"jobId": id})).await["ok"], true);
    let (k, started) = job_event(&mut rx, &id).await;
    assert_eq!(k, "started", "{started}");
    assert_eq!(started["trigger"], "runNow");
    let (k, done) = job_event(&mut rx, &id).await;
    assert_eq!(k, "finished", "{done}");
    let sid = done["sessionId"]
        .as_str()
        .expect("the run's session")
        .to_owned();
    assert_eq!(done["text"], "ok");
    // The run's session is of kind `scheduled`, with its job; a chat list leaves it out.
    let scheduled = ok(&c, "session.list", json!({"kinds": ["scheduled"]})).await;
    let run = scheduled["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == sid.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("run session {sid} listed as scheduled: {scheduled}"));
    assert_eq!(
        (
            run["kind"].as_str(),
            run["jobId"].as_str(),
            run["mode"].as_str()
        ),
        (Some("scheduled"), Some(id.as_str()), Some("plan"))
    );
    let chats = ok(&c, "session.list", json!({"kinds": ["chat"]})).await;
    assert!(!chats.to_string().contains(&sid), "{chats}");
    let j = &ok(&c, "job.list", json!({})).await["jobs"][0];
    assert_eq!(j["lastStatus"], "ok");
    assert!(j["lastRunAt"].is_string());
    assert!(
        !j["enabled"].as_bool().unwrap(),
        "a one-shot run now is spent"
    );

    let u = ok(
        &c,
        "job.update",
        json!({"jobId": id, "schedule": "every 1h", "enabled": true}),
    )
    .await;
    assert_eq!(
        (u["kind"].as_str(), u["enabled"].as_bool()),
        (Some("interval"), Some(true))
    );
    assert_eq!(job_event(&mut rx, &id).await.0, "updated");
    assert_eq!(ok(&c, "job.cancel", json!({"jobId": id})).await["ok"], true);
    assert_eq!(job_event(&mut rx, &id).await.0, "updated");
    // A cancelled job does not run now.
    match tokio::time::timeout(T, c.call("job.runNow", json!({"jobId": id})))
        .await
        .unwrap()
    {
        Err(Error::Rpc(e)) => {
            assert_eq!(e.data_code.as_deref(), Some("invalid_params"), "{e:?}");
            assert_eq!(e.data.as_ref().unwrap()["details"]["field"], "params.jobId");
        }
        other => panic!("expected invalid_params, got {other:?}"),
    }
    assert_eq!(
        ok(&c, "job.nextRunForClient", json!({"clientId": "nobody"})).await["nextRunAt"],
        Value::Null
    );

    // job.delete{deleteRuns}: the run's session goes too.
    let d = ok(&c, "job.delete", json!({"jobId": id, "deleteRuns": true})).await;
    assert_eq!(
        (d["jobId"].as_str(), d["deletedSessions"].as_i64()),
        (Some(id.as_str()), Some(1))
    );
    assert_eq!(job_event(&mut rx, &id).await.0, "deleted");
    let sessions = ok(&c, "session.list", json!({"includeClosed": true})).await;
    assert!(
        !sessions.to_string().contains(&sid),
        "run session {sid} deleted: {sessions}"
    );
    assert!(ok(&c, "job.list", json!({})).await["jobs"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_due_occurrence_fires_on_the_real_clock() {
    let suite = Suite::start().await;
    let c = suite.client().await;
    let mut rx = c.subscribe();
    let r = ok(&c, "job.schedule", json!({"spec": "every 2s", "task": "tick", "workdir": suite.workdir.path().display().to_string()})).await;
    let id = r["jobId"].as_str().unwrap().to_owned();
    let (k, p) = job_event(&mut rx, &id).await;
    assert_eq!(k, "started", "{p}");
    assert_eq!(p["trigger"], "schedule");
    assert_eq!(job_event(&mut rx, &id).await.0, "finished");
    ok(&c, "job.delete", json!({"jobId": id})).await;
}

/// The agent's `schedule_create` makes a job whose origin is the calling session and whose
/// runs use that session's mode (regression: the tool did not know its session).
#[tokio::test]
async fn schedule_create_from_a_turn_belongs_to_the_calling_session() {
    let script = json!({"steps": [
        {"match": "remind", "tool_calls": [{"name": "schedule_create", "arguments": {"spec": "tomorrow 9am", "task": "say hi"}}]},
        {"after_tool": "schedule_create", "text": "scheduled"}
    ]});
    let suite = Suite::start_with(snowpea_e2e::SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let c = suite.client().await;
    let sid = c
        .create_session(suite.workdir.path(), Some("auto"))
        .await
        .unwrap();
    let out = c
        .prompt_and_collect(&sid, "remind me tomorrow", T)
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    let res = out
        .events
        .iter()
        .find(|e| e.kind == "tool.result")
        .expect("tool.result");
    assert_eq!(res.payload["ok"], true, "{}", res.payload);
    let jobs = ok(&c, "job.list", json!({})).await;
    let job = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["createdVia"] == "tool")
        .cloned()
        .expect("a job created by the tool");
    assert_eq!(job["originSessionId"], sid.as_str(), "{job}");
    assert_eq!(job["mode"], "auto", "{job}");
}

/// kill -9 of svc-session while a run's shell is running: the run ends `failed` with a
/// reason, svc-session comes back, and the job's next occurrence still fires and finishes.
#[tokio::test]
async fn a_run_survives_svc_session_being_killed_and_the_next_occurrence_fires() {
    // The first run sleeps (the marker shows it is running); later runs finish at once.
    let script = json!({"steps": [
        {"match": "tick", "tool_calls": [{"name": "shell", "arguments": {"command": "if [ -e started ]; then echo again; else touch started; sleep 60; fi"}}]},
        {"after_tool": "shell", "text": "ticked"}
    ]});
    let (suite, c, mut rx) = scripted_suite(script).await;
    let workdir = suite.workdir.path().to_path_buf();
    let r = ok(
        &c,
        "job.schedule",
        json!({"spec": "every 2s", "task": "tick", "workdir": workdir.display().to_string(), "mode": "auto"}),
    )
    .await;
    let id = r["jobId"].as_str().unwrap().to_owned();
    let (k, first) = job_event(&mut rx, &id).await;
    assert_eq!(k, "started", "{first}");
    let run1 = first["runId"].as_str().unwrap().to_owned();
    assert_eventually!(
        within = T,
        workdir.join("started").exists(),
        "the first run's shell started"
    );

    let old = suite.kill9("session");
    let failed = loop {
        let (k, p) = job_event(&mut rx, &id).await;
        if p["runId"] == run1.as_str() {
            assert_eq!(k, "failed", "{p}");
            break p;
        }
    };
    assert_eq!(failed["lastStatus"], "error", "{failed}");
    let reason = failed["error"].as_str().unwrap_or_default();
    assert!(reason.contains("svc-session"), "a reason: {failed}");
    suite.wait_restarted("session", old).await;
    // The killed run's `sleep 60` did not outlive it: the new svc-session reaped it.
    let home_name = suite
        .home()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eventually!(
        within = T,
        shell_processes_of(&home_name).is_empty(),
        "orphaned shell commands: {:?}",
        shell_processes_of(&home_name)
    );

    // A later occurrence runs through the restarted svc-session and finishes.
    let finished = loop {
        let (k, p) = job_event(&mut rx, &id).await;
        if k == "finished" {
            break p;
        }
        assert!(
            ["started", "failed", "missed"].contains(&k.as_str()),
            "{k}: {p}"
        );
    };
    assert_ne!(finished["runId"], run1.as_str());
    assert_eq!(finished["text"], "ticked", "{finished}");
    ok(&c, "job.delete", json!({"jobId": id})).await;
}

/// kill -9 of svc-scheduler while a run's shell is still running in svc-session: the restarted
/// scheduler follows the run (svc-session `WatchRun`) and records it `finished` with its real
/// text — no second run, no `failed`. Also: an explicit `catchUpWindowMinutes: 0` over JSON is
/// kept, not replaced by the default.
#[tokio::test]
async fn a_run_survives_svc_scheduler_being_killed_and_is_recorded_finished() {
    let script = json!({"steps": [
        {"match": "nap", "tool_calls": [{"name": "shell", "arguments": {"command": "touch napping; sleep 4; echo rested"}}]},
        {"after_tool": "shell", "text": "napped"}
    ]});
    let (suite, c, mut rx) = scripted_suite(script).await;
    let workdir = suite.workdir.path().to_path_buf();
    let r = ok(
        &c,
        "job.schedule",
        json!({"spec": "tomorrow 9am", "task": "nap", "workdir": workdir.display().to_string(),
               "mode": "auto", "sessionTemplate": {"catchUpWindowMinutes": 0, "hostWaitSec": 0}}),
    )
    .await;
    let id = r["jobId"].as_str().unwrap().to_owned();
    let job = |jobs: &Value| {
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["jobId"] == id.as_str())
            .cloned()
            .unwrap()
    };
    assert_eq!(
        job(&ok(&c, "job.list", json!({})).await)["catchUpWindowMinutes"],
        0
    );
    assert_eq!(ok(&c, "job.runNow", json!({"jobId": id})).await["ok"], true);
    let (k, started) = job_event(&mut rx, &id).await;
    assert_eq!(k, "started", "{started}");
    assert_eventually!(
        within = T,
        workdir.join("napping").exists(),
        "the run's shell started"
    );

    let old = suite.kill9("scheduler");
    suite.wait_restarted("scheduler", old).await;
    // The run goes on in svc-session; the restarted scheduler records its real end.
    let deadline = tokio::time::Instant::now() + T;
    let j = loop {
        let j = match tokio::time::timeout(T, c.call("job.list", json!({}))).await {
            Ok(Ok(v)) => job(&v),
            _ => Value::Null, // the scheduler may still be starting
        };
        if j["lastStatus"].is_string() && j["state"] == "scheduled" {
            break j;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run was not recorded in time: {j}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(j["lastStatus"], "ok", "{j}");
    // One run, one session: the occurrence was not run again.
    let scheduled = ok(&c, "session.list", json!({"kinds": ["scheduled"]})).await;
    let runs: Vec<&Value> = scheduled["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["jobId"] == id.as_str())
        .collect();
    assert_eq!(runs.len(), 1, "{scheduled}");
    ok(&c, "job.delete", json!({"jobId": id})).await;
}

/// Pids of processes marked as `shell` commands of the suite whose home is named `home_name`.
fn shell_processes_of(home_name: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z');
            !zombie
                && env.split(|b| *b == 0).any(|kv| {
                    let kv = String::from_utf8_lossy(kv);
                    kv.starts_with("SNOWPEA_CHILD_OF=session@") && kv.contains(home_name)
                })
        })
        .collect()
}
