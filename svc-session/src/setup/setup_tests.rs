use std::sync::Arc;

use serde_json::json;
use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use super::*;
use crate::settings::Settings;

fn setup(env: &'static [(&'static str, &'static str)]) -> (tempfile::TempDir, Setup) {
    let t = tempfile::tempdir().unwrap();
    let home = Home::new(t.path());
    let settings = Arc::new(Settings::new(home.clone(), BusHub::new()));
    let env: EnvFn = Arc::new(move |k| {
        env.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    });
    (t, Setup::new(home, settings, env))
}

fn item<'a>(items: &'a [pb::SetupItem], id: &str) -> &'a pb::SetupItem {
    items.iter().find(|i| i.id == id).unwrap()
}

#[tokio::test]
async fn apply_defaults_fills_only_what_is_unset_and_is_idempotent() {
    let (t, s) = setup(&[]);
    std::fs::write(
        t.path().join("settings.json"),
        r#"{"search": {"provider": "searxng"}, "memory": {"enabled": null}, "browser": {}}"#,
    )
    .unwrap();
    let r = s
        .apply_defaults(pb::SetupApplyDefaultsParams::default())
        .await
        .unwrap();
    assert_eq!(r.applied, vec!["memory.enabled", "scheduler.enabled"]);
    assert_eq!(r.skipped, vec!["search.provider"]);
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.path().join("settings.json")).unwrap()).unwrap();
    assert_eq!(
        file,
        json!({"search": {"provider": "searxng"}, "memory": {"enabled": true},
               "scheduler": {"enabled": true}, "browser": {}})
    );
    let status = r.status.unwrap();
    assert_eq!(item(&status.optional, "memory").default_applied, Some(true));
    assert_eq!(
        item(&status.optional, "search").default_applied,
        Some(false)
    );
    assert!(item(&status.optional, "search").done);
    assert_eq!(item(&status.optional, "mode").default_applied, None);
    let before = std::fs::read(t.path().join("settings.json")).unwrap();
    let again = s
        .apply_defaults(pb::SetupApplyDefaultsParams::default())
        .await
        .unwrap();
    assert!(again.applied.is_empty());
    assert_eq!(again.skipped.len(), 3);
    assert_eq!(
        std::fs::read(t.path().join("settings.json")).unwrap(),
        before
    );
}

#[tokio::test]
async fn status_requires_a_configured_provider_or_a_tested_one_for_the_browser() {
    let (t, s) = setup(&[]);
    let st = s.status(pb::SetupStatusParams::default()).await.unwrap();
    assert!(!st.required[0].done);
    assert!(st.configured_providers.is_empty() && !st.existing_install);
    std::fs::write(
        t.path().join("credentials.json"),
        r#"{"openai": {"access_token": "x"}}"#,
    )
    .unwrap();
    let st = s.status(pb::SetupStatusParams::default()).await.unwrap();
    assert!(st.required[0].done);
    assert_eq!(st.configured_providers, vec!["openai"]);
    assert!(st.existing_install);
    let b = s
        .status(pb::SetupStatusParams {
            profile: "browser".into(),
        })
        .await
        .unwrap();
    assert!(
        !b.required[0].done,
        "the browser profile needs a tested provider"
    );
    std::fs::write(
        t.path().join("setup-state.json"),
        r#"{"providerTested": "openai"}"#,
    )
    .unwrap();
    let b = s
        .status(pb::SetupStatusParams {
            profile: "browser".into(),
        })
        .await
        .unwrap();
    assert!(b.required[0].done);
    let e = s
        .status(pb::SetupStatusParams {
            profile: "kiosk".into(),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidParams { ref field, .. } if field == "params.profile"));
}

#[tokio::test]
async fn env_keys_and_local_servers_count_as_configured() {
    let (_t, s) = setup(&[("DEEPSEEK_API_KEY", "k"), ("OPENAI_API_KEY", " ")]);
    let settings = json!({"providers": {"default": "box", "box": {"preset": "local", "baseUrl": "http://127.0.0.1:9"}, "anthropic": {"model": "m"}}});
    let got = providers::configured_providers(&s.home, &settings, &*s.env);
    assert_eq!(got, vec!["deepseek", "box"]);
    let vendors = vendors::vendors(&settings, &got);
    assert_eq!(vendors[0].id, "box", "the default vendor comes first");
    assert!(vendors[0].default && vendors.iter().filter(|v| v.default).count() == 1);
}

#[test]
fn single_choice_lists_put_one_default_first_then_free_keyless_then_gated_then_paid() {
    for list in [
        catalog::search(),
        catalog::browser(),
        catalog::stt(&[]),
        catalog::tts(&["piper".into()]),
        vendors::vendors(&json!({}), &[]),
    ] {
        assert!(list[0].default, "{}", list[0].id);
        assert_eq!(list.iter().filter(|i| i.default).count(), 1);
        let rank = |i: &pb::CatalogItem| match (i.tier.as_str(), i.key.as_str()) {
            ("free", "no key") => 0,
            ("free", _) => 1,
            _ => 2,
        };
        let ranks: Vec<u8> = list[1..].iter().map(rank).collect();
        assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");
    }
    assert_eq!(catalog::search()[0].id, "ddgs");
    assert_eq!(catalog::search().len(), 13);
    assert_eq!(catalog::tools().len(), 19);
    assert!(catalog::gateway().iter().all(|g| !g.default && !g.active));
    let tts = catalog::tts(&["piper".into()]);
    assert!(tts.iter().find(|i| i.id == "piper").unwrap().active);
    assert!(!tts.iter().find(|i| i.id == "espeak-ng").unwrap().active);
}
