//! Service-level tests of the teams component: the planner's validation, the guide format,
//! the claim, git worktrees and merges on temp repositories, and `team.start`'s setup
//! checks on a test app.

use std::path::Path;

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::guides::{self, Guide};
use super::merge::{self, Merge};
use super::planner;
use super::worktrees;
use crate::store::teams::{self as table, TaskRow, TeamRow};
use crate::testkit::Harness;

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

fn repo(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "init"]);
}

#[test]
fn planner_answers_are_validated() {
    let ok = planner::parse(
        "```json\n{\"tasks\":[{\"id\":\"a\",\"title\":\"A\"},{\"id\":2,\"title\":\"B\",\"dependsOn\":[\"a\",\"a\"],\"detail\":\"more\"}]}\n```",
    )
    .unwrap();
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[1].id, "2");
    assert_eq!(ok[1].depends_on, vec!["a"], "duplicates dropped");
    assert_eq!(ok[1].detail, "more");
    let bare = planner::parse(r#"[{"id":"x","title":"X"}]"#).unwrap();
    assert_eq!(bare[0].id, "x");

    let err = |text: &str| planner::parse(text).unwrap_err();
    assert!(err("not json").contains("not JSON"));
    assert!(err(r#"{"tasks":[]}"#).contains("no tasks"));
    let many: Vec<_> = (0..25)
        .map(|i| json!({"id": format!("t{i}"), "title": "t"}))
        .collect();
    assert!(err(&json!({ "tasks": many }).to_string()).contains("at most 24"));
    assert!(err(r#"{"tasks":[{"id":"../x","title":"t"}]}"#).contains("tasks[0].id"));
    assert!(
        err(r#"{"tasks":[{"id":"a","title":"t"},{"id":"a","title":"u"}]}"#).contains("used twice")
    );
    assert!(err(r#"{"tasks":[{"id":"a","title":" "}]}"#).contains("tasks[0].title"));
    assert!(
        err(r#"{"tasks":[{"id":"a","title":"t","depends_on":["b"]}]}"#)
            .contains("tasks[0].depends_on[0]: unknown task")
    );
    assert!(err(r#"{"tasks":[{"id":"a","title":"t","depends_on":["a"]}]}"#).contains("itself"));
    assert!(err(
        r#"{"tasks":[{"id":"a","title":"t","depends_on":["b"]},{"id":"b","title":"u","depends_on":["a"]}]}"#
    )
    .contains("cycle"));
    // 24 is fine.
    let max: Vec<_> = (0..24)
        .map(|i| json!({"id": format!("t{i}"), "title": "t"}))
        .collect();
    assert_eq!(
        planner::parse(&json!({ "tasks": max }).to_string())
            .unwrap()
            .len(),
        24
    );
}

#[test]
fn the_planner_is_told_the_guide() {
    let g = Guide {
        description: String::new(),
        persona: "We write Rust.".into(),
        routing: vec![("docs".into(), "writer".into())],
    };
    let s = planner::system(4, Some(&g));
    assert!(
        s.contains("team of 4") && s.contains("We write Rust.") && s.contains("- docs -> writer"),
        "{s}"
    );
    assert!(!planner::system(4, None).contains("guide"));
}

#[test]
fn guides_round_trip_and_are_bounded() {
    let g = Guide {
        description: "Reviewers".into(),
        persona: "You review.\n\nCarefully.".into(),
        routing: vec![
            ("rust code".into(), "rust-reviewer".into()),
            ("docs".into(), "writer".into()),
        ],
    };
    let text = guides::render(&g);
    assert!(
        text.contains("## Routing\n\n- rust code -> rust-reviewer\n"),
        "{text}"
    );
    assert_eq!(guides::parse(&text), g);
    // The persona is what comes before `## Routing`; other headings stay in it.
    let parsed = guides::parse("Be brief.\n## Style\nShort.\n## Routing\n- a b -> x\n- junk\n");
    assert_eq!(parsed.persona, "Be brief.\n## Style\nShort.");
    assert_eq!(parsed.routing, vec![("a b".to_owned(), "x".to_owned())]);

    let bad = |g: Guide| guides::check(&g).unwrap_err().0;
    assert_eq!(
        bad(Guide {
            persona: "x".repeat(8001),
            ..Default::default()
        }),
        "params.persona"
    );
    assert!(guides::check(&Guide {
        persona: "x".repeat(8000),
        ..Default::default()
    })
    .is_ok());
    let rules = (0..31).map(|i| (format!("w{i}"), "a".to_owned())).collect();
    assert_eq!(
        bad(Guide {
            routing: rules,
            ..Default::default()
        }),
        "params.routing"
    );
    assert_eq!(
        bad(Guide {
            routing: vec![("w".into(), "Bad Agent".into())],
            ..Default::default()
        }),
        "params.routing[0].agent"
    );
    assert_eq!(
        bad(Guide {
            routing: vec![("a -> b".into(), "x".into())],
            ..Default::default()
        }),
        "params.routing[0].when"
    );
    assert!(guides::check_team("default").is_ok());
    assert!(guides::check_team("../etc").is_err());
    assert!(guides::check_team("Upper").is_err());
}

#[test]
fn a_claim_hands_each_task_to_one_worker_in_dependency_order() {
    let tmp = tempfile::tempdir().unwrap();
    let c = crate::store::open(&tmp.path().join("s.db")).unwrap();
    table::insert_team(
        &c,
        &TeamRow {
            id: "tm1".into(),
            state: "running".into(),
            workers: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let task = |id: &str, ord: i64, deps: &[&str], status: &str| TaskRow {
        team_id: "tm1".into(),
        task_id: id.into(),
        ord,
        title: id.into(),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        status: status.into(),
        ..Default::default()
    };
    table::save_task(&c, &task("a", 0, &[], "queued")).unwrap();
    table::save_task(&c, &task("b", 1, &["a"], "queued")).unwrap();
    let first = table::claim(&c, "tm1", 1).unwrap().unwrap();
    assert_eq!((first.task_id.as_str(), first.agent_n), ("a", Some(1)));
    assert_eq!(
        table::claim(&c, "tm1", 2).unwrap(),
        None,
        "b waits for a's merge"
    );
    let mut a = table::tasks(&c, "tm1").unwrap()[0].clone();
    assert_eq!(a.status, "claimed");
    a.status = "merged".into();
    table::save_task(&c, &a).unwrap();
    // A task re-queued to worker 2 is not taken by worker 1.
    let mut b = task("b", 1, &["a"], "queued");
    b.agent_n = Some(2);
    b.retries = 1;
    table::save_task(&c, &b).unwrap();
    assert_eq!(table::claim(&c, "tm1", 1).unwrap(), None);
    let got = table::claim(&c, "tm1", 2).unwrap().unwrap();
    assert_eq!((got.task_id.as_str(), got.retries), ("b", 1));
    assert_eq!(
        table::claim(&c, "tm1", 2).unwrap(),
        None,
        "claimed once only"
    );
    // A pending task whose dependencies merged is claimable before its promotion is written.
    table::save_task(&c, &task("c", 2, &["a"], "pending")).unwrap();
    assert_eq!(table::claim(&c, "tm1", 1).unwrap().unwrap().task_id, "c");
    table::save_task(&c, &task("d", 3, &["b"], "pending")).unwrap();
    assert_eq!(table::claim(&c, "tm1", 1).unwrap(), None, "b is not merged");
}

#[tokio::test]
async fn worktrees_merges_and_conflicts_on_a_real_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(tmp.path()).unwrap().join("r");
    repo(&top, &[("f.txt", "base\n"), ("g.txt", "g\n")]);
    assert_eq!(worktrees::repository(&top.join(".")).await.unwrap(), top);
    let plain = tmp.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    assert!(worktrees::repository(&plain)
        .await
        .unwrap_err()
        .contains("not in a git repository"));
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    git(&empty, &["init", "-q"]);
    assert!(worktrees::repository(&empty)
        .await
        .unwrap_err()
        .contains("no commit"));

    let base = worktrees::head(&top).await.unwrap();
    worktrees::exclude(&top).await;
    let w1 = worktrees::add(&top, "tmx", 1, &base).await.unwrap();
    let w2 = worktrees::add(&top, "tmx", 2, &base).await.unwrap();
    assert_eq!(worktrees::list(&top, "tmx").await.len(), 2);
    assert!(
        git(&top, &["status", "--porcelain"]).is_empty(),
        "worktrees are excluded"
    );
    std::fs::write(w1.join("f.txt"), "one\n").unwrap();
    std::fs::write(w2.join("f.txt"), "two\n").unwrap();
    assert!(worktrees::commit_all(&w1, "one").await.unwrap());
    assert!(worktrees::commit_all(&w2, "two").await.unwrap());
    assert!(
        !worktrees::commit_all(&w2, "nothing").await.unwrap(),
        "nothing to commit"
    );

    let b1 = worktrees::branch("tmx", 1);
    let b2 = worktrees::branch("tmx", 2);
    assert_eq!(merge::merge_into_lead(&top, &b1, "m1").await, Merge::Clean);
    // The person's uncommitted change elsewhere is never put through a merge --abort.
    std::fs::write(top.join("g.txt"), "mine\n").unwrap();
    let Merge::Conflict { files, hunks } = merge::merge_into_lead(&top, &b2, "m2").await else {
        panic!("a conflict");
    };
    assert_eq!(files, vec!["f.txt"]);
    assert!(
        hunks.contains("<<<<<<<") && hunks.contains("two"),
        "{hunks}"
    );
    assert_eq!(
        std::fs::read_to_string(top.join("f.txt")).unwrap(),
        "one\n",
        "untouched"
    );
    assert_eq!(
        std::fs::read_to_string(top.join("g.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(git(&top, &["status", "--porcelain"]), " M g.txt\n");
    git(&top, &["checkout", "--", "g.txt"]);

    // The worker resolves it in its worktree; then the lead merges cleanly.
    let lead = worktrees::head(&top).await.unwrap();
    let Merge::Conflict { files, .. } = merge::merge_lead_into(&w2, &lead, "sync").await else {
        panic!("the same conflict in the worktree");
    };
    assert_eq!(merge::markers_left(&w2, &files), vec!["f.txt"]);
    std::fs::write(w2.join("f.txt"), "one\ntwo\n").unwrap();
    assert!(merge::markers_left(&w2, &files).is_empty());
    assert!(worktrees::commit_all(&w2, "resolved").await.unwrap());
    assert_eq!(merge::merge_into_lead(&top, &b2, "m2").await, Merge::Clean);
    assert_eq!(
        std::fs::read_to_string(top.join("f.txt")).unwrap(),
        "one\ntwo\n"
    );

    worktrees::cleanup(&top, "tmx").await;
    assert!(worktrees::list(&top, "tmx").await.is_empty());
    assert!(git(&top, &["branch", "--list", "snowpea/*"])
        .trim()
        .is_empty());
    assert!(!worktrees::root(&top).exists());
}

#[tokio::test]
async fn team_start_checks_its_setup() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let teams = h.app.teams.clone();
    let ctx = snowpea_common::context::CallContext::default();
    let sid = h.create("auto").await;
    let e = teams
        .start(
            &ctx,
            pb::TeamStartParams {
                n: 3,
                session_id: sid.clone(),
                task: "do it".into(),
            },
        )
        .await
        .unwrap_err();
    let rpc = e.into_rpc();
    assert_eq!(rpc.code.wire(), "invalid_params");
    assert!(format!("{rpc:?}").contains("params.sessionId"), "{rpc:?}");
    let e = teams
        .start(
            &ctx,
            pb::TeamStartParams {
                n: 3,
                session_id: "s_nope".into(),
                task: "do it".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.into_rpc().code.wire(), "not_found");
    let e = teams
        .status(pb::TeamStatusParams::default())
        .await
        .unwrap_err();
    assert_eq!(e.into_rpc().code.wire(), "not_found");

    // In a repository, n is clamped to 1–16 and the team is recorded at once. The script has
    // no plan, so the team fails with the reason and leaves nothing behind.
    repo(&h.workdir, &[("a", "a\n")]);
    let r = teams
        .start(
            &ctx,
            pb::TeamStartParams {
                n: 100,
                session_id: sid.clone(),
                task: "do it".into(),
            },
        )
        .await
        .unwrap();
    let s = snowpea_testkit::eventually(snowpea_testkit::WAIT, "the team ends", || async {
        let s = teams
            .status(pb::TeamStatusParams {
                team_id: String::new(),
            })
            .await
            .unwrap();
        (s.state != "running").then_some(s)
    })
    .await;
    assert_eq!(s.team_id, r.team_id);
    assert_eq!(s.workers, 16);
    assert_eq!(s.state, "failed");
    // No board: one `plan` row carries the reason.
    assert_eq!(s.tasks.len(), 1, "{:?}", s.tasks);
    assert_eq!(s.tasks[0].task_id, super::PLAN_TASK_ID);
    assert_eq!(s.tasks[0].status, "failed");
    assert!(s.tasks[0].note.starts_with("no plan: "), "{:?}", s.tasks[0]);
    assert!(worktrees::list(&h.workdir, &r.team_id).await.is_empty());
}

/// Figures for docs/PERFORMANCE.md ("Teams"): a 16-worker team against the same 16 tasks
/// run one after another through the same runner (a child session and one turn each, no
/// git), with the scripted provider answering at once and after a 0.5 s think per task.
/// Run with `--ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure() {
    use std::time::{Duration, Instant};
    const N: usize = 16;
    for delay in [0.0, 0.5] {
        let mut steps = vec![json!({"match": "the measured team job", "text": json!({
            "tasks": (0..N).map(|i| json!({"id": format!("t{i:02}"), "title": format!("file-{i:02}-task")})).collect::<Vec<_>>()
        }).to_string()})];
        for i in 0..N {
            steps.push(json!({"match": format!("file-{i:02}-task"), "repeat": true, "delaySec": delay,
                "tool_calls": [{"name": "write_file", "arguments": {"path": format!("f{i:02}.txt"), "content": format!("{i}\n")}}]}));
        }
        let h = Harness::new(json!({"steps": steps, "default": {"text": "done"}})).await;
        repo(&h.workdir, &[("README", "r\n")]);
        let sid = h.create("auto").await;
        // Sequential: the same prompts, one child session and turn each, in a plain folder.
        let plain = h.workdir.parent().unwrap().join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        let runner = super::SubagentTaskRunner::new(h.app.agents.clone());
        let started = Instant::now();
        for i in 0..N {
            let r = super::TaskRunner::run(
                &runner,
                super::TaskSpec {
                    parent_session_id: sid.clone(),
                    team_id: "seq".into(),
                    title: format!("file-{i:02}-task"),
                    workdir: plain.clone(),
                    prompt: format!("Task: file-{i:02}-task"),
                    timeout: Duration::from_secs(60),
                    cancel: Default::default(),
                },
            )
            .await;
            assert!(r.ok, "{r:?}");
        }
        let sequential = started.elapsed();
        let started = Instant::now();
        let r = h
            .app
            .teams
            .start(
                &Default::default(),
                pb::TeamStartParams {
                    n: N as i64,
                    session_id: sid.clone(),
                    task: "the measured team job".into(),
                },
            )
            .await
            .unwrap();
        let s = snowpea_testkit::eventually(Duration::from_secs(600), "the team ends", || async {
            let s = h
                .app
                .teams
                .status(pb::TeamStatusParams {
                    team_id: r.team_id.clone(),
                })
                .await
                .unwrap();
            (s.state != "running").then_some(s)
        })
        .await;
        let team = started.elapsed();
        assert_eq!(s.state, "done", "{s:?}");
        assert_eq!(
            git(&h.workdir, &["log", "--merges", "--format=%s"])
                .lines()
                .count(),
            N
        );
        println!(
            "teams measure: {N} tasks, think {delay} s: sequential {:.2} s, 16-worker team {:.2} s (team − sequential {:+.2} s)",
            sequential.as_secs_f64(),
            team.as_secs_f64(),
            team.as_secs_f64() - sequential.as_secs_f64()
        );
    }
}

#[tokio::test]
async fn the_team_command_starts_and_reports_teams() {
    use crate::commands::Reply;
    let h = Harness::new(json!({"steps": [
        {"match": "tidy the readme", "text": "{\"tasks\":[{\"id\":\"r\",\"title\":\"rewrite the readme\"}]}"},
        {"match": "rewrite the readme", "tool_calls": [{"name": "write_file", "arguments": {"path": "README", "content": "tidy\n"}}]}
    ], "default": {"text": "done"}}))
    .await;
    let sid = h.create("auto").await;
    let s = h.app.sessions.get(&sid).unwrap();
    let c = &h.app.commands;
    // No team yet: the status says so, with the delegation mode.
    match c.execute(&s, "team", "", "", false).await.unwrap() {
        Reply::Done { text, data } => {
            assert!(text.contains("No team has run yet"), "{text}");
            assert_eq!(data["delegation"], false);
        }
        other => panic!("{other:?}"),
    }
    let e = c
        .execute(&s, "team", "status t-nope", "", false)
        .await
        .unwrap_err();
    assert_eq!(e.code, "not_found", "{e:?}");
    // on/off switch delegation mode; they never start a team whose task is "on".
    for (sw, on) in [("on", true), ("off", false)] {
        match c.execute(&s, "team", sw, "", false).await.unwrap() {
            Reply::Done { data, .. } => assert_eq!(data["delegation"], on),
            other => panic!("{other:?}"),
        }
    }
    let e = c
        .execute(&s, "team", "x --workers=many", "", false)
        .await
        .unwrap_err();
    assert_eq!(e.code, "invalid_params", "{e:?}");
    let e = c
        .execute(&s, "team", "tidy the readme", "", false)
        .await
        .unwrap_err();
    assert!(
        e.message.contains("params.sessionId"),
        "not a repository: {e:?}"
    );
    repo(&h.workdir, &[("README", "messy\n")]);
    let Reply::Done { data, .. } = c
        .execute(&s, "team", "tidy the readme --workers=2", "", false)
        .await
        .unwrap()
    else {
        panic!("a done reply")
    };
    let team = data["teamId"].as_str().unwrap().to_owned();
    let text = snowpea_testkit::eventually(snowpea_testkit::WAIT, "the team ends", || async {
        match c
            .execute(&s, "team", &format!("status {team}"), "", false)
            .await
        {
            Ok(Reply::Done { text, data }) if data["state"] != "running" => Some(text),
            _ => None,
        }
    })
    .await;
    assert!(
        text.contains("(done, 2 workers)") && text.contains("- r [merged] rewrite the readme"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(h.workdir.join("README")).unwrap(),
        "tidy\n"
    );
}

/// A team's tasks run as real subagents of the lead (`subagent.*` on the lead, rows in
/// `agent.list` next to the team's own row), the team's worker count is its concurrency
/// (the lead's `maxConcurrent` of 1 does not throttle 4 workers), and interrupting the
/// team interrupts them.
#[tokio::test]
async fn team_tasks_are_subagents_limited_by_the_workers_only() {
    let plan = json!({"tasks": (0..4).map(|i| json!({"id": format!("h{i}"), "title": format!("hold the line {i}")})).collect::<Vec<_>>()});
    let h = Harness::new(json!({"steps": [
        {"match": "the held team job", "text": plan.to_string()},
        {"match": "hold the line", "delaySec": 60, "text": "late", "repeat": true}
    ], "default": {"text": "ok"}}))
    .await;
    let top = h.workdir.join("held");
    repo(&top, &[("README", "r\n")]);
    let ctx = Harness::ctx("c1", Some("cli"));
    h.connect("c1", Some("cli")).await;
    let sid = h
        .app
        .sessions
        .create(
            &ctx,
            pb::SessionCreateParams {
                workdir: top.to_string_lossy().into_owned(),
                mode: Some("auto".into()),
                max_concurrent: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .session_id;
    let team = h
        .app
        .teams
        .start(
            &ctx,
            pb::TeamStartParams {
                n: 4,
                session_id: sid.clone(),
                task: "the held team job".into(),
            },
        )
        .await
        .unwrap()
        .team_id;
    let running = snowpea_testkit::eventually(
        std::time::Duration::from_secs(30),
        "four subagents of the lead running at once",
        || async {
            let rows: Vec<_> = h
                .app
                .agents
                .list()
                .await
                .unwrap()
                .agents
                .into_iter()
                .filter(|r| {
                    r.kind == "subagent"
                        && r.parent_session_id.as_deref() == Some(sid.as_str())
                        && r.status.as_deref() == Some("running")
                })
                .collect();
            (rows.len() == 4).then_some(rows)
        },
    )
    .await;
    for r in &running {
        let child = h
            .app
            .sessions
            .get(r.session_id.as_deref().unwrap())
            .unwrap();
        assert_eq!(child.row().parent_session_id.as_deref(), Some(sid.as_str()));
        assert!(child.workdir().starts_with(top.join(".snowpea/worktrees")));
    }
    let rows = h.app.teams.agent_rows().await.unwrap();
    let row = rows
        .iter()
        .find(|r| r.name == team)
        .expect("the team's row");
    assert_eq!(row.kind, "team");
    assert_eq!(row.session_id.as_deref(), Some(sid.as_str()));
    assert_eq!(row.status.as_deref(), Some("running"));
    assert_eq!(row.stages.len(), 4);

    h.app.teams.interrupt_session(&sid);
    let s = snowpea_testkit::eventually(
        std::time::Duration::from_secs(30),
        "the team interrupted",
        || async {
            let s = h
                .app
                .teams
                .status(pb::TeamStatusParams {
                    team_id: team.clone(),
                })
                .await
                .unwrap();
            (s.state != "running").then_some(s)
        },
    )
    .await;
    assert_eq!(s.state, "interrupted");
    assert!(h
        .app
        .agents
        .running()
        .iter()
        .all(|r| r.parent_session_id != sid));
    assert!(h.app.teams.agent_rows().await.unwrap().is_empty());
}
