use serde_json::json;

use super::*;
use crate::error::ChatError;

fn field_of(e: ChatError) -> String {
    match e {
        ChatError::Invalid { field, .. } => field,
        other => panic!("not invalid_params: {other:?}"),
    }
}

#[test]
fn targets_are_validated_naming_the_field() {
    assert_eq!(
        validate_target(&json!({"agent": " bob "})).unwrap(),
        json!({"agent": "bob"})
    );
    assert_eq!(
        validate_target(&json!({"new_session": {"workdir": "/w", "mode": "plan"}})).unwrap(),
        json!({"new_session": {"workdir": "/w", "mode": "plan"}})
    );
    let cases = [
        (json!("x"), "target"),
        (json!({}), "target"),
        (json!({"agent": "a", "session": "s"}), "target"),
        (json!({"agent": ""}), "target.agent"),
        (json!({"session": 5}), "target.session"),
        (json!({"new_session": "x"}), "target.new_session"),
        (
            json!({"new_session": {"workdir": "rel"}}),
            "target.new_session.workdir",
        ),
        (
            json!({"new_session": {"workdir": "/w", "mode": "yolo"}}),
            "target.new_session.mode",
        ),
        (
            json!({"new_session": {"workdir": "/w", "x": 1}}),
            "target.new_session.x",
        ),
        (json!({"bogus": 1}), "target.bogus"),
    ];
    for (t, field) in cases {
        assert_eq!(field_of(validate_target(&t).unwrap_err()), field, "{t}");
    }
}

#[test]
fn credentials_come_from_the_file_the_env_or_settings_and_never_print() {
    let dir = tempfile::tempdir().unwrap();
    let home = snowpea_common::home::Home::new(dir.path());
    std::fs::write(
        dir.path().join("credentials.json"),
        json!({"tg": "123:abc", "gateway": {"sl": {"appToken": "xapp-1", "botToken": "xoxb-2"}}})
            .to_string(),
    )
    .unwrap();
    let c = resolve_credential(&home, Platform::Telegram, "tg").unwrap();
    assert_eq!(c.token, "123:abc");
    assert!(!format!("{c:?}").contains("abc"));
    let s = resolve_credential(&home, Platform::Slack, "sl").unwrap();
    assert_eq!(s.bot_token.as_deref(), Some("xoxb-2"));
    // Slack needs both tokens.
    assert_eq!(
        field_of(resolve_credential(&home, Platform::Slack, "tg").unwrap_err()),
        "credentialsRef"
    );
    let missing = resolve_credential(&home, Platform::Telegram, "NOPE_NOT_SET_42").unwrap_err();
    assert!(!missing.to_string().contains("abc"));
    assert_eq!(field_of(missing), "credentialsRef");
    std::fs::write(
        dir.path().join("settings.json"),
        json!({"gateway": {"discord": {"enabled": true, "token": "d-tok"}}}).to_string(),
    )
    .unwrap();
    let d = resolve_credential(&home, Platform::Discord, "settings:gateway.discord").unwrap();
    assert_eq!(d.token, "d-tok");
}

/// QA: a credential shaped for another platform is refused naming `credentialsRef`: Slack's
/// `{appToken, botToken}` (or `"<appToken> <botToken>"`) for Telegram / Discord, one token
/// for Slack; the message says why and never shows the secret.
#[test]
fn a_credential_of_another_platforms_shape_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let home = snowpea_common::home::Home::new(dir.path());
    std::fs::write(
        dir.path().join("credentials.json"),
        json!({
            "sl": {"appToken": "xapp-secret1", "botToken": "xoxb-secret2"},
            "sl_line": "xapp-secret1 xoxb-secret2",
            "tg": {"token": "1:secret3"},
        })
        .to_string(),
    )
    .unwrap();
    for platform in [Platform::Telegram, Platform::Discord] {
        for r in ["sl", "sl_line"] {
            let e = resolve_credential(&home, platform, r).unwrap_err();
            let text = e.to_string();
            assert!(text.contains("Slack credential"), "{text}");
            assert!(!text.contains("secret"), "{text}");
            assert_eq!(field_of(e), "credentialsRef");
        }
    }
    let e = resolve_credential(&home, Platform::Slack, "tg").unwrap_err();
    assert!(!e.to_string().contains("secret"), "{e}");
    assert_eq!(field_of(e), "credentialsRef");
    assert_eq!(
        resolve_credential(&home, Platform::Discord, "tg")
            .unwrap()
            .token,
        "1:secret3"
    );
}
