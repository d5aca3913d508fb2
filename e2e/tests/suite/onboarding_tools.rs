//! Issue 15 "Usage, completion, search, sampling, updates" through the real suite: the
//! scripted provider, a local fake web server on 127.0.0.1 (a release index, a failing
//! SearXNG and a DuckDuckGo HTML page) and a fake installer set in settings. One suite for the
//! file: the parts use their own sessions and files and run one after another.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::{Client, Error};
use snowpea_testkit::{assert_eventually, CheckedTask};

const LONG: Duration = Duration::from_secs(60);

const DDG_PAGE: &str = r##"<html><body>
<div class="result"><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fsnowpea&amp;rut=1">Snowpea <b>docs</b></a>
<a class="result__snippet" href="#">A local agent daemon</a></div>
<div class="result"><a class="result__a" href="https://example.org/two">Second</a></div>
</body></html>"##;

const INDEX: &str = concat!(
    r#"{"name":"snowpea","vers":"0.0.1","yanked":false}"#,
    "\n",
    r#"{"name":"snowpea","vers":"99.0.0","yanked":false}"#,
    "\n",
    r#"{"name":"snowpea","vers":"100.0.0","yanked":true}"#,
    "\n"
);

/// The fake installer: prints, waits for `<dir>/<name>.go` (bounded), then writes
/// `<dir>/<name>.installed`.
const INSTALLER: &str = r#"#!/bin/sh
echo "installing $2"
i=0
while [ ! -f "$1/$2.go" ]; do
  i=$((i+1))
  if [ "$i" -gt 1200 ]; then echo "gave up"; exit 3; fi
  sleep 0.05
done
echo installed > "$1/$2.installed"
echo "done $2"
"#;

async fn fake_web() -> (String, CheckedTask<()>) {
    let app = Router::new()
        .route("/index", get(|| async { INDEX }))
        .route(
            "/searx/search",
            get(|| async { (axum::http::StatusCode::SERVICE_UNAVAILABLE, "down") }),
        )
        .route(
            "/ddg/html/",
            get(|| async { axum::response::Html(DDG_PAGE) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = CheckedTask::spawn("fake web server", async move {
        axum::serve(listener, app).await.unwrap();
    });
    (base, task)
}

fn code(e: &Error) -> String {
    e.code_str().unwrap_or_default().to_owned()
}

fn rpc_details(e: &Error) -> Value {
    e.rpc()
        .and_then(|r| r.data.as_deref().cloned())
        .unwrap_or(Value::Null)["details"]
        .clone()
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

fn edit_settings(home: &Path, f: impl FnOnce(&mut Value)) {
    let path = home.join("settings.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

async fn usage(client: &Client, params: Value) -> Value {
    client.call("usage.summary", params).await.unwrap()
}

#[tokio::test]
async fn usage_completion_search_sampling_and_updates_through_the_suite() {
    let (base, _web) = fake_web().await;
    let tools = tempfile::tempdir().unwrap();
    let installer = tools.path().join("installer.sh");
    std::fs::write(&installer, INSTALLER).unwrap();
    std::fs::set_permissions(&installer, std::fs::Permissions::from_mode(0o755)).unwrap();
    let marks = tools.path().to_string_lossy().into_owned();
    let script = json!({
        "steps": [
            {"match": "extract the title", "text": "{\"title\": 5}", "repeat": true},
            {"match": "summarise", "text": "A short summary.", "repeat": true},
            {"match": "look it up on the web", "tool_calls": [{"name": "web_search", "arguments": {"query": "snowpea", "num": 2}}]},
            {"after_tool": "web_search", "text": "Found it."}
        ],
        "default": {"text": "ok"}
    });
    let settings = json!({
        "search": {"provider": "searxng", "timeoutSec": 5,
                   "searxng": {"url": format!("{base}/searx")},
                   "ddgs": {"url": format!("{base}/ddg/html/")}},
        "updates": {"indexUrl": format!("{base}/index"),
                    "command": [installer.to_string_lossy(), marks, "first"]}
    });
    let mut suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        settings: Some(settings),
        ..Default::default()
    })
    .await;
    let host = suite
        .client_with(|o| o.with_client_id("ext-host").with_client_kind("browser"))
        .await;
    let other = suite.client().await;

    // ---- llm.sample: the host's session only; schema failures are invalid_output.
    let work = suite.workdir.path().to_path_buf();
    let sid = host.create_session(&work, Some("accept")).await.unwrap();
    let r = host
        .call(
            "llm.sample",
            json!({"sessionId": sid, "input": "please summarise this page", "system": "Be brief."}),
        )
        .await
        .unwrap();
    assert_eq!(r["text"], "A short summary.", "{r}");
    assert!(r["model"].as_str().unwrap().starts_with("fake:"), "{r}");
    assert!(r["usage"]["outputTokens"].as_i64().unwrap() > 0, "{r}");
    let e = other
        .call(
            "llm.sample",
            json!({"sessionId": sid, "input": "summarise"}),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), "unauthorized", "{e}");
    let schema = json!({"type": "object", "required": ["title"], "properties": {"title": {"type": "string"}}});
    let e = host
        .call(
            "llm.sample",
            json!({"sessionId": sid, "input": "extract the title", "schema": schema}),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), "invalid_output", "{e}");
    let e = host
        .call(
            "llm.sample",
            json!({"sessionId": sid, "input": "x", "maxTokens": 9999}),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), "invalid_params", "{e}");
    assert!(e.to_string().contains("params.maxTokens"), "{e}");
    // Nothing but usage events reached the transcript.
    let resumed = host
        .call("session.resume", json!({"sessionId": sid}))
        .await
        .unwrap();
    let kinds: Vec<&str> = resumed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "usage").count(),
        2,
        "{kinds:?}"
    );
    assert!(
        !kinds
            .iter()
            .any(|k| k.starts_with("message") || k.starts_with("turn")),
        "{kinds:?}"
    );

    // ---- usage.summary: a turn on a second session adds a third call.
    let sid2 = other.create_session(&work, Some("accept")).await.unwrap();
    let out = other
        .prompt_and_collect(&sid2, "hello", LONG)
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    let by_session = usage(&other, json!({"groupBy": "session"})).await;
    let rows = by_session["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{by_session}");
    let calls = |key: &str| {
        rows.iter()
            .find(|r| r["key"] == key)
            .map(|r| r["calls"].as_i64().unwrap())
    };
    assert_eq!(
        (calls(&sid), calls(&sid2)),
        (Some(2), Some(1)),
        "{by_session}"
    );
    let total =
        |r: &Value| r["inputTokens"].as_i64().unwrap() + r["outputTokens"].as_i64().unwrap();
    assert!(
        total(&rows[0]) >= total(&rows[1]),
        "largest first: {by_session}"
    );
    let sum: i64 = rows
        .iter()
        .map(|r| r["inputTokens"].as_i64().unwrap())
        .sum();
    assert_eq!(by_session["inputTokens"].as_i64().unwrap(), sum);
    let by_provider = usage(&other, json!({"groupBy": "provider"})).await;
    assert_eq!(by_provider["rows"][0]["key"], "fake", "{by_provider}");
    assert_eq!(by_provider["rows"][0]["calls"], 3, "{by_provider}");
    let by_model = usage(&other, json!({"groupBy": "model"})).await;
    assert!(
        by_model["rows"][0]["key"]
            .as_str()
            .unwrap()
            .starts_with("fake:"),
        "{by_model}"
    );
    // Window edges: the last usage event's own timestamp is inside [ts, …) and outside […, ts).
    let events = other
        .call("session.resume", json!({"sessionId": sid2}))
        .await
        .unwrap();
    let ts = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["kind"] == "usage")
        .unwrap()["ts"]
        .as_str()
        .unwrap()
        .to_owned();
    let from = usage(&other, json!({"groupBy": "session", "since": ts})).await;
    assert_eq!(from["rows"].as_array().unwrap().len(), 1, "{from}");
    assert_eq!(from["rows"][0]["key"], sid2.as_str());
    let before = usage(&other, json!({"groupBy": "session", "until": ts})).await;
    assert_eq!(before["rows"].as_array().unwrap().len(), 1, "{before}");
    assert_eq!(before["rows"][0]["key"], sid.as_str());
    let day = usage(&other, json!({"groupBy": "day"})).await;
    assert_eq!(day["rows"][0]["key"], ts[..10], "{day}");
    let e = other
        .call("usage.summary", json!({"since": "yesterday"}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("params.since"), "{e}");

    // ---- file.complete: git ls-files honouring .gitignore, ranking, escapes refused.
    let repo = work.join("repo");
    for (f, text) in [
        (".gitignore", "build/\n"),
        ("api.py", "a"),
        ("app.py", "b"),
        ("lib/apple.txt", "c"),
        ("zap.py", "d"),
        ("build/app.bin", "e"),
    ] {
        let p = repo.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(&repo, &["init", "-q"]);
    let repo_s = repo.to_string_lossy().into_owned();
    let r = other
        .call("file.complete", json!({"workdir": repo_s, "query": "ap"}))
        .await
        .unwrap();
    let paths: Vec<&str> = r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["api.py", "app.py", "lib/apple.txt", "zap.py"],
        "{r}"
    );
    assert_eq!(r["entries"][0]["kind"], "file");
    assert_eq!(r["entries"][0]["size"], 1);
    let r = other
        .call(
            "file.complete",
            json!({"workdir": repo_s, "query": "", "limit": 2}),
        )
        .await
        .unwrap();
    assert_eq!(r["truncated"], true, "{r}");
    let r = other
        .call("file.complete", json!({"workdir": repo_s, "query": "bin"}))
        .await
        .unwrap();
    assert_eq!(r["entries"], json!([]), "ignored by .gitignore: {r}");
    let e = other
        .call(
            "file.complete",
            json!({"workdir": repo_s, "query": "../../etc"}),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), "invalid_params");
    assert!(e.to_string().contains("params.query"), "{e}");
    let r = other
        .call(
            "file.complete",
            json!({"sessionId": sid2, "query": "repo/a"}),
        )
        .await
        .unwrap();
    assert_eq!(r["entries"][0]["path"], "repo/api.py", "{r}");

    // ---- web.search: the preferred provider fails, ddgs answers; browser hosts only.
    let r = host
        .call("web.search", json!({"query": "snowpea", "num": 5}))
        .await
        .unwrap();
    assert_eq!(r["provider"], "ddgs", "{r}");
    assert_eq!(
        r["results"][0],
        json!({"title": "Snowpea docs", "url": "https://example.com/snowpea", "snippet": "A local agent daemon"})
    );
    let e = other
        .call("web.search", json!({"query": "x"}))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "unauthorized", "{e}");
    // The web_search agent tool: listed with its `network` tag, called by the model, same
    // chain (searxng fails, ddgs answers), results marked untrusted.
    let sid3 = other.create_session(&work, Some("auto")).await.unwrap();
    let listed = other
        .call("tool.list", json!({"sessionId": sid3}))
        .await
        .unwrap();
    let tool = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "web_search")
        .cloned()
        .unwrap_or_else(|| panic!("web_search not listed: {listed}"));
    assert_eq!(tool["permissionTag"], "network", "{tool}");
    let out = other
        .prompt_and_collect(&sid3, "look it up on the web", LONG)
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    let events = other
        .call("session.resume", json!({"sessionId": sid3}))
        .await
        .unwrap();
    let result = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "tool.result")
        .cloned()
        .unwrap_or_else(|| panic!("no tool.result: {events}"));
    let p = &result["payload"];
    assert_eq!(p["name"], "web_search", "{result}");
    assert_eq!(p["ok"], true, "{result}");
    let output = p["output"].as_str().unwrap();
    assert!(
        output.contains("untrusted")
            && output.contains("Snowpea docs")
            && output.contains("https://example.com/snowpea"),
        "{output}"
    );
    assert_eq!(p["meta"]["provider"], "ddgs", "{result}");
    assert_eq!(p["meta"]["untrusted"], true, "{result}");
    assert_eq!(p["meta"]["failed"][0]["provider"], "searxng", "{result}");
    edit_settings(suite.home(), |s| {
        s["search"]["ddgs"]["url"] = json!(format!("{base}/missing"))
    });
    let e = host
        .call("web.search", json!({"query": "x"}))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "unavailable", "{e}");
    assert_eq!(rpc_details(&e)["reason"], "all_failed", "{e}");

    // ---- system.checkUpdate: newer release from the local index, cached, offline.
    let r = other
        .call("system.checkUpdate", json!({"force": true}))
        .await
        .unwrap();
    assert_eq!(
        (
            r["available"].clone(),
            r["latest"].clone(),
            r["cached"].clone()
        ),
        (json!(true), json!("99.0.0"), json!(false)),
        "{r}"
    );
    assert!(r.get("error").is_none_or(Value::is_null), "{r}");
    let mode = std::fs::metadata(suite.home().join("update-check.json"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let r = other.call("system.checkUpdate", json!({})).await.unwrap();
    assert_eq!(
        (r["cached"].clone(), r["latest"].clone()),
        (json!(true), json!("99.0.0")),
        "{r}"
    );
    edit_settings(suite.home(), |s| {
        s["updates"]["indexUrl"] = json!("http://127.0.0.1:9/offline")
    });
    let r = other
        .call("system.checkUpdate", json!({"force": true}))
        .await
        .unwrap();
    assert_eq!(r["available"], false, "{r}");
    assert_eq!(r["latest"], r["current"], "{r}");
    assert!(r["error"].as_str().is_some_and(|s| !s.is_empty()), "{r}");

    // ---- system.update: the fake installer, progress, never twice, restartRequired.
    let mut notes = other.subscribe();
    let r = other.call("system.update", json!({})).await.unwrap();
    assert_eq!(r["started"], true, "{r}");
    let log = r["log"].as_str().unwrap().to_owned();
    assert!(log.starts_with(&*suite.home().to_string_lossy()), "{log}");
    let again = other.call("system.update", json!({})).await.unwrap();
    assert_eq!(again["started"], false, "{again}");
    assert!(
        again["error"].as_str().unwrap().contains("already running"),
        "{again}"
    );
    std::fs::write(tools.path().join("first.go"), "").unwrap();
    let mut phases = vec![];
    while !phases.contains(&"done".to_owned()) && !phases.contains(&"failed".to_owned()) {
        let n = snowpea_testkit::within(LONG, "system.updateProgress", notes.recv())
            .await
            .unwrap();
        if n.method == "system.updateProgress" {
            phases.push(n.params["phase"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(phases, ["started", "done"]);
    assert!(tools.path().join("first.installed").exists());
    let info = other.call("system.info", json!({})).await.unwrap();
    assert_eq!(info["restartRequired"], true, "{info}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("installing first") && text.contains("done first"),
        "{text}"
    );

    // The upgrade outlives the suite.
    edit_settings(suite.home(), |s| {
        s["updates"]["command"][2] = json!("second")
    });
    let r = other.call("system.update", json!({})).await.unwrap();
    assert_eq!(r["started"], true, "{r}");
    suite.stop();
    std::fs::write(tools.path().join("second.go"), "").unwrap();
    let installed = tools.path().join("second.installed");
    assert_eventually!(
        within = LONG,
        installed.exists(),
        "the installer finished after the suite stopped"
    );
}
