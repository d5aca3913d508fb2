use std::collections::HashMap;

use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::provider::{ChatMessage, ModelRequest, StreamEvent};

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

fn resolve(
    settings: serde_json::Value,
    vendor: Option<&str>,
    model: Option<&str>,
    env: &[(&str, &str)],
) -> Result<ProviderConfig, ProviderError> {
    ProviderConfig::resolve(&settings, vendor, model, &env_of(env))
}

#[test]
fn explicit_vendor_with_env_key_and_defaults() {
    let c = resolve(
        json!({}),
        Some("openai"),
        None,
        &[("OPENAI_API_KEY", "sk-1")],
    )
    .unwrap();
    assert_eq!(
        c,
        ProviderConfig {
            vendor: "openai".into(),
            base_url: "https://api.openai.com/v1".into(),
            api_key: Some("sk-1".into()),
            oauth: false,
            model: "gpt-4o-mini".into(),
            api: ApiKind::OpenAi,
        }
    );
    let a = resolve(
        json!({}),
        Some("Anthropic"),
        Some("claude-opus-4-1"),
        &[("ANTHROPIC_API_KEY", "sk-ant")],
    )
    .unwrap();
    assert_eq!(a.vendor, "anthropic");
    assert_eq!(a.base_url, "https://api.anthropic.com");
    assert_eq!(a.model, "claude-opus-4-1");
    assert_eq!(a.api, ApiKind::Anthropic);
}

#[test]
fn vendor_precedence_arg_settings_env_then_first_key() {
    let env = [
        ("SNOWPEA_PROVIDER", "ollama"),
        ("OPENAI_API_KEY", "k1"),
        ("OPENROUTER_API_KEY", "k2"),
    ];
    let settings = json!({"providers": {"default": "openrouter"}});
    assert_eq!(
        resolve(settings.clone(), Some("openai"), None, &env)
            .unwrap()
            .vendor,
        "openai"
    );
    assert_eq!(
        resolve(settings, None, None, &env).unwrap().vendor,
        "openrouter"
    );
    assert_eq!(
        resolve(json!({}), None, None, &env).unwrap().vendor,
        "ollama"
    );
    // First of anthropic/openai/openrouter with a key.
    let c = resolve(
        json!({}),
        None,
        None,
        &[("OPENAI_API_KEY", "k1"), ("OPENROUTER_API_KEY", "k2")],
    )
    .unwrap();
    assert_eq!(c.vendor, "openai");
    let c = resolve(
        json!({"providers": {"anthropic": {"apiKey": "from-settings"}}}),
        None,
        None,
        &[("OPENAI_API_KEY", "k1")],
    )
    .unwrap();
    assert_eq!(c.vendor, "anthropic");
    assert_eq!(c.api_key.as_deref(), Some("from-settings"));
    let c = resolve(json!({}), None, None, &[("OPENROUTER_API_KEY", "k2")]).unwrap();
    assert_eq!(
        (c.vendor.as_str(), c.base_url.as_str(), c.model.as_str()),
        (
            "openrouter",
            "https://openrouter.ai/api/v1",
            "openai/gpt-4o-mini"
        )
    );
}

#[test]
fn nothing_configured_says_what_to_set() {
    match resolve(json!({}), None, None, &[]) {
        Err(ProviderError::Config(msg)) => assert!(
            msg.contains("ANTHROPIC_API_KEY") && msg.contains("OPENAI_API_KEY"),
            "{msg}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn remote_vendor_without_key_names_env_and_setting() {
    match resolve(
        json!({}),
        Some("anthropic"),
        None,
        &[("OPENAI_API_KEY", "x")],
    ) {
        Err(ProviderError::Config(msg)) => {
            assert!(msg.contains("ANTHROPIC_API_KEY"), "{msg}");
            assert!(msg.contains("providers.anthropic.apiKey"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn settings_override_defaults_and_env() {
    let settings = json!({"providers": {"openai": {"baseUrl": "http://proxy.local/v1/", "apiKey": "sk-settings", "model": "gpt-4.1"}}});
    let env = [
        ("OPENAI_API_KEY", "sk-env"),
        ("OPENAI_BASE_URL", "http://env.local/v1"),
    ];
    // A key in settings counts for the "first vendor with a key" fallback.
    assert_eq!(resolve(settings, None, None, &[]).unwrap().vendor, "openai");
    let settings = json!({"providers": {"default": "openai", "openai": {"baseUrl": "http://proxy.local/v1/", "apiKey": "sk-settings", "model": "gpt-4.1"}}});
    let c = resolve(settings, None, None, &env).unwrap();
    assert_eq!(c.base_url, "http://proxy.local/v1");
    assert_eq!(c.api_key.as_deref(), Some("sk-settings"));
    assert_eq!(c.model, "gpt-4.1");
    // Explicit model beats settings.
    let c = resolve(
        json!({"providers": {"openai": {"model": "gpt-4.1"}}}),
        Some("openai"),
        Some("o4-mini"),
        &env,
    )
    .unwrap();
    assert_eq!(c.model, "o4-mini");
    // Env base URL beats the built-in one.
    assert_eq!(c.base_url, "http://env.local/v1");
    assert_eq!(c.api_key.as_deref(), Some("sk-env"));
    let a = resolve(
        json!({}),
        Some("anthropic"),
        None,
        &[
            ("ANTHROPIC_API_KEY", "k"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9999"),
        ],
    )
    .unwrap();
    assert_eq!(a.base_url, "http://127.0.0.1:9999");
}

#[test]
fn local_vendors_need_no_key() {
    for (vendor, base) in [
        ("ollama", "http://127.0.0.1:11434/v1"),
        ("llamacpp", "http://127.0.0.1:8080/v1"),
        ("lmstudio", "http://127.0.0.1:1234/v1"),
        ("vllm", "http://127.0.0.1:8000/v1"),
    ] {
        let c = resolve(json!({}), Some(vendor), Some("m"), &[]).unwrap();
        assert_eq!(
            (c.base_url.as_str(), c.api_key.as_deref(), c.api),
            (base, None, ApiKind::OpenAi),
            "{vendor}"
        );
    }
    assert_eq!(
        resolve(json!({}), Some("ollama"), None, &[]).unwrap().model,
        "llama3.2"
    );
    assert!(
        matches!(resolve(json!({}), Some("vllm"), None, &[]), Err(ProviderError::Config(m)) if m.contains("providers.vllm.model"))
    );
    let c = resolve(
        json!({}),
        Some("ollama"),
        None,
        &[("OLLAMA_HOST", "10.0.0.5:11434")],
    )
    .unwrap();
    assert_eq!(c.base_url, "http://10.0.0.5:11434/v1");
}

#[test]
fn custom_vendor_needs_base_url() {
    let settings = json!({"providers": {"mybox": {"baseUrl": "http://10.0.0.2:5000/v1", "model": "qwen", "apiKey": "k"}}});
    let c = resolve(settings, Some("mybox"), None, &[]).unwrap();
    assert_eq!(
        (
            c.vendor.as_str(),
            c.base_url.as_str(),
            c.model.as_str(),
            c.api
        ),
        ("mybox", "http://10.0.0.2:5000/v1", "qwen", ApiKind::OpenAi)
    );
    let settings = json!({"providers": {"proxy": {"baseUrl": "http://10.0.0.3", "model": "claude", "api": "anthropic"}}});
    assert_eq!(
        resolve(settings, Some("proxy"), None, &[]).unwrap().api,
        ApiKind::Anthropic
    );
    match resolve(json!({}), Some("nosuch"), None, &[]) {
        Err(ProviderError::Config(msg)) => {
            assert!(msg.contains("providers.nosuch.baseUrl"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn keys_never_appear_in_debug_or_errors() {
    let secret = "sk-very-secret-key-123";
    let c = resolve(
        json!({}),
        Some("openai"),
        None,
        &[("OPENAI_API_KEY", secret)],
    )
    .unwrap();
    assert!(!format!("{c:?}").contains(secret));
    let p = select_provider(
        &json!({}),
        Some("openai"),
        None,
        &env_of(&[("OPENAI_API_KEY", secret)]),
    )
    .unwrap();
    assert_eq!(p.vendor(), "openai");
    assert!(!format!("{p:?}").contains(secret));
    let bad = json!({"providers": {"x": {"apiKey": secret}}});
    let err = ProviderConfig::resolve(&bad, Some("x"), None, &env_of(&[])).unwrap_err();
    assert!(!err.to_string().contains(secret));
}

#[test]
fn select_builds_the_right_provider() {
    let p = select_provider(
        &json!({}),
        Some("anthropic"),
        None,
        &env_of(&[("ANTHROPIC_API_KEY", "k")]),
    )
    .unwrap();
    assert_eq!(
        (p.vendor(), p.default_model()),
        ("anthropic", "claude-sonnet-4-5")
    );
    let p = select_provider(&json!({}), Some("ollama"), Some("qwen3"), &env_of(&[])).unwrap();
    assert_eq!((p.vendor(), p.default_model()), ("ollama", "qwen3"));
}

#[tokio::test]
async fn fake_provider_is_selected_and_shared_per_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    std::fs::write(
        &path,
        r#"{"steps":[{"text":"once only"}],"default":{"text":"again"}}"#,
    )
    .unwrap();
    let spec = format!("fake:{}", path.display());
    let env = env_of(&[("SNOWPEA_PROVIDER", spec.as_str()), ("OPENAI_API_KEY", "k")]);
    // The fake wins even over an explicit vendor.
    let a = select_provider(
        &json!({"providers": {"default": "openai"}}),
        Some("openai"),
        None,
        &env,
    )
    .unwrap();
    let b = select_provider(&json!({}), None, None, &env).unwrap();
    assert_eq!(a.vendor(), "fake");
    assert!(
        std::ptr::eq(Arc::as_ptr(&a) as *const u8, Arc::as_ptr(&b) as *const u8),
        "one instance per path"
    );

    let req = || ModelRequest {
        model: String::new(),
        system: String::new(),
        messages: vec![ChatMessage::user("hi")],
        tools: vec![],
        max_tokens: None,
        effort: None,
    };
    let texts = |ev: Vec<Result<StreamEvent, ProviderError>>| -> String {
        ev.into_iter()
            .filter_map(|e| match e {
                Ok(StreamEvent::TextDelta(t)) => Some(t),
                _ => None,
            })
            .collect()
    };
    assert_eq!(texts(a.stream(req()).collect().await), "once only");
    assert_eq!(
        texts(b.stream(req()).collect().await),
        "again",
        "step consumed through the other handle"
    );

    let missing = env_of(&[("SNOWPEA_PROVIDER", "fake:/definitely/not/here.json")]);
    match select_provider(&json!({}), None, None, &missing) {
        Err(ProviderError::Config(msg)) => {
            assert!(msg.contains("/definitely/not/here.json"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
}

/// A suite without any provider says every way to get one, the demo model included
/// (issue 25 item 3): settings, API keys, and `SNOWPEA_PROVIDER` read at daemon start.
#[test]
fn no_provider_names_settings_keys_and_the_demo_model() {
    let dir = tempfile::tempdir().unwrap();
    let home = snowpea_common::home::Home::new(dir.path());
    let providers = crate::provider::Providers::new(
        home,
        std::sync::Arc::new(|_: &str| None),
        snowpea_common::bus::BusHub::new(),
    );
    let Err((_, message)) = providers.select(&json!({}), None, None) else {
        panic!("no provider is configured, yet one was selected");
    };
    for part in [
        "no usable model provider",
        "settings.json",
        "snowpea supervisor stop && ANTHROPIC_API_KEY=… snowpea supervisor start",
        "SNOWPEA_PROVIDER=fake:$PWD/examples/demo.json",
        "when it starts",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    // Short, on a few lines, and only commands a person can type (issue 39 item 2).
    assert!(message.lines().count() <= 3, "{message}");
    assert!(
        message.lines().all(|l| l.chars().count() <= 160),
        "{message}"
    );
    assert!(!message.contains("provider.configure"), "{message}");
}
