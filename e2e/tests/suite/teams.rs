//! Teams through the real suite (issue 19 part B): the scripted provider plans and runs the
//! workers' tasks in temp git repositories. One suite for the file; the scenarios use their
//! own repositories and sessions and run one after another: three workers merging
//! independent tasks (and a dependant), a scripted conflict retried twice then `failed`
//! with its dependant, an interrupted team and a kill -9 of svc-session mid-team leaving no
//! worktree or branch, a non-git workdir refused naming the field, and the guides.
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::raw::RawWs;
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::Client;
use snowpea_testkit::assert_eventually;

const LONG: Duration = Duration::from_secs(60);

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with one commit holding `files`.
fn repo(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "init"]);
}

/// Worktrees other than the main one, and `snowpea/*` branches, left in `dir`.
fn leftovers(dir: &Path) -> (Vec<String>, Vec<String>) {
    let wts: Vec<String> = git(dir, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(str::to_owned)
        .skip(1)
        .collect();
    let branches: Vec<String> = git(
        dir,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/snowpea/",
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect();
    (wts, branches)
}

fn plan(tasks: Value) -> String {
    json!({ "tasks": tasks }).to_string()
}

async fn status(client: &Client, team_id: &str) -> Value {
    client
        .call("team.status", json!({"teamId": team_id}))
        .await
        .unwrap()
}

/// Waits until the team is no longer `running`; its final status.
async fn finished(client: &Client, team_id: &str) -> Value {
    snowpea_testkit::eventually(LONG, "the team ends", || async {
        let s = status(client, team_id).await;
        (s["state"] != "running").then_some(s)
    })
    .await
}

fn task<'a>(s: &'a Value, id: &str) -> &'a Value {
    s["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["taskId"] == id)
        .unwrap_or_else(|| panic!("no task {id} in {s}"))
}

#[tokio::test]
async fn teams_merge_retry_conflicts_and_leave_no_worktrees() {
    let script = json!({
        "steps": [
            // A conflict retry: this model never resolves the markers.
            {"match": "resolve the merge conflict", "text": "I could not resolve it.", "repeat": true},
            {"match": "build the abc feature", "text": plan(json!([
                {"id": "a", "title": "write the alpha file"},
                {"id": "b", "title": "write the beta file"},
                {"id": "c", "title": "write the gamma file"},
                {"id": "d", "title": "write the delta summary", "depends_on": ["a", "b", "c"]}
            ]))},
            {"match": "write the alpha file", "tool_calls": [{"name": "write_file", "arguments": {"path": "alpha.txt", "content": "alpha\n"}}]},
            {"match": "write the beta file", "tool_calls": [{"name": "write_file", "arguments": {"path": "beta.txt", "content": "beta\n"}}]},
            {"match": "write the gamma file", "tool_calls": [{"name": "write_file", "arguments": {"path": "gamma.txt", "content": "gamma\n"}}]},
            {"match": "write the delta summary", "tool_calls": [{"name": "write_file", "arguments": {"path": "delta.txt", "content": "delta\n"}}]},
            {"match": "make the clashing change", "text": plan(json!([
                {"id": "x", "title": "put one into the shared file"},
                {"id": "y", "title": "put two into the shared file"},
                {"id": "z", "title": "follow up on the shared file", "depends_on": ["x", "y"]}
            ]))},
            {"match": "put one into the shared file", "tool_calls": [{"name": "write_file", "arguments": {"path": "shared.txt", "content": "one\n"}}]},
            {"match": "put two into the shared file", "tool_calls": [{"name": "write_file", "arguments": {"path": "shared.txt", "content": "two\n"}}]},
            {"match": "a team job to interrupt", "text": plan(json!([{"id": "h", "title": "hang for a while"}]))},
            {"match": "a team job to kill", "text": plan(json!([{"id": "k", "title": "hang for a while"}]))},
            {"match": "hang for a while", "repeat": true, "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 120"}}]}
        ],
        "default": {"text": "done"}
    });
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;

    // Three workers merge independent tasks, then the task that depends on all of them.
    let abc = suite.workdir.path().join("abc");
    repo(&abc, &[("README", "abc\n")]);
    let sid = client.create_session(&abc, Some("auto")).await.unwrap();
    let mut events = client.events(&sid);
    let r = client
        .call(
            "team.start",
            json!({"sessionId": sid, "n": 3, "task": "build the abc feature"}),
        )
        .await
        .unwrap();
    let team = r["teamId"].as_str().unwrap().to_owned();
    assert!(team.starts_with("tm") && team.len() == 10, "{team}");
    let s = finished(&client, &team).await;
    assert_eq!(s["state"], "done", "{s}");
    assert_eq!(s["workers"], 3, "{s}");
    for id in ["a", "b", "c", "d"] {
        assert_eq!(task(&s, id)["status"], "merged", "{s}");
    }
    assert_eq!(task(&s, "d")["dependsOn"], json!(["a", "b", "c"]), "{s}");
    for f in ["alpha.txt", "beta.txt", "gamma.txt", "delta.txt"] {
        assert!(abc.join(f).is_file(), "{f} merged into the lead's tree");
    }
    let merges = git(&abc, &["log", "--merges", "--format=%s"]);
    assert_eq!(merges.lines().count(), 4, "{merges}");
    assert_eq!(leftovers(&abc), (vec![], vec![]));
    assert_eq!(s["worktrees"], json!([]), "{s}");
    assert!(git(&abc, &["status", "--porcelain"]).is_empty());
    // team.task.update on every state change, ending merged, on the lead's session.
    // Each task ran as a subagent of the lead: subagent.spawn → subagent.done on its
    // session, before the task merged.
    let mut merged = std::collections::BTreeSet::new();
    let (mut spawned, mut done) = (0, 0);
    while merged.len() < 4 {
        let e = events.next(LONG).await.unwrap();
        if e.kind == "subagent.spawn" {
            spawned += 1;
        }
        if e.kind == "subagent.done" {
            assert_eq!(e.payload["ok"], true, "{e:?}");
            assert!(e.payload["sessionId"].is_string(), "{e:?}");
            done += 1;
        }
        if e.kind == "team.task.update" {
            assert_eq!(e.payload["teamId"], team.as_str(), "{e:?}");
            if e.payload["status"] == "merged" {
                assert!(e.payload["agentN"]
                    .as_i64()
                    .is_some_and(|n| (1..=3).contains(&n)));
                merged.insert(e.payload["taskId"].as_str().unwrap().to_owned());
            }
        }
    }

    assert_eq!((spawned, done), (4, 4), "one subagent per task");

    // Two tasks change the same line: whichever merges second conflicts, is re-queued to
    // its worker twice, then fails, and the task depending on it fails too.
    let clash = suite.workdir.path().join("clash");
    repo(&clash, &[("shared.txt", "base\n")]);
    let sid = client.create_session(&clash, Some("auto")).await.unwrap();
    let mut events = client.events(&sid);
    let r = client
        .call(
            "team.start",
            json!({"sessionId": sid, "n": 2, "task": "make the clashing change"}),
        )
        .await
        .unwrap();
    let team = r["teamId"].as_str().unwrap().to_owned();
    let s = finished(&client, &team).await;
    assert_eq!(s["state"], "failed", "{s}");
    let (x, y) = (task(&s, "x"), task(&s, "y"));
    let (won, lost) = if x["status"] == "merged" {
        (x, y)
    } else {
        (y, x)
    };
    assert_eq!(won["status"], "merged", "{s}");
    assert_eq!(lost["status"], "failed", "{s}");
    assert_eq!(lost["retries"], 2, "{s}");
    assert!(
        lost["conflictSummary"]
            .as_str()
            .unwrap()
            .contains("shared.txt"),
        "{s}"
    );
    assert!(
        lost["conflictHunks"].as_str().unwrap().contains("<<<<<<<"),
        "{s}"
    );
    let z = task(&s, "z");
    assert_eq!(z["status"], "failed", "{s}");
    assert!(
        z["note"]
            .as_str()
            .unwrap()
            .contains("depends on failed task"),
        "{s}"
    );
    assert_eq!(leftovers(&clash), (vec![], vec![]));
    assert!(
        git(&clash, &["status", "--porcelain"]).is_empty(),
        "the lead's tree is clean"
    );
    let lost_id = lost["taskId"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    loop {
        let e = events.next(LONG).await.unwrap();
        if e.kind == "team.task.update" && e.payload["taskId"] == lost_id.as_str() {
            let st = e.payload["status"].as_str().unwrap().to_owned();
            if st == "conflict" {
                seen.push(e.payload["retries"].as_i64().unwrap());
            }
            if st == "failed" {
                break;
            }
        }
    }
    assert_eq!(seen, vec![1, 2], "conflict updates with their retry counts");

    // Interrupting the lead's session ends the team and removes its worktrees.
    let stop = suite.workdir.path().join("stop");
    repo(&stop, &[("README", "stop\n")]);
    let sid = client.create_session(&stop, Some("auto")).await.unwrap();
    let r = client
        .call(
            "team.start",
            json!({"sessionId": sid, "n": 2, "task": "a team job to interrupt"}),
        )
        .await
        .unwrap();
    let team = r["teamId"].as_str().unwrap().to_owned();
    assert_eventually!(within = LONG, {
        let s = status(&client, &team).await;
        task(&s, "h")["status"] == "running" && s["worktrees"].as_array().unwrap().len() == 1
    });
    // agent.list shows the team (row kind `team`) and its task's subagent under the lead.
    let listed = client.call("agent.list", json!({})).await.unwrap();
    let rows = listed["agents"].as_array().unwrap();
    assert!(
        rows.iter().any(|r| r["kind"] == "team"
            && r["name"] == team.as_str()
            && r["sessionId"] == sid.as_str()
            && r["status"] == "running"),
        "{listed}"
    );
    assert!(
        rows.iter()
            .any(|r| r["kind"] == "subagent" && r["parentSessionId"] == sid.as_str()),
        "{listed}"
    );
    client.interrupt(&sid).await.unwrap();
    let s = finished(&client, &team).await;
    assert_eq!(s["state"], "interrupted", "{s}");
    assert_eq!(task(&s, "h")["status"], "failed", "{s}");
    assert_eq!(leftovers(&stop), (vec![], vec![]));

    // kill -9 of svc-session mid-team: the restarted service removes what the team left.
    let kill = suite.workdir.path().join("kill");
    repo(&kill, &[("README", "kill\n")]);
    let sid = client.create_session(&kill, Some("auto")).await.unwrap();
    let r = client
        .call(
            "team.start",
            json!({"sessionId": sid, "n": 4, "task": "a team job to kill"}),
        )
        .await
        .unwrap();
    let team = r["teamId"].as_str().unwrap().to_owned();
    assert_eventually!(within = LONG, {
        let s = status(&client, &team).await;
        task(&s, "k")["status"] == "running"
    });
    assert_eq!(leftovers(&kill).0.len(), 1, "one worker for the one task");
    let old = suite.kill9("session");
    suite.wait_restarted("session", old).await;
    let s = finished(&client, &team).await;
    assert_eq!(s["state"], "interrupted", "{s}");
    assert_eq!(task(&s, "k")["status"], "failed", "{s}");
    assert_eventually!(within = LONG, leftovers(&kill) == (vec![], vec![]));
    assert!(!kill.join(".snowpea/worktrees").exists());

    // Bad input names the field.
    let mut raw = suite.raw_hello().await;
    let plain = suite.workdir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let sid = client.create_session(&plain, Some("auto")).await.unwrap();
    let resp = raw
        .call(
            "team.start",
            json!({"sessionId": sid, "n": 2, "task": "anything"}),
        )
        .await;
    assert_eq!(RawWs::code(&resp), "invalid_params", "{resp}");
    assert!(
        resp["error"].to_string().contains("params.sessionId"),
        "{resp}"
    );
    assert!(
        resp["error"].to_string().contains("git repository"),
        "{resp}"
    );
    let resp = raw
        .call(
            "team.start",
            json!({"sessionId": sid, "n": 2, "task": "  "}),
        )
        .await;
    assert!(resp["error"].to_string().contains("params.task"), "{resp}");
    let resp = raw
        .call("team.status", json!({"teamId": "tm00000000"}))
        .await;
    assert_eq!(RawWs::code(&resp), "not_found", "{resp}");

    // Guides: set (project wins over global), get, list, delete, with teams.changed.
    let mut notes = client.subscribe();
    let g = client
        .call(
            "team.guide.set",
            json!({"team": "review", "scope": "global", "persona": "Global reviewers."}),
        )
        .await
        .unwrap();
    assert_eq!(g["guide"]["source"], "global", "{g}");
    let g = client
        .call(
            "team.guide.set",
            json!({"team": "review", "scope": "project", "workdir": abc.to_str().unwrap(),
                   "description": "Careful reviewers", "persona": "You review carefully.",
                   "routing": [{"when": "rust code", "agent": "rust-reviewer"}]}),
        )
        .await
        .unwrap();
    assert_eq!(g["guide"]["source"], "project", "{g}");
    let file = abc.join(".snowpea/teams/review.md");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("## Routing") && text.contains("- rust code -> rust-reviewer"),
        "{text}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let got = client
        .call(
            "team.guide.get",
            json!({"team": "review", "workdir": abc.to_str().unwrap()}),
        )
        .await
        .unwrap();
    assert_eq!(got["effectiveTeam"], "review");
    assert_eq!(got["guide"]["persona"], "You review carefully.", "{got}");
    assert_eq!(got["guide"]["description"], "Careful reviewers", "{got}");
    assert_eq!(
        got["guide"]["routing"],
        json!([{"agent": "rust-reviewer", "known": false, "when": "rust code"}]),
        "{got}"
    );
    let listed = client
        .call("team.guide.list", json!({"workdir": abc.to_str().unwrap()}))
        .await
        .unwrap();
    assert_eq!(listed["guides"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["guides"][0]["source"], "project", "{listed}");
    let ok = client
        .call(
            "team.guide.delete",
            json!({"team": "review", "scope": "project", "workdir": abc.to_str().unwrap()}),
        )
        .await
        .unwrap();
    assert_eq!(ok["ok"], true);
    let got = client
        .call(
            "team.guide.get",
            json!({"team": "review", "workdir": abc.to_str().unwrap()}),
        )
        .await
        .unwrap();
    assert_eq!(
        got["guide"]["source"], "global",
        "the global copy shows again: {got}"
    );
    let resp = raw
        .call(
            "team.guide.delete",
            json!({"team": "review", "scope": "project", "workdir": abc.to_str().unwrap()}),
        )
        .await;
    assert_eq!(RawWs::code(&resp), "not_found", "{resp}");
    let long = "x".repeat(8001);
    let resp = raw
        .call(
            "team.guide.set",
            json!({"team": "review", "scope": "global", "persona": long}),
        )
        .await;
    assert!(
        resp["error"].to_string().contains("params.persona"),
        "{resp}"
    );
    let resp = raw
        .call(
            "team.guide.set",
            json!({"team": "../x", "scope": "global", "persona": "p"}),
        )
        .await;
    assert!(resp["error"].to_string().contains("params.team"), "{resp}");
    let mut reasons = Vec::new();
    while reasons.len() < 3 {
        let n = snowpea_testkit::within(LONG, "teams.changed", notes.recv())
            .await
            .unwrap();
        if n.method == "teams.changed" {
            assert_eq!(n.params["team"], "review", "{:?}", n.params);
            reasons.push(n.params["reason"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(reasons, ["set", "set", "delete"]);
}
