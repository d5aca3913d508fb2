//! `settings.*`, `system.reloadSettings` and `setup.*` through the real suite (issue 15):
//! masking of every secret spelling, the `"***"` echo refused, refused patches leaving the
//! file byte-for-byte unchanged, project scope writing only the project file, a change
//! reaching svc-scheduler and svc-memory without a restart, reload of a hand edit, the setup
//! wizard's methods, `audio.*`/`mcp.*` reaching svc-audio/svc-mcp, the silent reload before
//! `session.create`, and no secret in any log file. One suite for the file: the scenarios
//! run one after another on the same home.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::Suite;
use snowpea_sdk::{Client, Error};
use snowpea_testkit::assert_eventually;

const T: Duration = Duration::from_secs(20);

/// Secret values written through settings.set; none may appear in a reply or a log file.
const SECRETS: &[(&str, &str)] = &[
    ("api_key", "sk-e2e-secret-api-key-0001"),
    ("apiKey", "sk-e2e-secret-api-key-0002"),
    ("token", "e2e-secret-token-0003"),
    ("refresh_token", "e2e-secret-refresh-0004"),
    ("accessToken", "e2e-secret-access-0005"),
    ("id_token", "e2e-secret-idtoken-0006"),
    ("oauth_token", "e2e-secret-oauth-0007"),
    ("password", "e2e-secret-password-0008"),
    ("client_secret", "e2e-secret-client-0009"),
];

async fn ok(c: &Client, method: &str, params: Value) -> Value {
    tokio::time::timeout(T, c.call(method, params.clone()))
        .await
        .expect("call timed out")
        .unwrap_or_else(|e| panic!("{method} {params}: {e:?}"))
}

/// The error code and `details.field` of a refused call.
async fn err(c: &Client, method: &str, params: Value) -> (String, Option<String>) {
    match tokio::time::timeout(T, c.call(method, params.clone()))
        .await
        .expect("call timed out")
    {
        Ok(v) => panic!("{method} {params}: expected an error, got {v}"),
        Err(Error::Rpc(e)) => {
            let field = e
                .data
                .as_ref()
                .and_then(|d| d["details"]["field"].as_str())
                .map(str::to_owned);
            (e.data_code.unwrap_or_default(), field)
        }
        Err(e) => panic!("{method}: {e:?}"),
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn log_text(suite: &Suite, process: &str) -> String {
    std::fs::read_to_string(suite.home().join("logs").join(format!("{process}.log")))
        .unwrap_or_default()
}

async fn masking_and_refusals(suite: &Suite, c: &Client) {
    let settings_path = suite.home().join("settings.json");
    // Every secret spelling, at several depths, is shown as "***" and never echoed.
    let mut vendor = serde_json::Map::new();
    for (k, v) in SECRETS {
        vendor.insert((*k).into(), json!(v));
    }
    vendor.insert("model".into(), json!("m-1"));
    let set = ok(
        c,
        "settings.set",
        json!({"patch": {"providers": {"openai": vendor}, "agent": {"max_tokens": 4096},
                         "custom": {"kept": [1, 2]}}}),
    )
    .await;
    let got = ok(c, "settings.get", json!({"scope": "global"})).await;
    for shown in [&set["settings"], &got["settings"]] {
        for (k, v) in SECRETS {
            assert_eq!(shown["providers"]["openai"][k], "***", "{k}");
            assert!(!shown.to_string().contains(v), "{k} leaked");
        }
        assert_eq!(shown["providers"]["openai"]["model"], "m-1");
        assert_eq!(
            shown["agent"]["max_tokens"], 4096,
            "a plural is not a secret"
        );
        assert_eq!(shown["custom"]["kept"], json!([1, 2]));
        assert_eq!(shown["approvals"]["timeoutSec"], 300, "defaults are shown");
    }
    let file: Value = serde_json::from_slice(&read(&settings_path)).unwrap();
    assert_eq!(
        file["providers"]["openai"]["apiKey"], SECRETS[1].1,
        "the file keeps the real value"
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&settings_path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }

    // Refused patches: the echo of "***" (the whole patch, also its valid part), a bad value
    // of a known key, a bad scope. Each names the field; the file is byte-for-byte unchanged.
    let before = read(&settings_path);
    let refusals = [
        (
            json!({"patch": {"memory": {"top_k": 2}, "providers": {"openai": {"refresh_token": "***"}}}}),
            "params.patch.providers.openai.refresh_token",
        ),
        (
            json!({"patch": {"gateway": {"telegram": {"token": "***", "enabled": true}}}}),
            "params.patch.gateway.telegram.token",
        ),
        (
            json!({"patch": {"agent": {"busy": "whenever"}}}),
            "params.patch.agent.busy",
        ),
        (
            json!({"patch": {"approvals": {"timeoutSec": "five minutes"}}}),
            "params.patch.approvals.timeoutSec",
        ),
        (
            json!({"scope": "project", "patch": {"a": 1}}),
            "params.workdir",
        ),
        (
            json!({"scope": "project", "workdir": "relative/dir", "patch": {"a": 1}}),
            "params.workdir",
        ),
    ];
    for (params, field) in refusals {
        let (code, got_field) = err(c, "settings.set", params.clone()).await;
        assert_eq!(code, "invalid_params", "{params}");
        assert_eq!(got_field.as_deref(), Some(field), "{params}");
        assert_eq!(read(&settings_path), before, "{params} changed the file");
    }
}

async fn project_scope(suite: &Suite, c: &Client) {
    let settings_path = suite.home().join("settings.json");
    let before = read(&settings_path);
    let wd = suite.workdir.path().to_str().unwrap().to_owned();
    let set = ok(
        c,
        "settings.set",
        json!({"scope": "project", "workdir": wd,
               "patch": {"agent": {"busy": "queue"}, "gateway": {"slack": {"bot_token": "xoxb-e2e-secret-0010"}}}}),
    )
    .await;
    assert_eq!(
        set["settings"],
        json!({"agent": {"busy": "queue"}, "gateway": {"slack": {"bot_token": "***"}}})
    );
    assert_eq!(
        read(&settings_path),
        before,
        "a project set must not touch the global file"
    );
    let project: Value =
        serde_json::from_slice(&read(&suite.workdir.path().join(".snowpea/settings.json")))
            .unwrap();
    assert_eq!(project["agent"]["busy"], "queue");
    let got = ok(
        c,
        "settings.get",
        json!({"scope": "project", "workdir": wd}),
    )
    .await;
    assert_eq!(got["settings"]["gateway"]["slack"]["bot_token"], "***");
    let (code, field) = err(
        c,
        "settings.set",
        json!({"scope": "project", "workdir": wd, "patch": {"gateway": {"slack": {"bot_token": "***"}}}}),
    )
    .await;
    assert_eq!(
        (code.as_str(), field.as_deref()),
        (
            "invalid_params",
            Some("params.patch.gateway.slack.bot_token")
        )
    );
}

async fn changes_reach_the_services(suite: &Suite, c: &Client) {
    let mut rx = c.subscribe();
    let (sched_pid, _, _) = suite.process("scheduler");
    let (memory_pid, _, _) = suite.process("memory");
    for i in 0..12 {
        ok(
            c,
            "memory.write",
            json!({"text": format!("settings e2e note number {i}")}),
        )
        .await;
    }
    let hits = ok(c, "memory.search", json!({"query": "settings e2e note"})).await;
    assert_eq!(
        hits["hits"].as_array().unwrap().len(),
        10,
        "the default limit"
    );

    ok(
        c,
        "settings.set",
        json!({"patch": {"scheduler": {"timeZone": "Asia/Seoul"}, "memory": {"searchLimit": 3}}}),
    )
    .await;
    // Clients are told which sections changed.
    loop {
        let n = tokio::time::timeout(T, rx.recv())
            .await
            .expect("settings.changed")
            .unwrap();
        if n.method == "settings.changed" {
            assert_eq!(
                n.params,
                json!({"scope": "global", "keys": ["memory", "scheduler"]})
            );
            break;
        }
    }
    // svc-memory applies its recall setting on the announcement alone (it does not re-read
    // the file per call), without a restart.
    let hits = ok(c, "memory.search", json!({"query": "settings e2e note"})).await;
    assert_eq!(hits["hits"].as_array().unwrap().len(), 3);
    // svc-scheduler reads times in the new zone: 09:00 in Seoul is 00:00 UTC.
    let p = ok(c, "job.preview", json!({"spec": "0 9 * * *"})).await;
    assert!(
        p["nextRunAt"].as_str().unwrap().contains("T00:00:00"),
        "{p}"
    );
    assert_eventually!(
        log_text(suite, "scheduler").contains("scheduler settings applied")
            && log_text(suite, "scheduler").contains("Asia/Seoul")
    );
    assert_eq!(suite.process("scheduler").0, sched_pid, "no restart");
    assert_eq!(suite.process("memory").0, memory_pid, "no restart");

    // A hand edit is adopted by system.reloadSettings; unchanged → reloaded:false.
    let unchanged = ok(c, "system.reloadSettings", json!({})).await;
    assert_eq!(unchanged["reloaded"], false, "{unchanged}");
    let path = suite.home().join("settings.json");
    let mut doc: Value = serde_json::from_slice(&read(&path)).unwrap();
    doc["memory"]["searchLimit"] = json!(5);
    doc["scheduler"]["timeZone"] = json!("Etc/UTC");
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let r = ok(c, "system.reloadSettings", json!({})).await;
    assert_eq!(
        r,
        json!({"reloaded": true, "changedKeys": ["memory", "scheduler"]})
    );
    let hits = ok(c, "memory.search", json!({"query": "settings e2e note"})).await;
    assert_eq!(hits["hits"].as_array().unwrap().len(), 5);
    let p = ok(c, "job.preview", json!({"spec": "0 9 * * *"})).await;
    assert!(
        p["nextRunAt"].as_str().unwrap().contains("T09:00:00"),
        "{p}"
    );
    let again = ok(c, "system.reloadSettings", json!({})).await;
    assert_eq!(again["reloaded"], false);
    // A hand edit that breaks the file is not adopted and the file is left alone.
    std::fs::write(&path, b"{ not json").unwrap();
    let broken = ok(c, "system.reloadSettings", json!({})).await;
    assert_eq!(broken["reloaded"], false);
    let (code, _) = err(c, "settings.set", json!({"patch": {"a": 1}})).await;
    assert_eq!(code, "unavailable");
    assert_eq!(read(&path), b"{ not json");
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    ok(c, "system.reloadSettings", json!({})).await;
}

/// A global `settings.set` of `audio.*` and `mcp.*` reaches svc-audio and svc-mcp without a
/// restart, seen through their own methods; a hand edit is picked up silently by the next
/// `session.create` (the `(mtime, size)` check), announced with `settings.changed`.
async fn audio_mcp_and_silent_reload(suite: &Suite, c: &Client) {
    let (audio_pid, _, _) = suite.process("audio");
    let (mcp_pid, _, _) = suite.process("mcp");
    // Without a speech engine on the test machine autoSpeak stays false, but the reason
    // svc-audio gives says which setting it holds.
    let speak_reason = |caps: Value| {
        caps["reasons"]["autoSpeak"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    let caps = ok(c, "audio.capabilities", json!({})).await;
    assert_eq!(
        speak_reason(caps.clone()),
        "audio.tts.autoSpeak is off",
        "{caps}"
    );
    let servers = ok(c, "mcp.list", json!({})).await;
    assert!(
        !servers.to_string().contains("e2e-from-settings"),
        "{servers}"
    );
    ok(
        c,
        "settings.set",
        json!({"patch": {
            "audio": {"tts": {"autoSpeak": true}},
            "mcp": {"servers": {"e2e-from-settings": {"command": "/nonexistent/snowpea-e2e-mcp-server"}}}
        }}),
    )
    .await;
    // svc-audio: audio.capabilities reports the new autoSpeak.
    assert_eventually!(
        speak_reason(ok(c, "audio.capabilities", json!({})).await).contains("autoSpeak is on"),
        "svc-audio applies audio.tts.autoSpeak"
    );
    assert_eventually!(log_text(suite, "audio").contains("audio settings applied"));
    // svc-mcp: the settings server is listed (scope "settings") and was reconciled.
    assert_eventually!(
        ok(c, "mcp.list", json!({})).await["servers"]
            .as_array()
            .is_some_and(|l| l
                .iter()
                .any(|s| s["name"] == "e2e-from-settings" && s["scope"] == "settings")),
        "svc-mcp lists the server from settings mcp.servers"
    );
    assert_eventually!(log_text(suite, "mcp").contains("mcp settings applied"));
    assert_eq!(suite.process("audio").0, audio_pid, "no restart");
    assert_eq!(suite.process("mcp").0, mcp_pid, "no restart");

    // Silent reload: a hand edit is adopted before the next session.create.
    let mut rx = c.subscribe();
    let path = suite.home().join("settings.json");
    let mut doc: Value = serde_json::from_slice(&read(&path)).unwrap();
    doc["audio"]["tts"]["autoSpeak"] = json!(false);
    doc.as_object_mut().unwrap().remove("mcp");
    doc["e2eHandEdit"] = json!(1);
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    ok(
        c,
        "session.create",
        json!({"workdir": dir.path().to_str().unwrap()}),
    )
    .await;
    loop {
        let n = tokio::time::timeout(T, rx.recv())
            .await
            .expect("settings.changed after the silent reload")
            .unwrap();
        if n.method == "settings.changed" {
            assert_eq!(
                n.params,
                json!({"scope": "global", "keys": ["audio", "e2eHandEdit", "mcp"]})
            );
            break;
        }
    }
    assert_eventually!(
        speak_reason(ok(c, "audio.capabilities", json!({})).await) == "audio.tts.autoSpeak is off",
        "the silently reloaded value reached svc-audio"
    );
    assert_eventually!(
        !ok(c, "mcp.list", json!({}))
            .await
            .to_string()
            .contains("e2e-from-settings"),
        "the silently reloaded mcp section reached svc-mcp"
    );
    // Unchanged since: an explicit reload has nothing left to adopt.
    let r = ok(c, "system.reloadSettings", json!({})).await;
    assert_eq!(r["reloaded"], false, "{r}");
}

async fn setup_wizard(suite: &Suite, c: &Client) {
    let cat = ok(c, "setup.catalog", json!({})).await;
    for list in ["vendors", "search", "browser", "stt", "tts"] {
        let items = cat[list].as_array().unwrap();
        assert!(
            items[0]["default"] == true,
            "{list}: the default comes first"
        );
        assert_eq!(
            items.iter().filter(|i| i["default"] == true).count(),
            1,
            "{list}"
        );
    }
    assert_eq!(cat["search"][0]["id"], "ddgs");
    // No providers.default: the reference's default vendor leads, with its preset model; the
    // openai keys written above make openai active.
    assert_eq!(cat["vendors"][0]["id"], "anthropic");
    assert_eq!(cat["vendors"][0]["defaultModelSource"], "preset");
    let openai = cat["vendors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == "openai")
        .unwrap();
    assert_eq!(openai["active"], true);
    assert_eq!(openai["defaultModel"], "m-1", "the configured model");
    assert_eq!(cat["browser"][0]["id"], "local_chromium");
    assert!(cat["gateway"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["active"] == false));
    assert_eq!(cat["tools"].as_array().unwrap().len(), 19);
    // providers.openai holds keys from the first scenario: configured, an existing install.
    let st = ok(c, "setup.status", json!({"profile": "default"})).await;
    assert_eq!(st["required"][0]["id"], "provider");
    assert_eq!(st["required"][0]["done"], true);
    assert!(st["configuredProviders"]
        .as_array()
        .unwrap()
        .contains(&json!("openai")));
    assert_eq!(st["existingInstall"], true);
    let mode = st["optional"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "mode")
        .unwrap();
    assert!(mode["defaultApplied"].is_null(), "no default: {mode}");
    let b = ok(c, "setup.status", json!({"profile": "browser"})).await;
    assert_eq!(
        b["required"][0]["done"], false,
        "the browser profile needs a tested provider"
    );
    let (code, field) = err(c, "setup.status", json!({"profile": "kiosk"})).await;
    assert_eq!(code, "invalid_params");
    assert_eq!(field.as_deref(), Some("params.profile"));

    // search.provider was never set; memory/scheduler sections exist but not `enabled`.
    let path = suite.home().join("settings.json");
    let first = ok(c, "setup.applyDefaults", json!({"profile": "default"})).await;
    assert_eq!(
        first["applied"],
        json!(["search.provider", "memory.enabled", "scheduler.enabled"])
    );
    assert_eq!(first["skipped"], json!([]));
    let applied = first["status"]["optional"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "search")
        .unwrap()
        .clone();
    assert_eq!(
        (applied["done"].clone(), applied["defaultApplied"].clone()),
        (json!(true), json!(true))
    );
    let file: Value = serde_json::from_slice(&read(&path)).unwrap();
    assert_eq!(file["search"]["provider"], "ddgs");
    assert!(file.get("browser").is_none() && file.get("gateway").is_none());
    assert_eq!(file["memory"]["searchLimit"], 5, "other keys kept");
    let before = read(&path);
    let second = ok(c, "setup.applyDefaults", json!({})).await;
    assert_eq!(second["applied"], json!([]));
    assert_eq!(
        second["skipped"],
        json!(["search.provider", "memory.enabled", "scheduler.enabled"])
    );
    assert_eq!(read(&path), before, "idempotent");
}

fn no_secret_in_any_log(suite: &Suite) {
    let logs = suite.home().join("logs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&logs).unwrap().flatten() {
        let text = String::from_utf8_lossy(&read(&entry.path())).into_owned();
        seen += 1;
        for (k, v) in SECRETS
            .iter()
            .chain([&("bot_token", "xoxb-e2e-secret-0010")])
        {
            assert!(
                !text.contains(v),
                "{k}'s value is in {}",
                entry.path().display()
            );
        }
    }
    assert!(
        seen >= 3,
        "expected the suite's log files in {}",
        logs.display()
    );
}

#[tokio::test]
async fn settings_and_setup_through_the_suite() {
    let suite = Suite::start().await;
    let c = suite.client().await;
    masking_and_refusals(&suite, &c).await;
    project_scope(&suite, &c).await;
    changes_reach_the_services(&suite, &c).await;
    audio_mcp_and_silent_reload(&suite, &c).await;
    setup_wizard(&suite, &c).await;
    no_secret_in_any_log(&suite);
}
