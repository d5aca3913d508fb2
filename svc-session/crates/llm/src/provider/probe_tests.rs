use futures::StreamExt;
use serde_json::json;
use snowpea_proto::session::v1 as pb;

use crate::provider::test_server::{fixture, serve, Harness, Reply};
use crate::provider::{ChatMessage, ModelRequest, StreamEvent, TEST_PROMPT};

const KEY: &str = "sk-probe-SECRET-0123456789";

fn test(provider: &str, model: Option<&str>) -> pb::ProviderTestParams {
    pb::ProviderTestParams {
        model: model.map(String::from),
        provider: provider.into(),
    }
}

fn configure(vendor: &str, config: serde_json::Value) -> pb::ProviderConfigureParams {
    pb::ProviderConfigureParams {
        config: Some(snowpea_proto::wkt::to_struct(&config)),
        vendor: vendor.into(),
    }
}

#[tokio::test]
async fn configure_then_test_then_a_turn_use_the_stored_key() {
    let server = serve(vec![
        Reply::sse(fixture("openai_text.sse")),
        Reply::sse(fixture("openai_text.sse")),
    ])
    .await;
    let h = Harness::new(&[]).await;
    h.providers
        .configure(configure(
            "mybox",
            json!({"baseUrl": format!("{}/v1", server.base), "apiKey": KEY, "model": "qwen3"}),
        ))
        .await
        .unwrap();
    let r = h.providers.test(test("mybox", None)).await.unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.provider, "mybox");
    assert_eq!(r.model, "qwen3");
    assert_eq!(
        r.reply.as_deref(),
        Some("Hello! How can I help you today with your project? 👋")
    );
    assert_eq!(r.error, None);
    // The model id the server's answer named.
    assert_eq!(r.model_echo.as_deref(), Some("gpt-4o-mini-2024-07-18"));
    let req = &server.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(
        req.body["messages"],
        json!([{"role": "user", "content": TEST_PROMPT}])
    );
    assert_eq!(req.body["model"], "qwen3");
    let tested = h.json("setup-state.json");
    assert_eq!(tested["providerTested"]["vendor"], "mybox");
    assert_eq!(h.providers.last_passed_test().unwrap()["model"], "qwen3");
    assert_eq!(h.providers.configured_vendors().await.unwrap(), ["mybox"]);

    // A turn picks the configured default and its stored key.
    let settings = h.json("settings.json");
    let provider = h.providers.select(&settings, None, None).unwrap();
    assert_eq!(provider.vendor(), "mybox");
    let events: Vec<_> = provider
        .stream(ModelRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![ChatMessage::user("hi")],
            tools: vec![],
            max_tokens: None,
            effort: None,
        })
        .collect()
        .await;
    assert!(
        matches!(events.last(), Some(Ok(StreamEvent::Done { .. }))),
        "{events:?}"
    );
    assert_eq!(
        server.requests()[1].headers["authorization"],
        format!("Bearer {KEY}")
    );
}

#[tokio::test]
async fn failures_are_results_not_errors() {
    let server = serve(vec![Reply::json(401, &fixture("openai_error_400.json"))]).await;
    let h = Harness::new(&[("OPENAI_API_KEY", KEY)]).await;
    h.write_settings(&json!({"providers": {"openai": {"baseUrl": format!("{}/v1", server.base)}}}));
    let r = h
        .providers
        .test(test("openai", Some("gpt-4.1")))
        .await
        .unwrap();
    assert!(!r.ok);
    assert_eq!(r.model, "gpt-4.1");
    let error = r.error.unwrap();
    assert!(error.contains("401"), "{error}");
    assert!(!error.contains(KEY));
    assert!(
        !h.path("setup-state.json").exists(),
        "only a passed test is recorded"
    );

    let r = h.providers.test(test("anthropic", None)).await.unwrap();
    assert!(!r.ok);
    assert!(r.error.unwrap().contains("ANTHROPIC_API_KEY"));

    let r = h.providers.test(test("nosuch", None)).await.unwrap();
    assert!(!r.ok);
    assert!(r.error.unwrap().contains("providers.nosuch.baseUrl"));

    let bad = h.providers.test(test("", None)).await.unwrap_err();
    assert!(
        matches!(bad, snowpea_session_error::Error::InvalidParams { ref field, .. } if field == "params.provider")
    );
}

#[tokio::test]
async fn gemini_is_tested_over_its_own_wire() {
    let server = serve(vec![Reply::sse(fixture("gemini_text.sse"))]).await;
    let h = Harness::new(&[]).await;
    h.providers
        .configure(configure(
            "gemini",
            json!({"baseUrl": format!("{}/v1beta", server.base), "apiKey": KEY}),
        ))
        .await
        .unwrap();
    let r = h.providers.test(test("gemini", None)).await.unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.model, "gemini-2.5-flash");
    let req = &server.requests()[0];
    assert_eq!(
        req.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    );
    assert_eq!(req.headers["x-goog-api-key"], KEY);
    assert_eq!(req.body["generationConfig"]["maxOutputTokens"], 128);
}
