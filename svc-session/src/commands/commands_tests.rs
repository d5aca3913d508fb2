//! Service-level tests of the command registry and command turns: parsing, the
//! confirmation rule of the headless plane, queued command turns, `/undo`, `/export`, and
//! `skill.create` drafting turns.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::{codes, parse_slash, Reply};
use crate::testkit::{done_reason, kinds, of_kind, Harness};

#[test]
fn slash_prompts_split_into_name_and_args() {
    assert_eq!(parse_slash("/plan"), Some(("plan".into(), "".into())));
    assert_eq!(
        parse_slash("  /skill read  my-skill "),
        Some(("skill".into(), "read  my-skill".into()))
    );
    assert_eq!(parse_slash("plan"), None);
    assert_eq!(parse_slash("/"), None);
    assert_eq!(parse_slash("// comment"), None);
}

#[tokio::test]
async fn the_headless_plane_needs_confirmation_for_medium_and_high_writes() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let s = h.app.sessions.get(&sid).unwrap();
    let c = &h.app.commands;
    // Refused before anything changes.
    let f = c.execute(&s, "plan", "", "", true).await.unwrap_err();
    assert_eq!(
        (f.code, f.stable),
        ("invalid_params", codes::CONFIRM_REQUIRED)
    );
    assert_eq!(s.mode().as_str(), "accept");
    // Status forms are read, so they need nothing.
    let r = c.execute(&s, "plan", "status", "", true).await.unwrap();
    assert!(matches!(r, Reply::Done { .. }));
    // high_risk: /memory forget; /skill remove.
    let f = c
        .execute(&s, "skill", "remove x", "", true)
        .await
        .unwrap_err();
    assert_eq!(f.stable, codes::CONFIRM_REQUIRED);
    // Confirmed, it runs; from an interactive client it runs without.
    c.execute(&s, "plan", "--yes", "", true).await.unwrap();
    assert_eq!(s.mode().as_str(), "plan");
    c.execute(&s, "auto", "", "", false).await.unwrap();
    assert_eq!(s.mode().as_str(), "auto");
    // Markdown commands run model turns: not on the headless plane.
    std::fs::create_dir_all(h.workdir.join(".claude/commands")).unwrap();
    std::fs::write(h.workdir.join(".claude/commands/hi.md"), "Hi $ARGUMENTS").unwrap();
    let f = c.execute(&s, "hi", "there", "", true).await.unwrap_err();
    assert_eq!(f.stable, codes::HEADLESS_UNSUPPORTED);
    match c.execute(&s, "hi", "there", "", false).await.unwrap() {
        Reply::Prompt(p) => assert_eq!(p.text, "Hi there"),
        other => panic!("{other:?}"),
    }
    // /mcp enable|disable|reconnect go to svc-mcp (not running here): a clear failure.
    let f = c
        .execute(&s, "mcp", "disable srv --yes", "", true)
        .await
        .unwrap_err();
    assert_eq!(
        (f.code, f.stable),
        ("unavailable", codes::EXECUTION_FAILED),
        "{f:?}"
    );
    let f = c
        .execute(&s, "mcp", "reconnect", "", false)
        .await
        .unwrap_err();
    assert_eq!(f.stable, codes::INVALID_ARGS);
    // Unknown commands and bad quoting.
    assert_eq!(
        c.execute(&s, "nope", "", "", false)
            .await
            .unwrap_err()
            .stable,
        codes::NOT_FOUND
    );
    assert_eq!(
        c.execute(&s, "help", "'open", "", false)
            .await
            .unwrap_err()
            .stable,
        codes::INVALID_ARGS
    );
}

#[tokio::test]
async fn a_command_on_a_busy_session_queues_behind_the_running_turn() {
    let mut h = Harness::new(json!({"steps": [{"match": "slow", "delaySec": 0.3, "text": "done"}], "default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let first = h.prompt(&sid, "slow please").await;
    let second = h.prompt(&sid, "/usage").await;
    let ev = h.until_done(&first, |_| None).await;
    assert!(
        kinds(&ev).contains(&"turn.queued".to_string()),
        "{:?}",
        kinds(&ev)
    );
    let ev = h.until_done(&second, |_| None).await;
    assert_eq!(done_reason(&ev), "complete");
    let done = of_kind(&ev, "message.done");
    assert_eq!(done[0]["payload"]["role"], "system");
    assert!(
        done[0]["payload"]["data"]["calls"].as_i64().unwrap() >= 1,
        "{done:?}"
    );
}

#[tokio::test]
async fn undo_restores_the_last_turn_and_export_writes_a_private_file() {
    let mut h = Harness::new(json!({
        "steps": [{"match": "write", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "new\n"}}]},
                  {"after_tool": "write_file", "text": "written"}],
        "default": {"text": "ok"}
    }))
    .await;
    std::fs::write(h.workdir.join("a.txt"), "old\n").unwrap();
    let sid = h.create("auto").await;
    let t = h.prompt(&sid, "write it").await;
    assert_eq!(done_reason(&h.until_done(&t, |_| None).await), "complete");
    assert_eq!(
        std::fs::read_to_string(h.workdir.join("a.txt")).unwrap(),
        "new\n"
    );
    let t = h.prompt(&sid, "/undo status").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(
        of_kind(&ev, "message.done")[0]["payload"]["data"]["dryRun"],
        true
    );
    assert_eq!(
        std::fs::read_to_string(h.workdir.join("a.txt")).unwrap(),
        "new\n"
    );
    let t = h.prompt(&sid, "/undo").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "complete", "{ev:?}");
    assert_eq!(
        std::fs::read_to_string(h.workdir.join("a.txt")).unwrap(),
        "old\n"
    );

    let t = h.prompt(&sid, "/export html --out=out/t.html").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "complete", "{ev:?}");
    let path = h.workdir.join("out/t.html");
    let html = std::fs::read_to_string(&path).unwrap();
    assert!(
        html.contains("write it") && html.contains("<html>"),
        "{html}"
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A path out of the workdir is refused.
    let t = h.prompt(&sid, "/export md --out=../x.md").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(
        of_kind(&ev, "error")[0]["payload"]["code"],
        "invalid_params"
    );
    // Nor through a symlinked folder.
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), h.workdir.join("out-link")).unwrap();
    let t = h.prompt(&sid, "/export md --out=out-link/x.md").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(
        of_kind(&ev, "error")[0]["payload"]["code"],
        "invalid_params",
        "{ev:?}"
    );
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
}

#[tokio::test]
async fn skill_create_from_a_description_drafts_validates_and_saves() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "named \"good-one\"", "text": "Here:\n```markdown\n---\nname: good-one\ndescription: Does a good thing well\n---\nDo it for $ARGUMENTS\n```"},
            {"match": "named \"bad-one\"", "text": "sorry, no file"}
        ],
        "default": {"text": "ok"}
    }))
    .await;
    let sid = h.create("accept").await;
    let wd = h.workdir.to_string_lossy().into_owned();
    let ctx = Harness::ctx("c1", Some("cli"));
    let r = h
        .app
        .turns
        .draft_skill(
            &ctx,
            pb::SkillCreateParams {
                name: "good-one".into(),
                description: Some("does a good thing".into()),
                workdir: wd.clone(),
                session_id: Some(sid.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r.session_id.as_deref(), Some(sid.as_str()));
    let ev = h.until_done(r.turn_id.as_deref().unwrap(), |_| None).await;
    assert_eq!(done_reason(&ev), "complete", "{:?}", kinds(&ev));
    let saved =
        std::fs::read_to_string(h.workdir.join(".snowpea/skills/good-one/SKILL.md")).unwrap();
    assert!(saved.starts_with("---\nname: good-one\n"), "{saved}");
    // No tools were offered to the drafting turn, and the skill is now a command.
    assert!(of_kind(&ev, "tool.call").is_empty());
    let list = h
        .app
        .commands
        .list(pb::CommandListParams {
            session_id: Some(sid.clone()),
        })
        .await
        .unwrap();
    assert!(list
        .commands
        .iter()
        .any(|c| c.name == "good-one" && c.source == "skill"));
    // Exists now: refused without force, before any turn.
    let e = h
        .app
        .turns
        .draft_skill(
            &ctx,
            pb::SkillCreateParams {
                name: "good-one".into(),
                description: Some("does a good thing".into()),
                workdir: wd.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("params.force"), "{e}");
    // A draft that is not a valid SKILL.md ends the turn in error and writes nothing.
    let r = h
        .app
        .turns
        .draft_skill(
            &ctx,
            pb::SkillCreateParams {
                name: "bad-one".into(),
                description: Some("does a bad thing".into()),
                workdir: wd.clone(),
                session_id: Some(sid.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let ev = h.until_done(r.turn_id.as_deref().unwrap(), |_| None).await;
    assert_eq!(done_reason(&ev), "error");
    assert_eq!(
        of_kind(&ev, "error")[0]["payload"]["code"],
        "invalid_params"
    );
    assert!(!h.workdir.join(".snowpea/skills/bad-one").exists());
    // Validation of name and description.
    let e = h
        .app
        .turns
        .draft_skill(
            &ctx,
            pb::SkillCreateParams {
                name: "Bad Name".into(),
                description: Some("long enough".into()),
                workdir: wd.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("params.name"), "{e}");
    let e = h
        .app
        .turns
        .draft_skill(
            &ctx,
            pb::SkillCreateParams {
                name: "ok-name".into(),
                description: Some("short".into()),
                workdir: wd,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("params.description"), "{e}");
}

/// The data of a command that succeeded.
fn data_of(r: Reply) -> serde_json::Value {
    match r {
        Reply::Done { data, .. } => data,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn model_and_effort_switch_through_the_models_component() {
    let mut h = Harness::with_settings(
        json!({"default": {"text": "ok"}}),
        json!({"models": {"default": "openai:gpt-4o"}}),
    )
    .await;
    let sid = h.create("accept").await;
    let s = h.app.sessions.get(&sid).unwrap();
    let c = h.app.commands.clone();
    // Status: what the next call uses, read even headless.
    let d = data_of(c.execute(&s, "model", "", "", true).await.unwrap());
    assert_eq!(
        (d["model"].as_str(), d["pinned"].as_bool()),
        (Some("gpt-4o"), Some(false))
    );
    // A switch needs --yes headless and changes nothing without it.
    let f = c
        .execute(&s, "model", "openai:o3", "", true)
        .await
        .unwrap_err();
    assert_eq!(f.stable, codes::CONFIRM_REQUIRED);
    assert_eq!(s.row().model, None);
    let d = data_of(
        c.execute(&s, "model", "openai:o3 --yes", "", true)
            .await
            .unwrap(),
    );
    assert_eq!(
        (d["model"].as_str(), d["pinned"].as_bool()),
        (Some("o3"), Some(true))
    );
    assert_eq!(s.row().model.as_deref(), Some("o3"));
    // The next model call uses it.
    let t = h.prompt(&sid, "hello").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(of_kind(&ev, "usage")[0]["payload"]["model"], "o3");
    // A reference to nothing configured: invalid_params naming it, the pin kept.
    let f = c
        .execute(&s, "model", "nosuchvendor", "", false)
        .await
        .unwrap_err();
    assert_eq!((f.code, f.stable), ("invalid_params", codes::INVALID_ARGS));
    assert!(f.message.contains("nosuchvendor"), "{f:?}");
    assert_eq!(s.row().model.as_deref(), Some("o3"));
    let f = c.execute(&s, "model", "a b", "", false).await.unwrap_err();
    assert_eq!(f.stable, codes::INVALID_ARGS);
    // inherit clears the pin.
    let d = data_of(c.execute(&s, "model", "inherit", "", false).await.unwrap());
    assert_eq!(
        (d["model"].as_str(), d["pinned"].as_bool()),
        (Some("gpt-4o"), Some(false))
    );

    // /effort as a command turn (on a model with effort tiers): model.changed, then the
    // reply with the pin.
    c.execute(&s, "model", "openai:o3", "", false)
        .await
        .unwrap();
    let t = h.prompt(&sid, "/effort high").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "complete", "{:?}", kinds(&ev));
    let changed = of_kind(&ev, "model.changed");
    assert_eq!(
        changed.last().unwrap()["payload"]["effort"],
        "high",
        "{:?}",
        kinds(&ev)
    );
    let d = &of_kind(&ev, "message.done")[0]["payload"]["data"];
    assert_eq!(
        (d["effort"].as_str(), d["pinned"].as_str()),
        (Some("high"), Some("high"))
    );
    assert_eq!(s.row().effort.as_deref(), Some("high"));
    let d = data_of(c.execute(&s, "effort", "status", "", true).await.unwrap());
    assert_eq!(d["effortSource"], "session");
    // A bad level: invalid_params naming it, the pin kept.
    let t = h.prompt(&sid, "/effort extreme").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "error");
    let e = &of_kind(&ev, "error")[0]["payload"];
    assert_eq!(e["code"], "invalid_params");
    assert!(e["message"].as_str().unwrap().contains("extreme"), "{e}");
    assert_eq!(s.row().effort.as_deref(), Some("high"));
    let d = data_of(c.execute(&s, "effort", "inherit", "", false).await.unwrap());
    assert!(d["pinned"].is_null(), "{d}");
    assert_eq!(s.row().effort, None);
}

#[tokio::test]
async fn compact_summarises_the_history_as_a_command_turn() {
    let mut h = Harness::with_settings(
        json!({"steps": [{"match": "conversation to summarise", "text": "SUMMARY: two chats."}], "default": {"text": "fine"}}),
        json!({"context": {"keepLastMessages": 2}}),
    )
    .await;
    let sid = h.create("accept").await;
    for text in ["first question", "second question"] {
        let t = h
            .prompt(&sid, &format!("{text} {}", "words ".repeat(200)))
            .await;
        h.until_done(&t, |_| None).await;
    }
    let t = h.prompt(&sid, "/compact keep the questions").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "complete", "{:?}", kinds(&ev));
    let k = kinds(&ev);
    let at = |kind: &str| {
        k.iter()
            .position(|x| x == kind)
            .unwrap_or_else(|| panic!("{kind}: {k:?}"))
    };
    assert!(at("compaction.started") < at("compaction") && at("compaction") < at("message.done"));
    let c = &of_kind(&ev, "compaction")[0]["payload"];
    assert_eq!(
        (c["auto"].as_bool(), c["kept"].as_i64()),
        (Some(false), Some(2))
    );
    let d = &of_kind(&ev, "message.done")[0]["payload"]["data"];
    assert_eq!(d["summaryChars"], "SUMMARY: two chats.".len());
    assert!(d["after"].as_i64() < d["before"].as_i64(), "{d}");
    let summariser = snowpea_session_llm::provider::fake_provider(&h.script)
        .unwrap()
        .received();
    assert!(summariser
        .last()
        .unwrap()
        .system
        .contains("keep the questions"));
    // The next turn starts from the summary.
    let t = h.prompt(&sid, "third question").await;
    h.until_done(&t, |_| None).await;
    let last = snowpea_session_llm::provider::fake_provider(&h.script)
        .unwrap()
        .received()
        .pop()
        .unwrap();
    assert_eq!(
        last.messages[0].content,
        "Session summary\n\nSUMMARY: two chats."
    );
    // Headless without --yes: refused, nothing compacted; an unknown option is bad args.
    let s = h.app.sessions.get(&sid).unwrap();
    let f = h
        .app
        .commands
        .execute(&s, "compact", "", "", true)
        .await
        .unwrap_err();
    assert_eq!(f.stable, codes::CONFIRM_REQUIRED);
    let t = h.prompt(&sid, "/compact --deep").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(
        of_kind(&ev, "error")[0]["payload"]["code"],
        "invalid_params"
    );
    assert!(of_kind(&ev, "compaction.started").is_empty());
    // Inside a model turn (the session_command_run tool) it is refused.
    let f = h
        .app
        .commands
        .execute(&s, "compact", "--yes", "", true)
        .await
        .unwrap_err();
    assert_eq!(f.code, "session_busy");
}

#[tokio::test]
async fn busy_writes_agent_busy_through_the_settings_component() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let s = h.app.sessions.get(&sid).unwrap();
    let c = &h.app.commands;
    let d = data_of(c.execute(&s, "busy", "", "", true).await.unwrap());
    assert_eq!(
        (d["agentBusy"].as_str(), d["source"].as_str()),
        (Some("steer"), Some("default"))
    );
    // low_write: no --yes needed; written to the global settings like settings.set.
    let d = data_of(c.execute(&s, "busy", "queue", "", true).await.unwrap());
    assert_eq!(
        (d["scope"].as_str(), d["effective"].as_str()),
        (Some("global"), Some("queue"))
    );
    let global: serde_json::Value =
        serde_json::from_slice(&std::fs::read(h.home.settings_path()).unwrap()).unwrap();
    assert_eq!(global["agent"]["busy"], "queue");
    let d = data_of(c.execute(&s, "busy", "status", "", false).await.unwrap());
    assert_eq!(
        (d["agentBusy"].as_str(), d["source"].as_str()),
        (Some("queue"), Some("global"))
    );
    // The project scope wins for this session; the global write then says so.
    let d = data_of(
        c.execute(&s, "busy", "steer --scope=project", "", false)
            .await
            .unwrap(),
    );
    assert_eq!(
        (d["effective"].as_str(), d["source"].as_str()),
        (Some("steer"), Some("project"))
    );
    let project = std::fs::read_to_string(h.workdir.join(".snowpea/settings.json")).unwrap();
    assert!(project.contains("steer"), "{project}");
    match c.execute(&s, "busy", "queue", "", false).await.unwrap() {
        Reply::Done { text, .. } => assert!(text.contains("still follows the project"), "{text}"),
        other => panic!("{other:?}"),
    }
    // Bad forms name the problem and change nothing.
    let before = std::fs::read(h.home.settings_path()).unwrap();
    for (args, needle) in [
        ("sometimes", "sometimes"),
        ("queue --scope=nowhere", "--scope"),
        ("queue --when=now", "--when"),
        ("queue steer", "one word"),
    ] {
        let f = c.execute(&s, "busy", args, "", false).await.unwrap_err();
        assert_eq!(f.stable, codes::INVALID_ARGS, "{args}");
        assert!(f.message.contains(needle), "{args}: {f:?}");
    }
    assert_eq!(std::fs::read(h.home.settings_path()).unwrap(), before);
}

#[tokio::test]
async fn allow_and_allowlist_go_through_the_allowlist_component() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let s = h.app.sessions.get(&sid).unwrap();
    let c = &h.app.commands;
    // Headless without --yes: refused, nothing stored.
    let f = c
        .execute(&s, "allow", "cargo test", "", true)
        .await
        .unwrap_err();
    assert_eq!(f.stable, codes::CONFIRM_REQUIRED);
    assert!(!h.workdir.join(".snowpea/settings.json").exists());
    // A command prefix, in the project by default.
    let d = data_of(
        c.execute(&s, "allow", "cargo test --yes", "", true)
            .await
            .unwrap(),
    );
    assert_eq!(
        (d["pattern"].as_str(), d["scope"].as_str()),
        (Some("cargo test"), Some("project"))
    );
    let project_id = d["patternId"].as_str().unwrap().to_owned();
    let project = std::fs::read_to_string(h.workdir.join(".snowpea/settings.json")).unwrap();
    assert!(
        project.contains("cargo test") && project.contains(&project_id),
        "{project}"
    );
    // A duplicate keeps its id; a bare tool name is tool:<name>.
    let d = data_of(
        c.execute(&s, "allowlist", "add 'cargo test'", "", false)
            .await
            .unwrap(),
    );
    assert_eq!(d["patternId"].as_str(), Some(project_id.as_str()));
    let d = data_of(
        c.execute(&s, "allow", "read_file --scope=session", "", false)
            .await
            .unwrap(),
    );
    assert_eq!(
        (d["pattern"].as_str(), d["scope"].as_str()),
        (Some("tool:read_file"), Some("session"))
    );
    let session_id = d["patternId"].as_str().unwrap().to_owned();
    // The list (read, headless without --yes) shows both; --scope filters.
    let d = data_of(c.execute(&s, "allowlist", "", "", true).await.unwrap());
    let ids: Vec<&str> = d["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["patternId"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&project_id.as_str()) && ids.contains(&session_id.as_str()),
        "{d}"
    );
    let d = data_of(
        c.execute(&s, "allowlist", "list --scope=session", "", true)
            .await
            .unwrap(),
    );
    assert_eq!(d["patterns"].as_array().unwrap().len(), 1, "{d}");
    // Bad patterns, scopes and ids name the problem.
    for (cmd, args, needle, code) in [
        ("allow", "tool:shell", "tool:shell", codes::INVALID_ARGS),
        ("allow", "x --scope=forever", "--scope", codes::INVALID_ARGS),
        ("allowlist", "add", "missing pattern", codes::INVALID_ARGS),
        ("allowlist", "remove", "remove <id>", codes::INVALID_ARGS),
        ("allowlist", "drop x", "drop", codes::INVALID_ARGS),
        ("allowlist", "remove al-nope", "al-nope", codes::NOT_FOUND),
    ] {
        let f = c.execute(&s, cmd, args, "", false).await.unwrap_err();
        assert_eq!(f.stable, code, "/{cmd} {args}: {f:?}");
        assert!(f.message.contains(needle), "/{cmd} {args}: {f:?}");
    }
    // remove is a medium write; confirmed, it removes.
    let f = c
        .execute(&s, "allowlist", &format!("remove {project_id}"), "", true)
        .await
        .unwrap_err();
    assert_eq!(f.stable, codes::CONFIRM_REQUIRED);
    c.execute(
        &s,
        "allowlist",
        &format!("remove {project_id} --yes"),
        "",
        true,
    )
    .await
    .unwrap();
    c.execute(&s, "allowlist", &format!("remove {session_id}"), "", false)
        .await
        .unwrap();
    let d = data_of(c.execute(&s, "allowlist", "list", "", true).await.unwrap());
    assert!(d["patterns"].as_array().unwrap().is_empty(), "{d}");
    // None of these is listed as unavailable any more.
    let list = c
        .list(pb::CommandListParams {
            session_id: Some(sid.clone()),
        })
        .await
        .unwrap();
    for name in ["model", "effort", "compact", "busy", "allow", "allowlist"] {
        let cmd = list.commands.iter().find(|x| x.name == name).unwrap();
        let schema = snowpea_proto::wkt::from_struct(cmd.args_schema.as_ref().unwrap());
        assert!(schema.get("x-available").is_none(), "{name}: {schema}");
        assert!(
            !cmd.summary.contains("unavailable"),
            "{name}: {}",
            cmd.summary
        );
    }
}

/// Figures for docs/PERFORMANCE.md ("Slash commands"); run with `--ignored --nocapture`.
#[tokio::test]
#[ignore]
async fn measure() {
    let mut h = Harness::new(json!({"default": {"text": "ok"}})).await;
    for i in 0..50 {
        let d = h.workdir.join(format!(".snowpea/skills/skill-{i:02}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("SKILL.md"), format!("---\nname: skill-{i:02}\ndescription: Skill number {i} for the measurement\n---\nbody $ARGUMENTS\n")).unwrap();
        let c = h.workdir.join(".snowpea/commands");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(
            c.join(format!("cmd-{i:02}.md")),
            "---\ndescription: a command\n---\nbody\n",
        )
        .unwrap();
    }
    let sid = h.create("accept").await;
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[((v.len() as f64 - 1.0) * p).round() as usize]
    };
    let mut list = Vec::new();
    for _ in 0..200 {
        let t = std::time::Instant::now();
        let r = h
            .app
            .commands
            .list(pb::CommandListParams {
                session_id: Some(sid.clone()),
            })
            .await
            .unwrap();
        list.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(r.commands.len() > 120);
    }
    let mut turns = Vec::new();
    for _ in 0..200 {
        let t = std::time::Instant::now();
        let id = h.prompt(&sid, "/plan status").await;
        let ev = h.until_done(&id, |_| None).await;
        turns.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(done_reason(&ev), "complete");
    }
    println!(
        "command.list (24 built-ins + 50 skills + 50 project commands): p50 {:.2} ms p99 {:.2} ms",
        pct(&mut list, 0.5),
        pct(&mut list, 0.99)
    );
    println!(
        "/plan status command turn, prompt → turn.done: p50 {:.2} ms p99 {:.2} ms",
        pct(&mut turns, 0.5),
        pct(&mut turns, 0.99)
    );
}

#[tokio::test]
async fn mode_save_keeps_the_mode_as_the_default_of_new_sessions() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("plan").await;
    let s = h.app.sessions.get(&sid).unwrap();
    let c = &h.app.commands;
    let d = data_of(c.execute(&s, "mode", "save", "", false).await.unwrap());
    assert_eq!(
        (
            d["defaultMode"].as_str(),
            d["scope"].as_str(),
            d["source"].as_str()
        ),
        (Some("plan"), Some("global"), Some("global"))
    );
    let global: serde_json::Value =
        serde_json::from_slice(&std::fs::read(h.home.settings_path()).unwrap()).unwrap();
    assert_eq!(global["permissions"]["defaultMode"], "plan");
    // session.create without a mode starts in the saved one; an explicit mode still wins.
    let create = |mode: Option<&str>| pb::SessionCreateParams {
        workdir: h.workdir.to_string_lossy().into_owned(),
        mode: mode.map(str::to_owned),
        ..Default::default()
    };
    let ctx = Harness::ctx("c1", Some("cli"));
    let fresh = h.app.sessions.create(&ctx, create(None)).await.unwrap();
    assert_eq!(
        h.app.sessions.get(&fresh.session_id).unwrap().row().mode,
        "plan"
    );
    let asked = h
        .app
        .sessions
        .create(&ctx, create(Some("auto")))
        .await
        .unwrap();
    assert_eq!(
        h.app.sessions.get(&asked.session_id).unwrap().row().mode,
        "auto"
    );
    // A project save wins for this workdir; a later global save then says so.
    let a = h.app.sessions.get(&asked.session_id).unwrap();
    let d = data_of(
        c.execute(&a, "mode", "save --scope=project", "", false)
            .await
            .unwrap(),
    );
    assert_eq!(
        (d["effective"].as_str(), d["source"].as_str()),
        (Some("auto"), Some("project"))
    );
    let fresh = h.app.sessions.create(&ctx, create(None)).await.unwrap();
    assert_eq!(
        h.app.sessions.get(&fresh.session_id).unwrap().row().mode,
        "auto"
    );
    match c.execute(&s, "mode", "save", "", false).await.unwrap() {
        Reply::Done { text, .. } => assert!(text.contains("still start in auto"), "{text}"),
        other => panic!("{other:?}"),
    }
    // Bad forms name the problem and change nothing.
    let before = std::fs::read(h.home.settings_path()).unwrap();
    for (args, needle) in [
        ("save --scope=nowhere", "--scope"),
        ("plan --scope=project", "--scope"),
        ("save plan", "one word"),
        ("save --scope=global --scope=project", "given twice"),
        ("save --scope=project --scope=global", "given twice"),
    ] {
        let f = c.execute(&s, "mode", args, "", false).await.unwrap_err();
        assert_eq!(f.stable, codes::INVALID_ARGS, "{args}");
        assert!(f.message.contains(needle), "{args}: {f:?}");
    }
    // A huge value is not echoed back whole.
    let huge = format!("save --scope={}", "z".repeat(100_000));
    let f = c.execute(&s, "mode", &huge, "", false).await.unwrap_err();
    assert_eq!(f.stable, codes::INVALID_ARGS);
    assert!(
        f.message.len() < 300 && f.message.contains('…'),
        "{} bytes",
        f.message.len()
    );
    assert_eq!(std::fs::read(h.home.settings_path()).unwrap(), before);
}

#[tokio::test]
async fn team_on_and_off_switch_delegation_mode() {
    let mut h =
        Harness::new(json!({"default": {"text": "ok", "echoSystem": true, "repeat": true}})).await;
    let sid = h.create("accept").await;
    let s = h.app.sessions.get(&sid).unwrap();
    let c = h.app.commands.clone();
    let answer = |events: &[serde_json::Value]| {
        of_kind(events, "message.done")
            .last()
            .map(|e| e["payload"]["text"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    // Off by default: the lead does the work itself.
    let d = data_of(c.execute(&s, "team", "", "", true).await.unwrap());
    assert_eq!(d["delegation"], false);
    let turn = h.prompt(&sid, "do it").await;
    let events = h.until_done(&turn, |_| None).await;
    assert!(
        !answer(&events).contains("Delegation mode"),
        "{}",
        answer(&events)
    );

    let d = data_of(c.execute(&s, "team", "on", "", false).await.unwrap());
    assert_eq!(d["delegation"], true);
    assert_eq!(
        h.app.sessions.get(&sid).unwrap().row().delegation,
        Some(true)
    );
    let changed = h.app.events.after(&sid, 0).await.unwrap();
    let changed: Vec<_> = changed
        .iter()
        .filter(|e| e.kind == "mode.changed")
        .collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].payload["delegation"], true);
    assert_eq!(
        changed[0].payload["mode"], "accept",
        "the permission mode stays"
    );
    let turn = h.prompt(&sid, "do it again").await;
    let events = h.until_done(&turn, |_| None).await;
    assert!(
        answer(&events).contains("Delegation mode"),
        "{}",
        answer(&events)
    );
    let r = h
        .app
        .sessions
        .resume(pb::SessionResumeParams {
            session_id: sid.clone(),
            after_seq: Some(i64::MAX - 1),
            locale: None,
        })
        .await
        .unwrap();
    assert!(r.delegation, "session.resume reports the pin");
    let d = data_of(c.execute(&s, "team", "status", "", true).await.unwrap());
    assert_eq!(d["delegation"], true);

    let d = data_of(c.execute(&s, "team", "OFF", "", false).await.unwrap());
    assert_eq!(
        d["delegation"], false,
        "a subcommand in capitals is the subcommand"
    );
    assert!(!h.app.sessions.delegation(&s));
    // No team is started for "on" with words after it.
    let f = c
        .execute(&s, "team", "on now", "", false)
        .await
        .unwrap_err();
    assert_eq!(f.stable, codes::INVALID_ARGS);
}

#[tokio::test]
async fn agents_delegate_by_default_starts_sessions_in_delegation_mode() {
    let h = Harness::with_settings(
        json!({"default": {"text": "ok"}}),
        json!({"agents": {"delegateByDefault": true}}),
    )
    .await;
    let r = h
        .app
        .sessions
        .create(
            &Harness::ctx("c1", Some("cli")),
            pb::SessionCreateParams {
                workdir: h.workdir.to_string_lossy().into_owned(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(r.delegation);
    let s = h.app.sessions.get(&r.session_id).unwrap();
    assert!(h.app.sessions.delegation(&s));
    // A pin wins over the setting.
    let d = data_of(
        h.app
            .commands
            .execute(&s, "team", "off", "", false)
            .await
            .unwrap(),
    );
    assert_eq!(d["delegation"], false);
    assert!(!h.app.sessions.delegation(&s));
}

/// Issue 32 item 10: bad arguments are refused before the confirmation rule asks for --yes
/// (`snowpea cmd mode save --scope=bogus` said CONFIRM_REQUIRED first).
#[tokio::test]
async fn bad_arguments_are_refused_before_the_confirmation_rule() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let s = h.app.sessions.get(&sid).unwrap();
    let c = &h.app.commands;
    for args in ["save --scope=bogus", "save --force", "plan extra", "turbo"] {
        let f = c.execute(&s, "mode", args, "", true).await.unwrap_err();
        assert_eq!(f.stable, codes::INVALID_ARGS, "/mode {args}: {f:?}");
    }
    let f = c
        .execute(&s, "mode", "save --scope=bogus", "", true)
        .await
        .unwrap_err();
    assert!(
        f.message.contains("--scope must be global or project"),
        "{f:?}"
    );
    // Good arguments still need the confirmation, and then run.
    let f = c
        .execute(&s, "mode", "save --scope=project", "", true)
        .await
        .unwrap_err();
    assert_eq!(f.stable, codes::CONFIRM_REQUIRED);
    c.execute(&s, "mode", "save --scope=project --yes", "", true)
        .await
        .unwrap();
}

/// Issue 39 item 6: `/undo status` with nothing to undo is a report, not a failure; the bare
/// command (a write) still fails NOT_FOUND.
#[tokio::test]
async fn undo_status_with_nothing_to_undo_answers_instead_of_failing() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let s = h.app.sessions.get(&sid).unwrap();
    let c = &h.app.commands;
    match c.execute(&s, "undo", "status", "", true).await.unwrap() {
        Reply::Done { text, data } => {
            assert_eq!(
                text,
                "nothing to undo: no turn of this session changed files"
            );
            assert_eq!(data["checkpointId"], serde_json::Value::Null);
            assert_eq!(data["dryRun"], true);
        }
        other => panic!("{other:?}"),
    }
    let f = c.execute(&s, "undo", "--yes", "", true).await.unwrap_err();
    assert_eq!(f.stable, codes::NOT_FOUND);
}
