//! `provider.*` through the real suite (issue 15 "Providers"), against a fake
//! OpenAI-compatible vendor and a fake OAuth authorization server, both on 127.0.0.1 (never a
//! real vendor). The suite runs WITHOUT the scripted provider (`SNOWPEA_PROVIDER` emptied) so
//! the configured vendor really answers the turn. One suite for the file; the steps run in
//! order: configure → list (masked, authStatus) → models → test → a turn on that provider;
//! refusals naming the field; device-code login end to end; remove; no secret in any log.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::Client;
use snowpea_testkit::CheckedTask;

const KEY: &str = "sk-e2e-VENDOR-SECRET-7f3a9c";
const ACCESS_TOKEN: &str = "at-e2e-LOGIN-SECRET-51d2";
const REFRESH_TOKEN: &str = "rt-e2e-LOGIN-SECRET-88c0";
const TURN: Duration = Duration::from_secs(60);

/// What the fake servers saw.
#[derive(Default)]
struct Seen {
    /// `authorization` headers of chat completions.
    chat_auth: Vec<String>,
    /// `authorization` headers of model listings.
    models_auth: Vec<String>,
    /// Token polls so far.
    polls: usize,
    base: String,
}

type Shared = Arc<Mutex<Seen>>;

fn auth_of(h: &HeaderMap) -> String {
    h.get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn list_models(State(s): State<Shared>, headers: HeaderMap) -> Response {
    s.lock().unwrap().models_auth.push(auth_of(&headers));
    Json(json!({"object": "list", "data": [
        {"id": "fake-small", "object": "model", "created": 1_700_000_000, "owned_by": "e2e"},
        {"id": "fake-large", "object": "model", "created": 1_750_000_000, "owned_by": "e2e"}
    ]}))
    .into_response()
}

async fn chat(State(s): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    s.lock().unwrap().chat_auth.push(auth_of(&headers));
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let usage = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model,
                       "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}});
    let sse = format!(
        "data: {}\n\ndata: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(
            json!({"role": "assistant", "content": "ok, from the"}),
            Value::Null
        ),
        chunk(json!({"content": " fake vendor."}), json!("stop")),
        usage
    );
    ([("content-type", "text/event-stream")], sse).into_response()
}

async fn device(State(s): State<Shared>) -> Response {
    let base = s.lock().unwrap().base.clone();
    Json(json!({
        "device_code": "e2e-device-code",
        "user_code": "SNOW-PEA1",
        "verification_uri": format!("{base}/activate"),
        "expires_in": 300,
        "interval": 1
    }))
    .into_response()
}

async fn token(State(s): State<Shared>, Form(f): Form<HashMap<String, String>>) -> Response {
    let mut seen = s.lock().unwrap();
    assert_eq!(
        f.get("grant_type").map(String::as_str),
        Some("urn:ietf:params:oauth:grant-type:device_code")
    );
    assert_eq!(
        f.get("device_code").map(String::as_str),
        Some("e2e-device-code")
    );
    seen.polls += 1;
    if seen.polls < 2 {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "authorization_pending"})),
        )
            .into_response();
    }
    Json(json!({"access_token": ACCESS_TOKEN, "refresh_token": REFRESH_TOKEN, "expires_in": 3600, "token_type": "Bearer"}))
        .into_response()
}

/// The fake vendor (`/v1/models`, `/v1/chat/completions`) and authorization server
/// (`/oauth/device`, `/oauth/token`) on one loopback port.
async fn fake_servers() -> (String, Shared, CheckedTask<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shared: Shared = Arc::new(Mutex::new(Seen {
        base: base.clone(),
        ..Default::default()
    }));
    let app = axum::Router::new()
        .route("/v1/models", axum::routing::get(list_models))
        .route("/v1/chat/completions", axum::routing::post(chat))
        .route("/oauth/device", axum::routing::post(device))
        .route("/oauth/token", axum::routing::post(token))
        .with_state(shared.clone());
    let task = CheckedTask::spawn("fake vendor", async move {
        axum::serve(listener, app).await.unwrap();
    });
    (base, shared, task)
}

async fn ok(c: &Client, method: &str, params: Value) -> Value {
    c.call(method, params)
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"))
}

/// `(error.data.code, error.data.details.field)` of a refused call.
async fn refused(c: &Client, method: &str, params: Value) -> (String, Option<String>) {
    let err = c
        .call(method, params.clone())
        .await
        .expect_err(&format!("{method} {params} is refused"));
    let rpc = err.rpc().expect("an rpc error").clone();
    let field = rpc
        .data
        .as_ref()
        .and_then(|d| d.pointer("/details/field"))
        .and_then(Value::as_str)
        .map(String::from);
    (rpc.data_code.unwrap_or_default(), field)
}

fn provider<'a>(list: &'a Value, vendor: &str) -> Option<&'a Value> {
    list["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["vendor"] == vendor)
}

/// Every file under `dir` (recursively) whose bytes contain one of `secrets`, except `skip`.
fn files_with_secrets(dir: &Path, secrets: &[&str], skip: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path == skip {
            continue;
        }
        if path.is_dir() {
            found.extend(files_with_secrets(&path, secrets, skip));
        } else if let Ok(bytes) = std::fs::read(&path) {
            let text = String::from_utf8_lossy(&bytes);
            for s in secrets {
                if text.contains(s) {
                    found.push(format!("{} contains {s}", path.display()));
                }
            }
        }
    }
    found
}

#[tokio::test]
async fn configure_test_turn_login_remove_and_no_secret_in_any_log() {
    let (base, seen, _server) = fake_servers().await;
    let suite = Suite::start_with(SuiteOptions {
        settings: Some(json!({"providers": {"openai": {"oauth": {
            "deviceAuthorizationUrl": format!("{base}/oauth/device"),
            "tokenUrl": format!("{base}/oauth/token"),
            "clientId": "e2e-client"
        }}}})),
        // No scripted provider: the configured vendor answers the turn.
        env: vec![("SNOWPEA_PROVIDER".into(), String::new())],
        ..Default::default()
    })
    .await;
    let c = suite.client().await;

    // Nothing configured yet.
    let list = ok(&c, "provider.list", json!({})).await;
    assert_eq!(list["providers"][0]["vendor"], "anthropic", "{list}");
    assert!(list["providers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["authStatus"] == "unconfigured"));

    // configure → list (masked, authStatus).
    let r = ok(
        &c,
        "provider.configure",
        json!({"vendor": "e2ebox", "config": {"baseUrl": format!("{base}/v1"), "apiKey": KEY, "model": "fake-small"}}),
    )
    .await;
    assert_eq!(r["ok"], true);
    let list = ok(&c, "provider.list", json!({})).await;
    let mine = provider(&list, "e2ebox").expect("the named server is listed");
    assert_eq!(mine["configured"], true, "{mine}");
    assert_eq!(mine["authStatus"], "active");
    assert_eq!(mine["custom"], true);
    assert_eq!(
        mine["default"], true,
        "the first configured vendor is the default"
    );
    assert_eq!(mine["baseUrl"], format!("{base}/v1"));
    assert!(
        !list.to_string().contains(KEY),
        "no secret in provider.list"
    );
    let settings = std::fs::read_to_string(suite.home().join("settings.json")).unwrap();
    assert!(!settings.contains(KEY), "the key is not in settings.json");

    // models: the vendor's real list endpoint.
    let m = ok(&c, "provider.models", json!({"vendor": "e2ebox"})).await;
    assert_eq!(m["source"], "live", "{m}");
    assert_eq!(m["models"], json!(["fake-large", "fake-small"]));
    assert_eq!(m["current"], "fake-small");

    // test: one short real completion.
    let t = ok(&c, "provider.test", json!({"provider": "e2ebox"})).await;
    assert_eq!(t["ok"], true, "{t}");
    assert_eq!(t["model"], "fake-small");
    assert_eq!(t["reply"], "ok, from the fake vendor.");
    assert_eq!(
        t["modelEcho"], "fake-small",
        "the model the vendor named: {t}"
    );
    assert!(t["latencyMs"].is_number());

    // The listing is persisted (0600, ids only) and survives a restart of svc-session: the
    // restarted process answers from it without asking the vendor.
    let cache = suite.home().join("models-cache.json");
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(text.contains("fake-large") && !text.contains(KEY), "{text}");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let listings = seen.lock().unwrap().models_auth.len();
    let old = suite.kill9("session");
    suite.wait_restarted("session", old).await;
    let m = snowpea_testkit::eventually(TURN, "provider.models after the restart", || async {
        c.call("provider.models", json!({"vendor": "e2ebox"}))
            .await
            .ok()
    })
    .await;
    assert_eq!(m["source"], "cache", "{m}");
    assert_eq!(m["models"], json!(["fake-large", "fake-small"]));
    assert_eq!(
        seen.lock().unwrap().models_auth.len(),
        listings,
        "the vendor was not asked again"
    );

    // A turn on that provider (the default now).
    let sid = c
        .create_session(suite.workdir.path(), Some("auto"))
        .await
        .unwrap();
    let out = c.prompt_and_collect(&sid, "hello", TURN).await.unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"), "{:?}", out.events);
    assert_eq!(out.text(), "ok, from the fake vendor.");
    let listed = ok(&c, "session.list", json!({})).await;
    assert!(listed.to_string().contains("e2ebox"), "{listed}");
    {
        let seen = seen.lock().unwrap();
        assert!(seen.chat_auth.len() >= 2, "test + turn");
        assert!(seen
            .chat_auth
            .iter()
            .chain(&seen.models_auth)
            .all(|a| a == &format!("Bearer {KEY}")));
    }

    // Bad input names the field; nothing changes.
    let before = std::fs::read(suite.home().join("settings.json")).unwrap();
    for (method, params, field) in [
        (
            "provider.configure",
            json!({"vendor": "e2ebox", "config": {"apiKey": "***"}}),
            "params.config.apiKey",
        ),
        (
            "provider.configure",
            json!({"vendor": "e2ebox", "config": {"baseUrl": 5}}),
            "params.config.baseUrl",
        ),
        (
            "provider.configure",
            json!({"vendor": "e2ebox", "config": {"colour": "red"}}),
            "params.config.colour",
        ),
        (
            "provider.configure",
            json!({"vendor": "nosuch", "config": {"model": "m"}}),
            "params.config.baseUrl",
        ),
        (
            "provider.configure",
            json!({"vendor": "Bad Name", "config": {"model": "m"}}),
            "params.vendor",
        ),
        (
            "provider.remove",
            json!({"vendor": "default"}),
            "params.vendor",
        ),
        ("provider.test", json!({"provider": ""}), "params.provider"),
    ] {
        let (code, f) = refused(&c, method, params.clone()).await;
        assert_eq!(
            (code.as_str(), f.as_deref()),
            ("invalid_params", Some(field)),
            "{method} {params}"
        );
    }
    assert_eq!(
        std::fs::read(suite.home().join("settings.json")).unwrap(),
        before
    );
    let (code, _) = refused(
        &c,
        "provider.loginWeb",
        json!({"vendor": "anthropic", "method": "device_code"}),
    )
    .await;
    assert_eq!(code, "login_unsupported");

    // Device-code login end to end: issued → polled → token stored.
    let mut notes = c.subscribe();
    let r = ok(
        &c,
        "provider.loginWeb",
        json!({"vendor": "openai", "method": "device_code"}),
    )
    .await;
    assert_eq!(r["status"], "await_user", "{r}");
    assert_eq!(r["userCode"], "SNOW-PEA1");
    assert_eq!(r["verificationUri"], format!("{base}/activate"));
    let mut phases = Vec::new();
    let wait = async {
        loop {
            let n = notes.recv().await.expect("notifications");
            if n.method == "provider.loginProgress" {
                assert_eq!(n.params["vendor"], "openai");
                let phase = n.params["phase"].as_str().unwrap().to_owned();
                phases.push(phase.clone());
                if phase == "done" || phase == "failed" {
                    assert!(!n.params.to_string().contains(ACCESS_TOKEN));
                    break;
                }
            }
        }
    };
    snowpea_testkit::within(TURN, "provider.loginProgress done", wait).await;
    assert_eq!(phases, ["started", "await_user", "polling", "done"]);
    let list = ok(&c, "provider.list", json!({})).await;
    let openai = provider(&list, "openai").unwrap();
    assert_eq!(
        (openai["configured"].clone(), openai["authStatus"].clone()),
        (json!(true), json!("active")),
        "{openai}"
    );
    assert!(!list.to_string().contains(ACCESS_TOKEN));
    let creds: Value =
        serde_json::from_slice(&std::fs::read(suite.home().join("credentials.json")).unwrap())
            .unwrap();
    assert_eq!(creds["providers"]["openai"]["accessToken"], ACCESS_TOKEN);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(suite.home().join("credentials.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // remove.
    let r = ok(&c, "provider.remove", json!({"vendor": "e2ebox"})).await;
    assert_eq!(r["ok"], true);
    let list = ok(&c, "provider.list", json!({})).await;
    assert!(provider(&list, "e2ebox").is_none());
    let (code, _) = refused(&c, "provider.remove", json!({"vendor": "e2ebox"})).await;
    assert_eq!(code, "not_found");

    // No secret anywhere in the home but credentials.json: logs, settings, the databases.
    let leaks = files_with_secrets(
        suite.home(),
        &[KEY, ACCESS_TOKEN, REFRESH_TOKEN],
        &suite.home().join("credentials.json"),
    );
    assert!(leaks.is_empty(), "{leaks:#?}");
    assert!(
        std::fs::read_dir(suite.home().join("logs"))
            .unwrap()
            .count()
            > 0,
        "the logs exist (the grep saw them)"
    );
}
