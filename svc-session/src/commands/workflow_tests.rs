//! Workflow commands (`/ralph`, `/ultrawork`, `/deepinit`): plan and status parsing, and
//! whole command turns over the scripted provider (progress events, outcomes, bounds,
//! interrupts).

use serde_json::{json, Value};

use super::{parse_plan, parse_status, Plan};
use crate::commands::codes;
use crate::testkit::{done_reason, kinds, of_kind, Harness, Item};

#[test]
fn plans_are_read_from_json_anywhere_in_the_answer() {
    let Plan::Stories { stories, dropped } = parse_plan(
        "Here is the plan:\n```json\n{\"stories\": [{\"id\": \"A\", \"title\": \"one\"}, \"two\", {\"title\": \" \"}, {\"id\": \"A\", \"title\": \"three\"}]}\n```",
    ) else {
        panic!("no stories")
    };
    assert_eq!(dropped, 0);
    let ids: Vec<&str> = stories.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, vec!["A", "S2", "A-3"]);
    assert!(stories.iter().all(|s| s.status == "pending"));
    assert_eq!(
        parse_plan("{\"rejected\": \"too vague\"}"),
        Plan::Rejected("too vague".into())
    );
    assert!(matches!(parse_plan("no json here"), Plan::Rejected(_)));
    let many: Vec<Value> = (0..30).map(|i| json!({"title": format!("t{i}")})).collect();
    let Plan::Stories { stories, dropped } = parse_plan(&json!({ "stories": many }).to_string())
    else {
        panic!()
    };
    assert_eq!((stories.len(), dropped), (super::MAX_STORIES, 10));
}

#[test]
fn a_step_verdict_is_its_last_status_line() {
    assert_eq!(parse_status("done\nSTATUS: pass"), (true, String::new()));
    assert_eq!(
        parse_status("STATUS: pass\nthen broke it\n**Status: FAIL — tests red**"),
        (false, "tests red".into())
    );
    assert!(!parse_status("I think it works").0);
}

/// Runs `/text` from an interactive connection and returns the turn's events.
async fn run_command(h: &mut Harness, sid: &str, text: &str) -> Vec<Value> {
    let t = h.prompt(sid, text).await;
    h.until_done(&t, |_| None).await
}

fn progress(ev: &[Value]) -> Vec<(i64, Vec<String>, Option<String>)> {
    of_kind(ev, "command.progress")
        .iter()
        .map(|e| {
            let p = &e["payload"];
            (
                p["iteration"].as_i64().unwrap_or(0),
                p["stories"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|s| {
                                format!(
                                    "{}:{}",
                                    s["id"].as_str().unwrap(),
                                    s["status"].as_str().unwrap()
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                p["outcome"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test]
async fn ralph_plans_retries_a_failed_story_and_completes() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "[ralph plan]", "text": "{\"stories\": [{\"id\": \"S1\", \"title\": \"add a\"}, {\"id\": \"S2\", \"title\": \"add b\"}]}"},
            {"match": "[ralph story S1]", "text": "tried\nSTATUS: fail — tests red"},
            {"match": "[ralph story S1]", "text": "fixed\nSTATUS: pass"},
            {"match": "[ralph story S2]", "text": "STATUS: pass"}
        ],
        "default": {"text": "unexpected"}
    }))
    .await;
    let sid = h.create("accept").await;
    let ev = run_command(&mut h, &sid, "/ralph add a and b").await;
    assert_eq!(done_reason(&ev), "complete", "{:?}", kinds(&ev));
    let p = progress(&ev);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        p,
        vec![
            (0, s(&["S1:pending", "S2:pending"]), None),
            (1, s(&["S1:fail", "S2:pending"]), None),
            (2, s(&["S1:pass", "S2:pending"]), None),
            (3, s(&["S1:pass", "S2:pass"]), Some("complete".into())),
        ]
    );
    // The retry carries the failure note to the model; each step's message.user keeps the
    // command as typed, its prompt in `expansion` (issue 32 item 4).
    let steps = of_kind(&ev, "message.user");
    assert!(
        steps
            .iter()
            .all(|e| e["payload"]["text"] == "/ralph add a and b"
                && e["payload"]["expansion"]["kind"] == "command"
                && e["payload"]["expansion"]["name"] == "ralph"),
        "{steps:?}"
    );
    let users: Vec<&str> = steps
        .iter()
        .map(|e| e["payload"]["expansion"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(users.len(), 4);
    assert!(
        users[2].contains("The previous attempt failed: tests red"),
        "{}",
        users[2]
    );
    let note = of_kind(&ev, "command.progress")[1]["payload"]["stories"][0]["note"].clone();
    assert_eq!(note, "tests red");
    // Every progress event carries the turn id; the summary closes the turn.
    assert!(of_kind(&ev, "command.progress")
        .iter()
        .all(|e| e["payload"]["turnId"] == ev.last().unwrap()["payload"]["turnId"]));
    let done = of_kind(&ev, "message.done");
    let last = done.last().unwrap();
    assert_eq!(last["payload"]["role"], "system");
    assert_eq!(last["payload"]["data"]["outcome"], "complete");
}

#[tokio::test]
async fn ralph_stops_at_its_iteration_budget_and_reports_rejections() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "Task: impossible", "text": "{\"rejected\": \"cannot be done\"}"},
            {"match": "[ralph plan]", "text": "{\"stories\": [\"never passes\"]}", "repeat": true},
            {"match": "[ralph story", "text": "STATUS: fail — still broken", "repeat": true}
        ]
    }))
    .await;
    let sid = h.create("accept").await;
    let ev = run_command(&mut h, &sid, "/ralph stubborn --max-iterations=2").await;
    assert_eq!(done_reason(&ev), "complete");
    let p = progress(&ev);
    assert_eq!(p.len(), 3, "{p:?}");
    assert_eq!(p[2].0, 2);
    assert_eq!(p[2].2.as_deref(), Some("max_iterations"));
    assert_eq!(of_kind(&ev, "message.user").len(), 3, "plan + 2 iterations");

    let ev = run_command(&mut h, &sid, "/ralph impossible").await;
    assert_eq!(done_reason(&ev), "complete");
    let p = progress(&ev);
    assert_eq!(p, vec![(0, vec![], Some("rejected".into()))]);
    assert!(
        of_kind(&ev, "message.done").last().unwrap()["payload"]["text"]
            .as_str()
            .unwrap()
            .contains("cannot be done")
    );

    // Bad arguments never reach the model.
    for bad in [
        "/ralph",
        "/ralph x --max-iterations=0",
        "/ralph x --max-iterations=99",
        "/ralph x --bogus",
    ] {
        let ev = run_command(&mut h, &sid, bad).await;
        assert_eq!(done_reason(&ev), "error", "{bad}");
        assert_eq!(
            of_kind(&ev, "error")[0]["payload"]["code"],
            "invalid_params",
            "{bad}"
        );
        assert!(of_kind(&ev, "message.user").is_empty(), "{bad}");
    }
    // Workflows run model turns: not on the headless plane.
    let s = h.app.sessions.get(&sid).unwrap();
    let f = h
        .app
        .commands
        .execute(&s, "ultrawork", "x", "", true)
        .await
        .unwrap_err();
    assert_eq!(f.stable, codes::HEADLESS_UNSUPPORTED);
}

#[tokio::test]
async fn ralph_interrupted_mid_story_reports_stopped() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "[ralph plan]", "text": "{\"stories\": [\"slow one\"]}"},
            {"match": "[ralph story", "delaySec": 30, "text": "STATUS: pass"}
        ]
    }))
    .await;
    let sid = h.create("accept").await;
    let t = h.prompt(&sid, "/ralph slow").await;
    let mut events = Vec::new();
    // Interrupt once the story's step has started (its message.user is out).
    loop {
        let item = h.next().await;
        if let Item::Note(m, p) = &item {
            if m == "session.event" {
                events.push(p.clone());
                if p["kind"] == "message.user"
                    && p["payload"]["expansion"]["text"]
                        .as_str()
                        .unwrap()
                        .contains("[ralph story")
                {
                    break;
                }
            }
        }
    }
    h.app.turns.interrupt(&sid).unwrap();
    events.extend(h.until_done(&t, |_| None).await);
    assert_eq!(done_reason(&events), "interrupted");
    let p = progress(&events);
    assert_eq!(p.last().unwrap().2.as_deref(), Some("stopped"), "{p:?}");
}

#[tokio::test]
async fn ultrawork_passes_over_every_task_once_and_reports_partial() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "[ultrawork plan]", "text": "{\"stories\": [{\"id\": \"T1\", \"title\": \"one\"}, {\"id\": \"T2\", \"title\": \"two\"}, {\"id\": \"T3\", \"title\": \"three\"}]}"},
            {"match": "[ultrawork task T1]", "text": "STATUS: pass"},
            {"match": "[ultrawork task T2]", "text": "STATUS: fail — no time"}
        ],
        "default": {"text": "STATUS: pass"}
    }))
    .await;
    let sid = h.create("accept").await;
    let ev = run_command(&mut h, &sid, "/ultrawork three things --max-tasks=2").await;
    assert_eq!(done_reason(&ev), "complete");
    let p = progress(&ev);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        p,
        vec![
            (0, s(&["T1:pending", "T2:pending"]), None),
            (1, s(&["T1:pass", "T2:pending"]), None),
            (2, s(&["T1:pass", "T2:fail"]), Some("partial".into())),
        ]
    );
    let summary = of_kind(&ev, "message.done").last().unwrap()["payload"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        summary.contains("1 planned tasks past --max-tasks=2"),
        "{summary}"
    );
}

#[tokio::test]
async fn deepinit_writes_agents_md_deepest_first_and_keeps_existing_ones() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "[deepinit src]", "text": "```markdown\n# src\nThe code.\n```"},
            {"match": "[deepinit .]", "text": "# Project\nSee src/AGENTS.md"}
        ],
        "default": {"text": "unexpected"}
    }))
    .await;
    let wd = h.workdir.clone();
    std::fs::create_dir_all(wd.join("src")).unwrap();
    std::fs::write(wd.join("src/lib.rs"), "fn main() {}").unwrap();
    std::fs::write(wd.join("README.md"), "hi").unwrap();
    let sid = h.create("accept").await;
    let ev = run_command(&mut h, &sid, "/deepinit").await;
    assert_eq!(done_reason(&ev), "complete", "{:?}", kinds(&ev));
    assert_eq!(
        std::fs::read_to_string(wd.join("src/AGENTS.md")).unwrap(),
        "# src\nThe code.\n"
    );
    assert_eq!(
        std::fs::read_to_string(wd.join("AGENTS.md")).unwrap(),
        "# Project\nSee src/AGENTS.md\n"
    );
    let users: Vec<String> = of_kind(&ev, "message.user")
        .iter()
        .map(|e| {
            e["payload"]["expansion"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(users[0].starts_with("[deepinit src]"));
    assert!(
        users[1].starts_with("[deepinit .]") && users[1].contains("- src/AGENTS.md"),
        "{}",
        users[1]
    );
    // A second run keeps what exists and asks the model nothing.
    let ev = run_command(&mut h, &sid, "/deepinit").await;
    assert_eq!(done_reason(&ev), "complete");
    assert!(of_kind(&ev, "message.user").is_empty());
    assert_eq!(
        of_kind(&ev, "message.done")[0]["payload"]["data"]["kept"],
        json!(["src/AGENTS.md", "AGENTS.md"])
    );
}
