use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::provider::test_server::Harness;
use snowpea_session_error::Error;

const KEY: &str = "sk-manage-SECRET-0123456789";

fn configure(vendor: &str, config: Value) -> pb::ProviderConfigureParams {
    pb::ProviderConfigureParams {
        config: Some(snowpea_proto::wkt::to_struct(&config)),
        vendor: vendor.into(),
    }
}

fn field(e: Error) -> String {
    match e {
        Error::InvalidParams { field, .. } => field,
        other => panic!("expected invalid_params, got {other:?}"),
    }
}

async fn list(h: &Harness) -> Vec<pb::provider_list_result::Provider> {
    h.providers.list().await.unwrap().providers
}

fn find<'a>(
    l: &'a [pb::provider_list_result::Provider],
    vendor: &str,
) -> &'a pb::provider_list_result::Provider {
    l.iter()
        .find(|p| p.vendor == vendor)
        .unwrap_or_else(|| panic!("{vendor} not listed"))
}

#[tokio::test]
async fn list_shows_every_preset_in_order_and_nothing_configured() {
    let h = Harness::new(&[]).await;
    let l = list(&h).await;
    let names: Vec<&str> = l.iter().map(|p| p.vendor.as_str()).collect();
    assert_eq!(
        names,
        [
            "anthropic",
            "openai",
            "openrouter",
            "gemini",
            "xai",
            "glm",
            "minimax",
            "kimi",
            "qwen",
            "deepseek",
            "local"
        ]
    );
    assert!(l
        .iter()
        .all(|p| !p.configured && p.auth_status == "unconfigured"));
    assert!(find(&l, "anthropic").default);
    assert_eq!(l.iter().filter(|p| p.default).count(), 1);
    let openai = find(&l, "openai");
    assert_eq!(
        openai.auth_methods,
        ["api_key", "browser_pkce", "device_code"]
    );
    assert_eq!(openai.default_base_url, "https://api.openai.com/v1");
    assert_eq!(openai.default_model, "gpt-4o-mini");
    assert!(!openai.models.is_empty());
    let local = find(&l, "local");
    assert_eq!(
        (local.variant.as_str(), local.preset.as_str()),
        ("ollama", "local")
    );
    assert_eq!(local.base_url, "http://127.0.0.1:11434/v1");
}

#[tokio::test]
async fn configure_keeps_the_key_in_credentials_and_the_rest_in_settings() {
    let mut h = Harness::new(&[]).await;
    h.write_settings(&json!({"approvals": {"timeoutSec": 30}}));
    h.providers
        .configure(configure(
            "openai",
            json!({"apiKey": KEY, "model": "gpt-4.1"}),
        ))
        .await
        .unwrap();
    let changed = h.next("settings.changed").await;
    assert_eq!(changed, json!({"scope": "global", "keys": ["providers"]}));

    let settings = h.json("settings.json");
    assert_eq!(settings["approvals"]["timeoutSec"], 30, "other keys kept");
    assert_eq!(settings["providers"]["openai"], json!({"model": "gpt-4.1"}));
    assert_eq!(settings["providers"]["default"], "openai");
    assert!(!std::fs::read_to_string(h.path("settings.json"))
        .unwrap()
        .contains(KEY));
    let creds = h.json("credentials.json");
    assert_eq!(creds["providers"]["openai"]["apiKey"], KEY);
    let mode = std::fs::metadata(h.path("credentials.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let l = list(&h).await;
    let openai = find(&l, "openai");
    assert!(openai.configured && openai.default);
    assert_eq!(openai.auth_status, "active");
    assert_eq!(openai.default_model, "gpt-4.1");
    assert!(!format!("{l:?}").contains(KEY), "no secret in the listing");

    // A second vendor does not take over the default.
    h.providers
        .configure(configure("deepseek", json!({"api_key": "dk-1"})))
        .await
        .unwrap();
    assert_eq!(h.json("settings.json")["providers"]["default"], "openai");

    // A null forgets one key; every value null forgets the vendor.
    h.providers
        .configure(configure(
            "openai",
            json!({"apiKey": null, "model": "gpt-4.1"}),
        ))
        .await
        .unwrap();
    assert!(h.json("credentials.json")["providers"]
        .get("openai")
        .is_none());
    assert_eq!(
        h.json("settings.json")["providers"]["openai"]["model"],
        "gpt-4.1"
    );
    h.providers
        .configure(configure("openai", json!({"model": null, "apiKey": null})))
        .await
        .unwrap();
    let settings = h.json("settings.json");
    assert!(settings["providers"].get("openai").is_none());
    assert!(settings["providers"].get("default").is_none());
}

#[tokio::test]
async fn refusals_name_the_field_and_change_nothing() {
    let h = Harness::new(&[]).await;
    h.write_settings(&json!({"providers": {"default": "openai", "openai": {"model": "m"}}}));
    let before = std::fs::read(h.path("settings.json")).unwrap();
    let cases = [
        ("openai", json!({"apiKey": "***"}), "params.config.apiKey"),
        (
            "openai",
            json!({"accessToken": "****"}),
            "params.config.accessToken",
        ),
        ("openai", json!({"colour": "red"}), "params.config.colour"),
        ("openai", json!({"model": 5}), "params.config.model"),
        ("openai", json!({"model": ""}), "params.config.model"),
        (
            "openai",
            json!({"baseUrl": "ftp://x"}),
            "params.config.baseUrl",
        ),
        (
            "openai",
            json!({"baseUrl": "not a url"}),
            "params.config.baseUrl",
        ),
        (
            "openai",
            json!({"baseUrl": "http://u:p@h/v1"}),
            "params.config.baseUrl",
        ),
        (
            "openai",
            json!({"variant": "vllm"}),
            "params.config.variant",
        ),
        (
            "local",
            json!({"variant": "kobold"}),
            "params.config.variant",
        ),
        ("openai", json!({"api": "soap"}), "params.config.api"),
        (
            "openai",
            json!({"models": ["a", 3]}),
            "params.config.models[1]",
        ),
        (
            "openai",
            json!({"contextWindow": -1}),
            "params.config.contextWindow",
        ),
        (
            "openai",
            json!({"expiresAt": "soon"}),
            "params.config.expiresAt",
        ),
        ("openai", json!({"apiKey": "a b"}), "params.config.apiKey"),
        ("openai", json!({}), "params.config"),
        ("mybox", json!({"model": "m"}), "params.config.baseUrl"),
        ("default", json!({"model": "m"}), "params.vendor"),
        ("fake", json!({"model": "m"}), "params.vendor"),
        ("Bad Name!", json!({"model": "m"}), "params.vendor"),
        ("", json!({"model": "m"}), "params.vendor"),
    ];
    for (vendor, config, expected) in cases {
        let err = h
            .providers
            .configure(configure(vendor, config.clone()))
            .await
            .expect_err(&format!("{vendor} {config}"));
        assert_eq!(field(err), expected, "{vendor} {config}");
    }
    assert_eq!(std::fs::read(h.path("settings.json")).unwrap(), before);
    assert!(!h.path("credentials.json").exists());

    // A malformed settings file is never rewritten.
    std::fs::write(h.path("settings.json"), b"{oops").unwrap();
    let err = h
        .providers
        .configure(configure("openai", json!({"apiKey": KEY})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Unavailable(ref m) if m.contains("settings.json")),
        "{err:?}"
    );
    assert_eq!(std::fs::read(h.path("settings.json")).unwrap(), b"{oops");
    assert!(!h.path("credentials.json").exists());
}

#[tokio::test]
async fn named_servers_and_local_variants_are_listed_and_removed() {
    let h = Harness::new(&[]).await;
    h.providers
        .configure(configure(
            "mybox",
            json!({"baseUrl": "http://10.0.0.2:5000/v1/", "model": "qwen3"}),
        ))
        .await
        .unwrap();
    h.providers
        .configure(configure(
            "local",
            json!({"variant": "lmstudio", "model": "m1"}),
        ))
        .await
        .unwrap();
    let l = list(&h).await;
    let mybox = find(&l, "mybox");
    assert!(mybox.custom && mybox.configured);
    assert_eq!(mybox.preset, "local");
    assert_eq!(mybox.base_url, "http://10.0.0.2:5000/v1");
    assert_eq!(mybox.auth_status, "active");
    assert!(
        mybox.default,
        "the first configured vendor becomes the default"
    );
    let local = find(&l, "local");
    assert!(local.configured);
    assert_eq!(
        (
            local.variant.as_str(),
            local.base_url.as_str(),
            local.default_model.as_str()
        ),
        ("lmstudio", "http://127.0.0.1:1234/v1", "m1")
    );

    h.providers
        .remove(pb::ProviderRemoveParams {
            vendor: "mybox".into(),
        })
        .await
        .unwrap();
    let settings = h.json("settings.json");
    assert!(settings["providers"].get("mybox").is_none());
    assert!(
        settings["providers"].get("default").is_none(),
        "the default named it"
    );
    assert!(list(&h).await.iter().all(|p| p.vendor != "mybox"));
    let again = h
        .providers
        .remove(pb::ProviderRemoveParams {
            vendor: "mybox".into(),
        })
        .await
        .unwrap_err();
    assert!(matches!(again, Error::NotFound(_)), "{again:?}");
    for bad in ["default", ""] {
        let err = h
            .providers
            .remove(pb::ProviderRemoveParams { vendor: bad.into() })
            .await
            .unwrap_err();
        assert_eq!(field(err), "params.vendor");
    }
}

#[tokio::test]
async fn env_keys_count_and_an_expired_login_is_reported() {
    let h = Harness::new(&[("OPENAI_API_KEY", KEY)]).await;
    let now = jiff::Timestamp::now().as_second();
    std::fs::write(
        h.path("credentials.json"),
        json!({"providers": {"gemini": {"accessToken": "ya29.t", "authMethod": "oauth", "expiresAt": now + 30}}})
            .to_string(),
    )
    .unwrap();
    let l = list(&h).await;
    let openai = find(&l, "openai");
    assert!(openai.configured && openai.default);
    assert_eq!(openai.auth_status, "active");
    assert_eq!(find(&l, "gemini").auth_status, "expired");
    let err = h
        .providers
        .remove(pb::ProviderRemoveParams {
            vendor: "openai".into(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::NotFound(ref m) if m.contains("OPENAI_API_KEY") && !m.contains(KEY)),
        "{err:?}"
    );
    let Err((_, message)) = h.providers.select(&json!({}), Some("gemini"), None) else {
        panic!("an expired login is not used");
    };
    assert!(message.contains("expired"), "{message}");
}

// QA (issue 15): what a new user ran into from outside.

#[tokio::test]
async fn a_models_list_is_bounded_like_every_other_value() {
    let h = Harness::new(&[]).await;
    h.write_settings(&json!({"providers": {"default": "openai", "openai": {"model": "m"}}}));
    let before = std::fs::read(h.path("settings.json")).unwrap();
    let cases = [
        (
            json!({"models": ["ok", "x".repeat(8193)]}),
            "params.config.models[1]",
        ),
        (json!({"models": ["a\u{7}b"]}), "params.config.models[0]"),
        (json!({"models": vec!["m"; 1001]}), "params.config.models"),
    ];
    for (config, expected) in cases {
        let err = h
            .providers
            .configure(configure("openai", config))
            .await
            .expect_err(expected);
        assert_eq!(field(err), expected);
    }
    assert_eq!(std::fs::read(h.path("settings.json")).unwrap(), before);
    h.providers
        .configure(configure("openai", json!({"models": [" m1 ", "m2"]})))
        .await
        .unwrap();
    assert_eq!(
        h.json("settings.json")["providers"]["openai"]["models"],
        json!(["m1", "m2"])
    );
}

#[tokio::test]
async fn the_legacy_local_names_are_known_and_listed_once_configured() {
    let h = Harness::new(&[]).await;
    // `ollama` has a default endpoint: no baseUrl needed, as for a turn.
    h.providers
        .configure(configure("ollama", json!({"model": "qwen3"})))
        .await
        .unwrap();
    h.providers
        .configure(configure(
            "vllm",
            json!({"baseUrl": "http://127.0.0.1:8001/v1", "model": "q"}),
        ))
        .await
        .unwrap();
    let l = list(&h).await;
    let ollama = find(&l, "ollama");
    assert!(ollama.configured && ollama.custom && ollama.default);
    assert_eq!(ollama.preset, "local");
    assert_eq!(ollama.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(ollama.default_model, "qwen3");
    let vllm = find(&l, "vllm");
    assert!(vllm.configured && !vllm.default);
    assert_eq!(vllm.base_url, "http://127.0.0.1:8001/v1");
    // Unconfigured legacy names stay out of the catalog.
    assert!(l
        .iter()
        .all(|p| p.vendor != "lmstudio" && p.vendor != "llamacpp"));
    h.providers
        .remove(pb::ProviderRemoveParams {
            vendor: "ollama".into(),
        })
        .await
        .unwrap();
    assert!(list(&h).await.iter().all(|p| p.vendor != "ollama"));
}

#[tokio::test]
async fn clearing_optional_settings_keeps_the_vendor_and_its_key() {
    let h = Harness::new(&[]).await;
    h.providers
        .configure(configure(
            "openai",
            json!({"apiKey": KEY, "model": "gpt-4.1", "label": "Work", "models": ["a"]}),
        ))
        .await
        .unwrap();
    h.providers
        .configure(configure(
            "openai",
            json!({"model": null, "label": null, "models": null}),
        ))
        .await
        .unwrap();
    assert_eq!(
        h.json("credentials.json")["providers"]["openai"]["apiKey"],
        KEY,
        "resetting the model must not forget the key"
    );
    let settings = h.json("settings.json");
    assert_eq!(settings["providers"]["default"], "openai");
    assert!(settings["providers"]["openai"].get("model").is_none());
    assert!(settings["providers"]["openai"].get("label").is_none());
    assert!(find(&list(&h).await, "openai").configured);
}

#[tokio::test]
async fn clearing_a_setting_of_an_unconfigured_vendor_changes_nothing() {
    let h = Harness::new(&[]).await;
    h.providers
        .configure(configure(
            "mybox",
            json!({"baseUrl": "http://127.0.0.1:9/v1", "model": "m"}),
        ))
        .await
        .unwrap();
    h.providers
        .remove(pb::ProviderRemoveParams {
            vendor: "mybox".into(),
        })
        .await
        .unwrap();
    h.providers
        .configure(configure("xai", json!({"model": null})))
        .await
        .unwrap();
    let settings = h.json("settings.json");
    assert!(
        settings["providers"].get("default").is_none(),
        "a vendor without a key must not become the default: {settings}"
    );
    assert!(settings["providers"].get("xai").is_none(), "{settings}");
    assert!(!find(&list(&h).await, "xai").configured);
}
