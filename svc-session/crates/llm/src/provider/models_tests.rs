use std::time::Duration;

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use crate::provider::test_server::{fixture, serve, Harness, Reply};

const KEY: &str = "sk-models-SECRET-0123456789";

async fn models(h: &Harness, vendor: &str) -> pb::ProviderModelsResult {
    h.providers
        .models(pb::ProviderModelsParams {
            vendor: Some(vendor.into()),
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn openai_style_listing_is_live_then_cached() {
    let listing = json!({"object": "list", "data": [
        {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"},
        {"id": "text-embedding-3-small", "object": "model", "created": 1705948997, "owned_by": "system"},
        {"id": "gpt-4o-mini", "object": "model", "created": 1721172741, "owned_by": "system"},
        {"id": "gpt-4.1", "object": "model", "created": 1744316542, "owned_by": "system"}
    ]});
    let server = serve(vec![Reply::json(200, &listing.to_string())]).await;
    let h = Harness::new(&[("OPENAI_API_KEY", KEY)]).await;
    h.write_settings(&json!({"providers": {"openai": {"baseUrl": format!("{}/v1", server.base)}}}));
    let r = models(&h, "openai").await;
    assert_eq!(r.source, "live");
    assert_eq!(r.error, None);
    // The preset default first, then newest first; the embedding model left out.
    assert_eq!(r.models, ["gpt-4o-mini", "gpt-4.1", "gpt-4o"]);
    assert_eq!(r.current, "gpt-4o-mini");
    assert_eq!(r.vision.get("gpt-4o"), Some(&true));
    let req = &server.requests()[0];
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(req.headers["authorization"], format!("Bearer {KEY}"));

    let again = models(&h, "openai").await;
    assert_eq!(again.source, "cache");
    assert_eq!(again.models, r.models);
    assert_eq!(server.requests().len(), 1, "the cache answered");
}

/// A live listing is written to `$SNOWPEA_HOME/models-cache.json` (0600, ids only, no key)
/// and a restarted component (a new `Providers` on the same home) answers from it without
/// asking the vendor; past the TTL it asks again; when the vendor then fails, the persisted
/// last good listing is served with the error.
#[tokio::test]
async fn the_cache_survives_a_restart_and_expires() {
    use std::os::unix::fs::PermissionsExt;
    let listing = json!({"object": "list", "data": [
        {"id": "qwen3-coder", "object": "model", "created": 1750000000}
    ]});
    let server = serve(vec![
        Reply::json(200, &listing.to_string()),
        Reply::json(500, r#"{"error": {"message": "down"}}"#),
        Reply::json(500, r#"{"error": {"message": "down"}}"#),
        Reply::json(500, r#"{"error": {"message": "down"}}"#),
        Reply::json(500, r#"{"error": {"message": "down"}}"#),
    ])
    .await;
    let h = Harness::new(&[]).await;
    h.write_settings(&json!({"providers": {"mybox": {
        "baseUrl": format!("{}/v1", server.base), "apiKey": KEY, "model": "qwen3-coder"
    }}}));
    assert_eq!(models(&h, "mybox").await.source, "live");
    let path = h.path("models-cache.json");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("qwen3-coder") && !text.contains(KEY),
        "{text}"
    );

    let restarted = || {
        crate::provider::Providers::new(
            snowpea_common::home::Home::new(h.dir.path()),
            std::sync::Arc::new(|_: &str| None),
            snowpea_common::bus::BusHub::new(),
        )
    };
    let again = restarted()
        .models(pb::ProviderModelsParams {
            vendor: Some("mybox".into()),
        })
        .await
        .unwrap();
    assert_eq!(again.source, "cache", "{again:?}");
    assert_eq!(again.models, ["qwen3-coder"]);
    assert_eq!(server.requests().len(), 1, "the persisted cache answered");

    // Older than the TTL: asked again; the vendor fails, the last good listing is served.
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let old = jiff::Timestamp::now().as_second() - crate::provider::CACHE_TTL.as_secs() as i64 - 5;
    doc["vendors"]["mybox"]["fetchedAt"] = json!(old);
    std::fs::write(&path, doc.to_string()).unwrap();
    let stale = restarted()
        .models(pb::ProviderModelsParams {
            vendor: Some("mybox".into()),
        })
        .await
        .unwrap();
    assert!(
        server.requests().len() >= 2,
        "past the TTL the vendor is asked"
    );
    assert_eq!(stale.source, "cache");
    assert_eq!(stale.models, ["qwen3-coder"]);
    assert!(stale.error.is_some(), "{stale:?}");

    // A corrupt file is an empty cache, never an error.
    std::fs::write(&path, b"{ not json").unwrap();
    let r = restarted()
        .models(pb::ProviderModelsParams {
            vendor: Some("mybox".into()),
        })
        .await
        .unwrap();
    assert_eq!(r.source, "curated", "{r:?}");
}

#[tokio::test]
async fn anthropic_and_gemini_listings() {
    let anthropic = json!({"data": [
        {"type": "model", "id": "claude-opus-4-1-20250805", "display_name": "Claude Opus 4.1", "created_at": "2025-08-05T00:00:00Z"},
        {"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5", "created_at": "2025-09-29T00:00:00Z"}
    ], "has_more": false, "first_id": "claude-opus-4-1-20250805", "last_id": "claude-sonnet-4-5"});
    let gemini = json!({"models": [
        {"name": "models/gemini-2.5-pro", "supportedGenerationMethods": ["generateContent", "countTokens"]},
        {"name": "models/text-embedding-004", "supportedGenerationMethods": ["embedContent"]},
        {"name": "models/gemini-2.5-flash", "supportedGenerationMethods": ["generateContent"]}
    ]});
    let server = serve(vec![
        Reply::json(200, &anthropic.to_string()),
        Reply::json(200, &gemini.to_string()),
    ])
    .await;
    let h = Harness::new(&[("ANTHROPIC_API_KEY", KEY), ("GEMINI_API_KEY", KEY)]).await;
    h.write_settings(&json!({"providers": {
        "anthropic": {"baseUrl": server.base},
        "gemini": {"baseUrl": format!("{}/v1beta", server.base)}
    }}));
    let a = models(&h, "anthropic").await;
    assert_eq!(a.source, "live");
    assert_eq!(a.models[0], "claude-sonnet-4-5", "the preset default first");
    assert!(a.models.contains(&"claude-opus-4-1-20250805".to_string()));
    assert!(
        a.models.contains(&"claude-haiku-4-5".to_string()),
        "merged with the curated list"
    );
    assert_eq!(a.vision.get("claude-sonnet-4-5"), Some(&true));
    let g = models(&h, "gemini").await;
    assert_eq!(g.models, ["gemini-2.5-flash", "gemini-2.5-pro"]);
    let reqs = server.requests();
    assert_eq!(reqs[0].path, "/v1/models");
    assert_eq!(reqs[0].headers["x-api-key"], KEY);
    assert_eq!(reqs[0].headers["anthropic-version"], "2023-06-01");
    assert_eq!(reqs[1].path, "/v1beta/models");
    assert_eq!(reqs[1].headers["x-goog-api-key"], KEY);
}

#[tokio::test]
async fn failures_come_back_in_error_with_the_curated_list() {
    let server = serve(vec![Reply::json(
        401,
        &fixture("openai_error_400.json").replace("400", "401"),
    )])
    .await;
    let h = Harness::new(&[("OPENAI_API_KEY", KEY)]).await;
    h.write_settings(&json!({"providers": {"openai": {"baseUrl": format!("{}/v1", server.base)}}}));
    let r = models(&h, "openai").await;
    assert_eq!(r.source, "curated");
    let error = r.error.expect("an error");
    assert!(error.contains("HTTP 401"), "{error}");
    assert!(!error.contains(KEY));
    assert!(r.models.contains(&"gpt-4o-mini".to_string()));

    // No key at all: the curated list, saying why.
    let h = Harness::new(&[]).await;
    let r = models(&h, "deepseek").await;
    assert_eq!(r.source, "curated");
    assert!(r.error.unwrap().contains("DEEPSEEK_API_KEY"));
    assert_eq!(r.models[0], "deepseek-chat");
}

#[tokio::test]
async fn a_listing_that_never_finishes_is_cut_at_the_timeout() {
    let mut hang = Reply::json(200, "{\"data\": [");
    hang.hold_open = true;
    let server = serve(vec![hang]).await;
    let h = Harness::new(&[]).await;
    h.write_settings(
        &json!({"providers": {"mybox": {"baseUrl": format!("{}/v1", server.base), "model": "m"}}}),
    );
    let r = snowpea_testkit::within(Duration::from_secs(20), "models", models(&h, "mybox")).await;
    assert_eq!(r.source, "curated");
    assert!(r.error.is_some());
    assert_eq!(r.models, ["m"]);
}

#[tokio::test]
async fn settings_models_win() {
    let h = Harness::new(&[]).await;
    h.write_settings(&json!({"providers": {"local": {"models": ["a", "b"], "model": "b"}}}));
    let r = models(&h, "local").await;
    assert_eq!(
        (r.source.as_str(), r.models.clone(), r.current.as_str()),
        ("settings", vec!["a".to_string(), "b".to_string()], "b")
    );
    let bad = h
        .providers
        .models(pb::ProviderModelsParams {
            vendor: Some("No Such!".into()),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(bad, snowpea_session_error::Error::InvalidParams { ref field, .. } if field == "params.vendor")
    );
}
