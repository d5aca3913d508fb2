//! Slash commands, skills and plugins, and `snowpea cmd` through the real suite (issue 18
//! "Done means"). One suite for the file with one scripted provider: the scenarios use their
//! own sessions (and workdirs where files matter) and run one after another.
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::{Client, SessionEvent};

const LONG: Duration = Duration::from_secs(60);

const SKILL_MD: &str = "---\nname: pea-helper\ndescription: Helps with peas in a scripted test\n---\nPEA-SKILL-BODY: explain peas for $ARGUMENTS\n";

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Runs a command turn (`command.run`) and returns its events through `turn.done`.
async fn run(client: &Client, sid: &str, name: &str, args: &str) -> (Vec<SessionEvent>, String) {
    let mut events = client.events(sid);
    let r = client
        .call(
            "command.run",
            json!({"sessionId": sid, "name": name, "args": args}),
        )
        .await
        .unwrap();
    let turn_id = r["turnId"].as_str().expect("turnId").to_owned();
    let done = events.wait_for_turn_done(&turn_id, LONG).await.unwrap();
    (done.events, done.reason.unwrap_or_default())
}

/// Prompts (`session.prompt`) and returns the turn's events and reason.
async fn prompt(client: &Client, sid: &str, text: &str) -> (Vec<SessionEvent>, String) {
    let out = client.prompt_and_collect(sid, text, LONG).await.unwrap();
    (out.events, out.reason.unwrap_or_default())
}

fn kinds(events: &[SessionEvent]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

fn first<'a>(events: &'a [SessionEvent], kind: &str) -> &'a Value {
    &events
        .iter()
        .find(|e| e.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:?}", kinds(events)))
        .payload
}

async fn mode_of(client: &Client, sid: &str) -> String {
    let list = client.call("session.list", json!({})).await.unwrap();
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == sid)
        .unwrap()["mode"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn session(client: &Client, workdir: &Path) -> String {
    client
        .create_session(workdir, Some("accept"))
        .await
        .unwrap()
}

/// `snowpea cmd <args> --home <home>` run in `cwd`.
fn cmd(suite: &Suite, cwd: &Path, args: &[&str]) -> Output {
    Command::new(snowpea_e2e::bin_dir().join("snowpea"))
        .arg("cmd")
        .args(args)
        .arg("--home")
        .arg(suite.home())
        .current_dir(cwd)
        .output()
        .expect("run snowpea cmd")
}

fn json_of(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.trim().lines().count(),
        1,
        "exactly one JSON line: {text}"
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A `.tar` whose one entry is named `name` verbatim (no path checks on the way in).
fn raw_tar(name: &str, body: &[u8]) -> Vec<u8> {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    h[124..135].copy_from_slice(format!("{:011o}", body.len()).as_bytes());
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|b| *b as u32).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(body);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out.extend_from_slice(&[0u8; 1024]);
    out
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push((p, b));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn slash_commands_skills_plugins_and_snowpea_cmd() {
    let script = json!({
        "steps": [
            {"match": "Say hello to Bob", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "forbidden.txt", "content": "no\n"}}
            ]},
            {"after_tool": "write_file", "match": "Say hello to Bob", "text": "hello Bob"},
            {"match": "PEA-SKILL-BODY", "tool_calls": [{"name": "skill_view", "arguments": {"name": "pea-helper"}}]},
            {"after_tool": "skill_view", "text": "used the pea skill"}
        ],
        "default": {"text": "ok"}
    });
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let wd = suite.workdir.path().to_path_buf();

    // --- /plan through session.prompt: mode.changed, a system message, no model call.
    let sid = session(&client, &wd).await;
    let (ev, reason) = prompt(&client, &sid, "/plan").await;
    assert_eq!(reason, "complete", "{:?}", kinds(&ev));
    assert_eq!(first(&ev, "mode.changed")["mode"], "plan");
    assert_eq!(first(&ev, "message.done")["role"], "system");
    assert!(
        !kinds(&ev).contains(&"usage"),
        "no model call: {:?}",
        kinds(&ev)
    );
    assert_eq!(mode_of(&client, &sid).await, "plan");
    // and back through command.run, the same path.
    let (ev, reason) = run(&client, &sid, "accept", "").await;
    assert_eq!(reason, "complete");
    assert_eq!(first(&ev, "mode.changed")["mode"], "accept");
    assert_eq!(first(&ev, "message.done")["data"]["mode"], "accept");

    // --- /compact through the command path: session.compact as the command's turn (only
    // command turns so far: nothing to summarise, so no model call).
    let (ev, reason) = run(&client, &sid, "compact", "").await;
    assert_eq!(reason, "complete", "{:?}", kinds(&ev));
    let k = kinds(&ev);
    assert!(
        k.contains(&"compaction.started") && k.contains(&"compaction"),
        "{k:?}"
    );
    assert_eq!(first(&ev, "compaction")["auto"], false);
    assert!(first(&ev, "message.done")["data"]["before"].is_number());
    assert!(!k.contains(&"usage"));

    // --- An unknown command: error{not_found} + turn.done{error}, no model call.
    let (ev, reason) = prompt(&client, &sid, "/no-such-command with args").await;
    assert_eq!(reason, "error");
    assert_eq!(first(&ev, "error")["code"], "not_found");
    assert_eq!(first(&ev, "error")["commandCode"], "NOT_FOUND");
    let k = kinds(&ev);
    assert!(
        !k.contains(&"usage") && !k.contains(&"message.delta") && !k.contains(&"message.user"),
        "{k:?}"
    );
    // Bad arguments: invalid_params.
    let (ev, reason) = run(&client, &sid, "plan", "sideways").await;
    assert_eq!(
        (reason.as_str(), first(&ev, "error")["code"].as_str()),
        ("error", Some("invalid_params"))
    );

    // --- A project command with $ARGUMENTS and allowed-tools enforced.
    put(
        &wd.join(".snowpea/commands/greet.md"),
        "---\ndescription: Greets someone\nargument-hint: <name>\nallowed-tools: read_file, list_dir\n---\nSay hello to $ARGUMENTS\n",
    );
    let list = client
        .call("command.list", json!({"sessionId": sid}))
        .await
        .unwrap();
    let greet = list["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "greet")
        .expect("greet listed")
        .clone();
    assert_eq!(greet["source"], "project");
    assert_eq!(greet["summary"], "Greets someone");
    let plan_row = list["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "plan")
        .unwrap()
        .clone();
    assert_eq!(
        (
            plan_row["source"].as_str(),
            plan_row["argsSchema"]["x-risk"].as_str()
        ),
        (Some("builtin"), Some("medium_write"))
    );
    let (ev, reason) = prompt(&client, &sid, "/greet Bob").await;
    assert_eq!(reason, "complete", "{:?}", kinds(&ev));
    // `text` as typed, the body the model got in `expansion` (issue 32 item 4).
    let user = first(&ev, "message.user");
    assert_eq!(user["text"], "/greet Bob");
    assert_eq!(
        user["expansion"],
        json!({"kind": "command", "name": "greet", "text": "Say hello to Bob"})
    );
    let result = first(&ev, "tool.result");
    assert_eq!(
        result["ok"], false,
        "write_file is not in allowed-tools: {result}"
    );
    assert!(
        result["output"].as_str().unwrap().contains("allowed-tools"),
        "{result}"
    );
    assert!(!wd.join("forbidden.txt").exists());
    assert_eq!(first(&ev, "message.done")["text"], "hello Bob");

    // --- Skills: install from a local path, list, read, use in a turn, remove.
    let src = tempfile::tempdir().unwrap();
    put(&src.path().join("pea-helper/SKILL.md"), SKILL_MD);
    let mut changed = client.subscribe();
    client
        .call(
            "skill.install",
            json!({"source": src.path().join("pea-helper").to_string_lossy()}),
        )
        .await
        .unwrap();
    // Each install reloads and broadcasts the command table.
    let note = snowpea_testkit::within(LONG, "commands.changed", async {
        loop {
            let n = changed.recv().await.unwrap();
            if n.method == "commands.changed" {
                return n.params;
            }
        }
    })
    .await;
    assert_eq!(note["reason"], "skill.install");
    assert!(note["commands"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "pea-helper"));
    let installed = suite
        .home()
        .join("plugins/pea-helper/skills/pea-helper/SKILL.md");
    assert_eq!(std::fs::read_to_string(&installed).unwrap(), SKILL_MD);
    assert_eq!(
        std::fs::metadata(&installed).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let skills = client.call("skill.list", json!({})).await.unwrap();
    let row = skills["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "pea-helper" && s["kind"] == "skill")
        .expect("listed")
        .clone();
    assert_eq!(row["source"], "plugin:pea-helper");
    let read = client
        .call(
            "skill.read",
            json!({"name": "pea-helper", "workdir": wd.to_string_lossy()}),
        )
        .await
        .unwrap();
    assert_eq!(
        (read["content"].as_str(), read["scope"].as_str()),
        (Some(SKILL_MD), Some("global"))
    );
    // Used by a turn: /pea-helper runs its body; the model loads it with skill_view.
    let (ev, reason) = prompt(&client, &sid, "/pea-helper sugar snaps").await;
    assert_eq!(reason, "complete", "{:?}", kinds(&ev));
    let user = first(&ev, "message.user");
    assert_eq!(user["text"], "/pea-helper sugar snaps");
    assert_eq!(
        (
            user["expansion"]["kind"].as_str(),
            user["expansion"]["name"].as_str()
        ),
        (Some("skill"), Some("pea-helper"))
    );
    assert!(user["expansion"]["text"]
        .as_str()
        .unwrap()
        .contains("PEA-SKILL-BODY: explain peas for sugar snaps"));
    let viewed = first(&ev, "tool.result");
    assert_eq!(viewed["name"], "skill_view");
    assert!(
        viewed["output"]
            .as_str()
            .unwrap()
            .contains("PEA-SKILL-BODY"),
        "{viewed}"
    );
    client
        .call("skill.remove", json!({"name": "pea-helper"}))
        .await
        .unwrap();
    assert!(!suite.home().join("plugins/pea-helper").exists());
    let skills = client.call("skill.list", json!({})).await.unwrap();
    assert!(!skills["skills"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["name"] == "pea-helper"));
    let gone = client
        .call("skill.remove", json!({"name": "pea-helper"}))
        .await
        .unwrap_err();
    assert_eq!(gone.code_str(), Some("not_found"));

    // From a local git repository (a Claude-Code-layout plugin).
    let repo = tempfile::tempdir().unwrap();
    put(
        &repo.path().join("plugin.json"),
        r#"{"name": "git-plug", "description": "a plugin from git"}"#,
    );
    put(
        &repo.path().join("skills/git-skill/SKILL.md"),
        "---\nname: git-skill\ndescription: A skill that came from git\n---\nGIT-SKILL\n",
    );
    put(
        &repo.path().join("commands/git-cmd.md"),
        "---\ndescription: A command from the git plugin\n---\nGIT-CMD $ARGUMENTS\n",
    );
    git(repo.path(), &["init", "-q"]);
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "plugin"]);
    client
        .call(
            "skill.install",
            json!({"source": format!("file://{}", repo.path().display())}),
        )
        .await
        .unwrap();
    let skills = client.call("skill.list", json!({})).await.unwrap();
    let names: Vec<(String, String)> = skills["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for want in [
        ("git-plug", "plugin"),
        ("git-skill", "skill"),
        ("git-cmd", "command"),
    ] {
        assert!(
            names.contains(&(want.0.to_owned(), want.1.to_owned())),
            "{want:?} in {names:?}"
        );
    }
    assert!(!suite.home().join("plugins/git-plug/.git").exists());
    let list = client.call("command.list", json!({})).await.unwrap();
    let git_cmd = list["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "git-cmd")
        .expect("plugin command listed")
        .clone();
    assert_eq!(git_cmd["source"], "plugin:git-plug");
    client
        .call("skill.remove", json!({"name": "git-plug"}))
        .await
        .unwrap();

    // A malformed skill is listed with its error, never dropped.
    put(
        &wd.join(".snowpea/skills/broken/SKILL.md"),
        "---\nname: [unclosed\n---\nbody\n",
    );
    let skills = client.call("skill.list", json!({})).await.unwrap();
    let broken = skills["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "broken")
        .expect("broken listed")
        .clone();
    assert!(
        broken["summary"]
            .as_str()
            .unwrap()
            .starts_with("error: frontmatter"),
        "{broken}"
    );

    // --- A plugin archive that would write outside its folder is refused; nothing lands.
    let arch = tempfile::tempdir().unwrap();
    let tar_path = arch.path().join("evil.tar");
    std::fs::File::create(&tar_path)
        .unwrap()
        .write_all(&raw_tar("../escaped.txt", b"gotcha\n"))
        .unwrap();
    let before = snapshot(suite.home());
    let err = client
        .call(
            "skill.install",
            json!({"source": tar_path.to_string_lossy()}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code_str(), Some("invalid_params"), "{err}");
    assert!(
        err.to_string().contains("outside the plugin folder"),
        "{err}"
    );
    assert!(
        !suite.home().join("escaped.txt").exists()
            && !suite.home().join("plugins/escaped.txt").exists()
    );
    let plugins: Vec<_> = std::fs::read_dir(suite.home().join("plugins"))
        .unwrap()
        .flatten()
        .collect();
    assert!(
        plugins.is_empty(),
        "nothing staged or installed: {plugins:?}"
    );
    let after: Vec<_> = snapshot(suite.home())
        .into_iter()
        .filter(|(p, _)| {
            !p.starts_with(suite.home().join("logs")) && !p.to_string_lossy().contains(".db")
        })
        .collect();
    let before: Vec<_> = before
        .into_iter()
        .filter(|(p, _)| {
            !p.starts_with(suite.home().join("logs")) && !p.to_string_lossy().contains(".db")
        })
        .collect();
    assert_eq!(
        after.iter().map(|x| &x.0).collect::<Vec<_>>(),
        before.iter().map(|x| &x.0).collect::<Vec<_>>()
    );

    // --- skill.search: one marketplace answers, one cannot be reached.
    let market = tempfile::tempdir().unwrap();
    put(
        &market.path().join(".claude-plugin/marketplace.json"),
        r#"{"name": "m", "plugins": [{"name": "pea-tools", "description": "Tools for peas", "source": "./pea-tools"}, {"name": "other", "description": "unrelated"}]}"#,
    );
    put(&suite.home().join("marketplaces.json"), &json!({"local": market.path().to_string_lossy(), "dead": "http://127.0.0.1:9/marketplace.json"}).to_string());
    let found = client
        .call("skill.search", json!({"query": "pea"}))
        .await
        .unwrap();
    let skills = found["skills"].as_array().unwrap();
    assert_eq!(skills.len(), 1, "{found}");
    assert_eq!(
        (
            skills[0]["name"].as_str(),
            skills[0]["installSpec"].as_str()
        ),
        (Some("pea-tools"), Some("local/pea-tools"))
    );
    let unavailable = found["unavailable"].as_array().unwrap();
    assert_eq!(unavailable.len(), 1, "{found}");
    assert!(
        unavailable[0].as_str().unwrap().starts_with("dead: "),
        "{found}"
    );
    // ... and installs by <marketplace>/<plugin>.
    put(
        &market.path().join("pea-tools/plugin.json"),
        r#"{"name": "pea-tools"}"#,
    );
    put(
        &market.path().join("pea-tools/skills/pt/SKILL.md"),
        "---\nname: pt\ndescription: pea tools skill\n---\nPT\n",
    );
    client
        .call("skill.install", json!({"source": "local/pea-tools"}))
        .await
        .unwrap();
    let found = client
        .call("skill.search", json!({"query": "pea"}))
        .await
        .unwrap();
    assert_eq!(found["skills"][0]["installed"], true, "{found}");
    client
        .call("skill.remove", json!({"name": "pea-tools"}))
        .await
        .unwrap();

    // --- snowpea cmd, driven as a subprocess.
    let cmd_sid = session(&client, &wd).await;
    let nowhere = tempfile::tempdir().unwrap();
    // Without --yes a medium_write is refused and changes nothing.
    let out = cmd(
        &suite,
        nowhere.path(),
        &["plan", "--session", &cmd_sid, "--json"],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v = json_of(&out);
    assert_eq!(
        (v["ok"].as_bool(), v["code"].as_str(), v["risk"].as_str()),
        (Some(false), Some("CONFIRM_REQUIRED"), Some("medium_write")),
        "{v}"
    );
    assert_eq!(mode_of(&client, &cmd_sid).await, "accept");
    // With --yes it runs.
    let out = cmd(
        &suite,
        nowhere.path(),
        &["plan", "--yes", "--session", &cmd_sid, "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = json_of(&out);
    assert_eq!(
        (
            v["ok"].as_bool(),
            v["command"].as_str(),
            v["data"]["mode"].as_str()
        ),
        (Some(true), Some("plan"), Some("plan")),
        "{v}"
    );
    assert_eq!(mode_of(&client, &cmd_sid).await, "plan");
    // Human-readable, status form (read, no --yes needed).
    let out = cmd(
        &suite,
        nowhere.path(),
        &["plan", "status", "--session", &cmd_sid],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "mode: plan");
    // Failures: unknown command, no session, bad usage, a model-turn command.
    let out = cmd(
        &suite,
        nowhere.path(),
        &["no-such", "--session", &cmd_sid, "--json"],
    );
    assert_eq!(
        (
            out.status.code(),
            json_of(&out)["code"].as_str().map(str::to_owned)
        ),
        (Some(1), Some("NOT_FOUND".into()))
    );
    let out = cmd(&suite, nowhere.path(), &["usage", "--json"]);
    assert_eq!(
        (
            out.status.code(),
            json_of(&out)["code"].as_str().map(str::to_owned)
        ),
        (Some(1), Some("SESSION_REQUIRED".into()))
    );
    let out = cmd(&suite, nowhere.path(), &["--json"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = cmd(
        &suite,
        nowhere.path(),
        &["greet", "Ann", "--session", &cmd_sid, "--json"],
    );
    assert_eq!(
        (
            out.status.code(),
            json_of(&out)["code"].as_str().map(str::to_owned)
        ),
        (Some(1), Some("HEADLESS_UNSUPPORTED".into()))
    );
    let out = cmd(&suite, nowhere.path(), &["plan", "--session", &cmd_sid]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("CONFIRM_REQUIRED"),
        "{out:?}"
    );
    // --workdir uses (or creates) the directory's session.
    let out = cmd(
        &suite,
        nowhere.path(),
        &["usage", "--workdir", &wd.to_string_lossy(), "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // /mcp through svc-mcp: disable and enable a configured server (medium_write, --yes).
    let faulty =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../svc-mcp/tests/mcp-servers/faulty.py");
    if faulty.exists() && Command::new("python3").arg("--version").output().is_ok() {
        let added = client
            .call("mcp.add", json!({"name": "f", "command": "python3", "args": [faulty.to_string_lossy(), "ok"], "permission": "network"}))
            .await
            .unwrap();
        assert_eq!(added["ok"], true, "{added}");
        let state = |want: &'static str| {
            let (suite, cwd, sid) = (&suite, nowhere.path().to_path_buf(), cmd_sid.clone());
            async move {
                snowpea_testkit::eventually(LONG, &format!("/mcp status shows f {want}"), || {
                    let cwd = cwd.clone();
                    let sid = sid.clone();
                    async move {
                        let v = json_of(&cmd(suite, &cwd, &["mcp", "--session", &sid, "--json"]));
                        let f = v["data"]["servers"]
                            .as_array()?
                            .iter()
                            .find(|s| s["name"] == "f")
                            .cloned();
                        match (want, f) {
                            ("gone", None) => Some(()),
                            ("ready", Some(f)) if f["state"] == "ready" => Some(()),
                            _ => None,
                        }
                    }
                })
                .await
            }
        };
        state("ready").await;
        let out = cmd(
            &suite,
            nowhere.path(),
            &[
                "mcp",
                "disable",
                "f",
                "--yes",
                "--session",
                &cmd_sid,
                "--json",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(json_of(&out)["command"], "mcp.disable");
        state("gone").await;
        let out = cmd(
            &suite,
            nowhere.path(),
            &[
                "mcp",
                "enable",
                "f",
                "--yes",
                "--session",
                &cmd_sid,
                "--json",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        state("ready").await;
        let out = cmd(
            &suite,
            nowhere.path(),
            &[
                "mcp",
                "reconnect",
                "f",
                "--yes",
                "--session",
                &cmd_sid,
                "--json",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let out = cmd(
            &suite,
            nowhere.path(),
            &[
                "mcp",
                "disable",
                "nope",
                "--yes",
                "--session",
                &cmd_sid,
                "--json",
            ],
        );
        assert_eq!(
            (
                out.status.code(),
                json_of(&out)["code"].as_str().map(str::to_owned)
            ),
            (Some(1), Some("NOT_FOUND".into())),
            "{out:?}"
        );
        client
            .call("mcp.remove", json!({"name": "f"}))
            .await
            .unwrap();
    }
    // Not running: a clear message and exit 3.
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(snowpea_e2e::bin_dir().join("snowpea"))
        .args(["cmd", "help", "--json", "--home"])
        .arg(empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(json_of(&out)["message"]
        .as_str()
        .unwrap()
        .contains("not running"));
    // --help lists every built-in with its risk.
    let out = cmd(&suite, nowhere.path(), &["--help"]);
    let help = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0));
    let all = client.call("command.list", json!({})).await.unwrap();
    for c in all["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["source"] == "builtin")
    {
        let name = c["name"].as_str().unwrap();
        assert!(help.contains(name), "--help lists {name}:\n{help}");
    }
    for tier in ["read", "low_write", "medium_write", "high_risk"] {
        assert!(help.contains(tier), "--help shows {tier}");
    }

    // --- The contract walk: session-command list, then every command's status form without
    // --yes, every write tier without --yes refused with files byte-for-byte unchanged.
    let out = cmd(
        &suite,
        nowhere.path(),
        &["session-command", "list", "--session", &cmd_sid, "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let rows = json_of(&out)["data"]["commands"]
        .as_array()
        .unwrap()
        .clone();
    assert!(rows.len() > 20, "{rows:?}");
    let settings = suite.home().join("settings.json");
    let files_before = (snapshot(&wd), std::fs::read(&settings).ok());
    let mode_before = mode_of(&client, &cmd_sid).await;
    for row in &rows {
        let name = row["name"].as_str().unwrap();
        assert!(
            row["risk"].is_string() && row["needsConfirm"].is_boolean(),
            "{row}"
        );
        if row["source"] != "builtin" {
            continue;
        }
        let read_forms: Vec<&str> = row["readForms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        if let Some(form) = read_forms.first() {
            let mut args = vec![name];
            if !form.is_empty() {
                args.push(form);
            }
            args.extend(["--session", &cmd_sid, "--json"]);
            let out = cmd(&suite, nowhere.path(), &args);
            let v = json_of(&out);
            assert_ne!(v["code"], "CONFIRM_REQUIRED", "{args:?}: {v}");
            assert_eq!(v["risk"], "read", "{args:?}: {v}");
            if v["ok"] != true {
                // Only capabilities missing from this build (or a service not configured).
                assert!(
                    ["NOT_CONFIGURED", "EXECUTION_FAILED", "NOT_FOUND"]
                        .contains(&v["code"].as_str().unwrap()),
                    "{args:?}: {v}"
                );
            }
        }
        if row["needsConfirm"] == true {
            // The write form: bare when the bare command is not a read form, else the first
            // subcommand that is not one.
            let schema_subs: Vec<String> = all["commands"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == name)
                .unwrap()["argsSchema"]["properties"]["subcommand"]["enum"]
                .as_array()
                .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default();
            let write_args: Vec<String> = if !read_forms.contains(&"") {
                vec![]
            } else if let Some(s) = schema_subs
                .iter()
                .find(|s| !read_forms.contains(&s.as_str()))
            {
                vec![s.clone(), "x-target".into()]
            } else {
                vec!["x-target".into()]
            };
            let mut args: Vec<&str> = vec![name];
            args.extend(write_args.iter().map(String::as_str));
            args.extend(["--session", &cmd_sid, "--json"]);
            let out = cmd(&suite, nowhere.path(), &args);
            let v = json_of(&out);
            let tier = v["risk"].as_str().unwrap_or_default();
            if tier == "medium_write" || tier == "high_risk" {
                // Arguments are checked before the confirmation: a command that takes no
                // dummy `x-target` refuses it as INVALID_ARGS, and changes nothing either.
                assert!(
                    out.status.code() == Some(1)
                        && matches!(
                            v["code"].as_str(),
                            Some("CONFIRM_REQUIRED" | "INVALID_ARGS")
                        ),
                    "{args:?}: {v}"
                );
            }
        }
    }
    assert_eq!(
        (snapshot(&wd), std::fs::read(&settings).ok()),
        files_before,
        "nothing changed"
    );
    assert_eq!(mode_of(&client, &cmd_sid).await, mode_before);
    // Reversible writes are restored: the mode switched above goes back.
    let out = cmd(
        &suite,
        nowhere.path(),
        &["accept", "--yes", "--session", &cmd_sid, "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(mode_of(&client, &cmd_sid).await, "accept");
}
