//! `provider.loginWeb` against a local fake authorization server on 127.0.0.1 (never a real
//! vendor): device code issued → polled → token stored; PKCE redirects; refusals.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use super::pkce::challenge;
use crate::provider::test_server::Harness;
use snowpea_session_error::Error;

#[derive(Default)]
struct Auth {
    base: String,
    /// Token polls answered `authorization_pending` before the grant.
    pending_polls: usize,
    polls: usize,
    deny: bool,
    /// The PKCE challenge the test read from the authorization URL.
    challenge: Option<String>,
    forms: Vec<HashMap<String, String>>,
}

type Shared = Arc<Mutex<Auth>>;

async fn device(State(s): State<Shared>, Form(f): Form<HashMap<String, String>>) -> Response {
    let mut a = s.lock().unwrap();
    a.forms.push(f);
    Json(json!({
        "device_code": "dev-code-1",
        "user_code": "WDJB-MJHT",
        "verification_uri": format!("{}/activate", a.base),
        "verification_uri_complete": format!("{}/activate?user_code=WDJB-MJHT", a.base),
        "expires_in": 120,
        "interval": 1
    }))
    .into_response()
}

async fn token(State(s): State<Shared>, Form(f): Form<HashMap<String, String>>) -> Response {
    let mut a = s.lock().unwrap();
    a.forms.push(f.clone());
    let grant = f.get("grant_type").map(String::as_str).unwrap_or_default();
    let ok = json!({"access_token": "at-SECRET-login", "refresh_token": "rt-SECRET", "expires_in": 3600, "token_type": "Bearer"});
    match grant {
        "urn:ietf:params:oauth:grant-type:device_code" => {
            assert_eq!(f["device_code"], "dev-code-1");
            a.polls += 1;
            if a.polls <= a.pending_polls {
                (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"error": "authorization_pending"})),
                )
                    .into_response()
            } else if a.deny {
                (
                    StatusCode::BAD_REQUEST,
                    Json(
                        json!({"error": "access_denied", "error_description": "the user said no"}),
                    ),
                )
                    .into_response()
            } else {
                Json(ok).into_response()
            }
        }
        "authorization_code" => {
            let verified = a.challenge.as_deref() == Some(challenge(&f["code_verifier"]).as_str());
            if f["code"] == "code-1" && verified {
                Json(ok).into_response()
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"error": "invalid_grant"})),
                )
                    .into_response()
            }
        }
        "refresh_token" if f["refresh_token"] == "rt-SECRET" => Json(json!({
            "access_token": "at-SECRET-renewed", "expires_in": 3600, "token_type": "Bearer"
        }))
        .into_response(),
        "refresh_token" => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant"})),
        )
            .into_response(),
        _ => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "unsupported_grant_type"})),
        )
            .into_response(),
    }
}

async fn keys(State(s): State<Shared>, Json(body): Json<Value>) -> Response {
    let a = s.lock().unwrap();
    let verifier = body["code_verifier"].as_str().unwrap_or_default();
    if body["code"] == "code-1" && a.challenge.as_deref() == Some(challenge(verifier).as_str()) {
        Json(json!({"key": "sk-or-v1-SECRET-from-login", "user_id": "u1"})).into_response()
    } else {
        (
            StatusCode::FORBIDDEN,
            Json(json!({"error": {"message": "bad code"}})),
        )
            .into_response()
    }
}

async fn fake_auth(
    pending_polls: usize,
    deny: bool,
) -> (String, Shared, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shared: Shared = Arc::new(Mutex::new(Auth {
        base: base.clone(),
        pending_polls,
        deny,
        ..Default::default()
    }));
    let app = axum::Router::new()
        .route("/device", axum::routing::post(device))
        .route("/token", axum::routing::post(token))
        .route("/keys", axum::routing::post(keys))
        .with_state(shared.clone());
    let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, shared, task)
}

fn login(vendor: &str, method: &str) -> pb::ProviderLoginWebParams {
    pb::ProviderLoginWebParams {
        method: method.into(),
        vendor: vendor.into(),
    }
}

fn query(url: &str, key: &str) -> String {
    reqwest::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("{key} missing from {url}"))
}

#[tokio::test]
async fn device_code_login_is_issued_polled_and_stored() {
    let (base, auth, _server) = fake_auth(1, false).await;
    let mut h = Harness::new(&[]).await;
    h.write_settings(&json!({"providers": {"openai": {"oauth": {
        "deviceAuthorizationUrl": format!("{base}/device"),
        "tokenUrl": format!("{base}/token"),
        "clientId": "client-test"
    }}}}));
    let r = h
        .providers
        .login_web(login("openai", "device_code"))
        .await
        .unwrap();
    assert!(r.ok);
    assert_eq!(r.status, "await_user");
    assert_eq!(r.user_code.as_deref(), Some("WDJB-MJHT"));
    assert_eq!(r.verification_uri, Some(format!("{base}/activate")));
    assert_eq!(r.expires_in_sec, Some(120));
    let phases = [
        h.next("provider.loginProgress").await,
        h.next("provider.loginProgress").await,
        h.next("provider.loginProgress").await,
        h.next("provider.loginProgress").await,
    ];
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["started", "await_user", "polling", "done"]);
    assert_eq!(phases[1]["userCode"], "WDJB-MJHT");
    assert!(phases
        .iter()
        .all(|p| p["vendor"] == "openai" && p["method"] == "device_code"));
    let published = serde_json::to_string(&phases).unwrap();
    assert!(!published.contains("SECRET"), "no token in a notification");

    let creds = h.json("credentials.json");
    let openai = &creds["providers"]["openai"];
    assert_eq!(openai["accessToken"], "at-SECRET-login");
    assert_eq!(openai["refreshToken"], "rt-SECRET");
    assert_eq!(openai["authMethod"], "oauth");
    assert_eq!(openai["loginMethod"], "device_code");
    assert!(openai["expiresAt"].as_i64().unwrap() > jiff::Timestamp::now().as_second());
    assert_eq!(h.json("settings.json")["providers"]["default"], "openai");
    let forms = auth.lock().unwrap().forms.clone();
    assert_eq!(forms[0]["client_id"], "client-test");
    assert_eq!(
        forms.len(),
        3,
        "device request, one pending poll, the grant"
    );

    let listed = h.providers.list().await.unwrap().providers;
    let openai = listed.iter().find(|p| p.vendor == "openai").unwrap();
    assert_eq!(
        (openai.configured, openai.auth_status.as_str()),
        (true, "active")
    );
    let settings = h.json("settings.json");
    let config = crate::provider::ProviderConfig::resolve_with(
        &settings,
        &h.providers.credentials().unwrap(),
        None,
        None,
        &|_| None,
    )
    .unwrap();
    assert_eq!((config.vendor.as_str(), config.oauth), ("openai", true));
    assert_eq!(config.api_key.as_deref(), Some("at-SECRET-login"));
}

#[tokio::test]
async fn a_denied_device_login_fails_and_stores_nothing() {
    let (base, _auth, _server) = fake_auth(0, true).await;
    let mut h = Harness::new(&[]).await;
    h.write_settings(&json!({"providers": {"openai": {"oauth": {
        "deviceAuthorizationUrl": format!("{base}/device"),
        "tokenUrl": format!("{base}/token")
    }}}}));
    // "web" picks the device flow for openai.
    let r = h.providers.login_web(login("openai", "web")).await.unwrap();
    assert_eq!(r.status, "await_user");
    let failed = loop {
        let p = h.next("provider.loginProgress").await;
        if p["phase"] == "failed" || p["phase"] == "done" {
            break p;
        }
    };
    assert_eq!(failed["phase"], "failed");
    assert!(
        failed["message"].as_str().unwrap().contains("denied"),
        "{failed}"
    );
    assert!(!h.path("credentials.json").exists());
}

#[tokio::test]
async fn openrouter_pkce_login_turns_the_code_into_a_key() {
    let (base, auth, _server) = fake_auth(0, false).await;
    let mut h = Harness::new(&[]).await;
    h.write_settings(&json!({"providers": {"openrouter": {"oauth": {
        "authorizationUrl": format!("{base}/auth"),
        "tokenUrl": format!("{base}/keys")
    }}}}));
    let r = h
        .providers
        .login_web(login("openrouter", "oauth_pkce"))
        .await
        .unwrap();
    let url = r.verification_uri.unwrap();
    assert!(url.starts_with(&format!("{base}/auth?")), "{url}");
    assert_eq!(query(&url, "code_challenge_method"), "S256");
    auth.lock().unwrap().challenge = Some(query(&url, "code_challenge"));
    let callback = query(&url, "callback_url");
    assert!(callback.starts_with("http://127.0.0.1:"), "{callback}");
    // The browser comes back with the code.
    let page = reqwest::get(format!("{callback}?code=code-1"))
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("logged in"));
    let done = loop {
        let p = h.next("provider.loginProgress").await;
        if p["phase"] == "failed" || p["phase"] == "done" {
            break p;
        }
    };
    assert_eq!(done["phase"], "done", "{done}");
    let creds = h.json("credentials.json");
    assert_eq!(
        creds["providers"]["openrouter"]["apiKey"],
        "sk-or-v1-SECRET-from-login"
    );
    assert_eq!(creds["providers"]["openrouter"]["authMethod"], "api_key");
}

#[tokio::test]
async fn google_pkce_login_checks_the_state() {
    let (base, auth, _server) = fake_auth(0, false).await;
    let mut h = Harness::new(&[]).await;
    h.write_settings(&json!({"providers": {"gemini": {"oauth": {
        "authorizationUrl": format!("{base}/auth"),
        "tokenUrl": format!("{base}/token"),
        "clientId": "gclient"
    }}}}));
    let r = h
        .providers
        .login_web(login("gemini", "google_oauth"))
        .await
        .unwrap();
    let url = r.verification_uri.unwrap();
    assert_eq!(query(&url, "client_id"), "gclient");
    assert_eq!(query(&url, "response_type"), "code");
    auth.lock().unwrap().challenge = Some(query(&url, "code_challenge"));
    let redirect = query(&url, "redirect_uri");
    let state = query(&url, "state");
    let stale = reqwest::get(format!("{redirect}?code=code-1&state=other"))
        .await
        .unwrap();
    assert_eq!(stale.status(), 400, "a wrong state is refused");
    let page = reqwest::get(format!("{redirect}?code=code-1&state={state}"))
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let done = loop {
        let p = h.next("provider.loginProgress").await;
        if p["phase"] == "failed" || p["phase"] == "done" {
            break p;
        }
    };
    assert_eq!(done["phase"], "done", "{done}");
    let creds = h.json("credentials.json");
    assert_eq!(
        creds["providers"]["gemini"]["accessToken"],
        "at-SECRET-login"
    );
    let forms = auth.lock().unwrap().forms.clone();
    assert_eq!(forms[0]["redirect_uri"], redirect);
    assert_eq!(forms[0]["client_id"], "gclient");
}

#[tokio::test]
async fn unsupported_logins_are_refused() {
    let h = Harness::new(&[]).await;
    for (vendor, method) in [
        ("anthropic", "device_code"),
        ("anthropic", "web"),
        ("openai", "google_adc"),
        ("openai", "oauth_pkce"),
        ("deepseek", ""),
        ("gemini", "google_oauth"),
    ] {
        let err = h
            .providers
            .login_web(login(vendor, method))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::LoginUnsupported(_)),
            "{vendor} {method}: {err:?}"
        );
    }
    let err = h.providers.login_web(login("", "web")).await.unwrap_err();
    assert!(matches!(err, Error::InvalidParams { ref field, .. } if field == "params.vendor"));
}

#[tokio::test]
async fn an_expiring_login_is_renewed_with_its_refresh_token() {
    let (base, auth, _server) = fake_auth(0, false).await;
    let h = Harness::new(&[]).await;
    h.write_settings(
        &json!({"providers": {"default": "openai", "openai": {"oauth": {
            "tokenUrl": format!("{base}/token"),
            "clientId": "client-test"
        }}}}),
    );
    let now = jiff::Timestamp::now().as_second();
    let stored = |refresh: &str| {
        json!({"providers": {"openai": {
            "accessToken": "at-old", "refreshToken": refresh, "expiresAt": now + 10,
            "authMethod": "oauth", "loginMethod": "device_code"
        }}})
        .to_string()
    };
    // A refused renewal leaves the login as it was (expired).
    std::fs::write(h.path("credentials.json"), stored("rt-revoked")).unwrap();
    h.providers.refresh_if_expiring(None).await;
    assert_eq!(
        h.json("credentials.json")["providers"]["openai"]["accessToken"],
        "at-old"
    );
    let listed = h.providers.list().await.unwrap().providers;
    assert_eq!(
        listed
            .iter()
            .find(|p| p.vendor == "openai")
            .unwrap()
            .auth_status,
        "expired"
    );

    std::fs::write(h.path("credentials.json"), stored("rt-SECRET")).unwrap();
    h.providers.refresh_if_expiring(None).await;
    let openai = &h.json("credentials.json")["providers"]["openai"];
    assert_eq!(
        openai["accessToken"],
        "at-SECRET-renewed",
        "{:?}",
        auth.lock().unwrap().forms
    );
    assert_eq!(
        openai["refreshToken"], "rt-SECRET",
        "kept when the answer has none"
    );
    assert!(openai["expiresAt"].as_i64().unwrap() > now + 600);
    let listed = h.providers.list().await.unwrap().providers;
    assert_eq!(
        listed
            .iter()
            .find(|p| p.vendor == "openai")
            .unwrap()
            .auth_status,
        "active"
    );
    let forms = auth.lock().unwrap().forms.clone();
    assert_eq!(forms.last().unwrap()["client_id"], "client-test");
    assert_eq!(forms.last().unwrap()["grant_type"], "refresh_token");
}

#[tokio::test]
async fn a_second_pkce_login_on_a_fixed_redirect_port_replaces_the_first() {
    // The vendor registered one redirect port (openai: 1455); a user who starts the login
    // again (the tab was closed) must get a fresh link, not "address in use".
    let (base, _auth, _server) = fake_auth(0, false).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let h = Harness::new(&[]).await;
    h.write_settings(&json!({"providers": {"gemini": {"oauth": {
        "authorizationUrl": format!("{base}/auth"),
        "tokenUrl": format!("{base}/token"),
        "clientId": "gclient",
        "redirectPort": port
    }}}}));
    let first = h
        .providers
        .login_web(login("gemini", "google_oauth"))
        .await
        .unwrap();
    let second = h
        .providers
        .login_web(login("gemini", "google_oauth"))
        .await
        .expect("a second login replaces the first");
    let (url1, url2) = (
        first.verification_uri.unwrap(),
        second.verification_uri.unwrap(),
    );
    assert_eq!(query(&url2, "redirect_uri"), query(&url1, "redirect_uri"));
    assert_ne!(query(&url2, "state"), query(&url1, "state"));
    let redirect = query(&url2, "redirect_uri");
    let stale = reqwest::get(format!(
        "{redirect}?code=code-1&state={}",
        query(&url1, "state")
    ))
    .await
    .unwrap();
    assert_eq!(stale.status(), 400, "the first login's link is stale");
}
