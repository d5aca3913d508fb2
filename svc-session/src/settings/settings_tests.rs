use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};
use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::wkt;

use super::*;

fn owner() -> (tempfile::TempDir, Settings) {
    let t = tempfile::tempdir().unwrap();
    let home = Home::new(t.path());
    (t, Settings::new(home, BusHub::new()))
}

fn set_params(patch: Value, scope: &str, workdir: Option<&str>) -> pb::SettingsSetParams {
    pb::SettingsSetParams {
        patch: Some(wkt::to_struct(&patch)),
        scope: scope.into(),
        workdir: workdir.map(String::from),
    }
}

fn field_of(e: Error) -> String {
    match e {
        Error::InvalidParams { field, .. } => field,
        other => panic!("expected invalid_params, got {other:?}"),
    }
}

#[tokio::test]
async fn set_merges_keeps_unknown_keys_deletes_on_null_and_writes_0600() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("settings.json");
    std::fs::write(
        &path,
        r#"{"custom": {"x": [1, 2]}, "approvals": {"timeoutSec": 30, "extra": true}}"#,
    )
    .unwrap();
    let s = Settings::new(Home::new(t.path()), BusHub::new());
    let r = s
        .set(set_params(
            json!({"approvals": {"timeoutSec": 60}, "memory": {"top_k": 3}}),
            "global",
            None,
        ))
        .await
        .unwrap();
    let shown = wkt::from_struct(&r.settings.unwrap());
    assert_eq!(shown["approvals"], json!({"timeoutSec": 60, "extra": true}));
    assert_eq!(shown["custom"], json!({"x": [1, 2]}));
    assert_eq!(shown["questions"]["timeoutSec"], 600, "defaults are shown");
    let file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(file["memory"], json!({"top_k": 3}));
    assert!(file.get("questions").is_none(), "defaults are not written");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    s.set(set_params(json!({"custom": null}), "", None))
        .await
        .unwrap();
    let file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(file.get("custom").is_none());
    assert_eq!(s.global()["memory"]["top_k"], 3);
}

#[tokio::test]
async fn refused_patches_leave_the_file_byte_for_byte_unchanged() {
    let (t, s) = owner();
    let path = t.path().join("settings.json");
    s.set(set_params(
        json!({"providers": {"openai": {"apiKey": "sk-real-1234567890"}}}),
        "global",
        None,
    ))
    .await
    .unwrap();
    let before = std::fs::read(&path).unwrap();
    let cases = [
        (
            json!({"agent": {"busy": "sometimes"}}),
            "params.patch.agent.busy",
        ),
        (
            json!({"approvals": {"timeoutSec": -1}}),
            "params.patch.approvals.timeoutSec",
        ),
        (
            json!({"memory": {"top_k": 8}, "providers": {"openai": {"apiKey": "***"}}}),
            "params.patch.providers.openai.apiKey",
        ),
        (
            json!({"gateway": {"slack": {"bot_token": "***"}}}),
            "params.patch.gateway.slack.bot_token",
        ),
        (
            json!({"scheduler": {"timeZone": "Nowhere/Else"}}),
            "params.patch.scheduler.timeZone",
        ),
    ];
    for (patch, field) in cases {
        let e = s
            .set(set_params(patch.clone(), "global", None))
            .await
            .unwrap_err();
        assert_eq!(field_of(e), field, "{patch}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "{patch}");
    }
    // A project set with the echo is refused the same way.
    let w = tempfile::tempdir().unwrap();
    let e = s
        .set(set_params(
            json!({"x": {"token": "***"}}),
            "project",
            w.path().to_str(),
        ))
        .await
        .unwrap_err();
    assert_eq!(field_of(e), "params.patch.x.token");
    assert!(!w.path().join(".snowpea").exists());
}

#[tokio::test]
async fn get_masks_secrets_and_project_scope_uses_only_the_project_file() {
    let (t, s) = owner();
    let w = tempfile::tempdir().unwrap();
    let wd = w.path().to_str().unwrap();
    s.set(set_params(
        json!({"providers": {"anthropic": {"api_key": "sk-ant-secret"}}}),
        "global",
        None,
    ))
    .await
    .unwrap();
    let global_before = std::fs::read(t.path().join("settings.json")).unwrap();
    let r = s
        .set(set_params(
            json!({"agent": {"busy": "queue"}, "gateway": {"telegram": {"token": "123:abc"}}}),
            "project",
            Some(wd),
        ))
        .await
        .unwrap();
    let shown = wkt::from_struct(&r.settings.unwrap());
    assert_eq!(
        shown,
        json!({"agent": {"busy": "queue"}, "gateway": {"telegram": {"token": "***"}}})
    );
    assert_eq!(
        std::fs::read(t.path().join("settings.json")).unwrap(),
        global_before
    );
    let pfile = w.path().join(".snowpea/settings.json");
    assert_eq!(
        std::fs::metadata(&pfile).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let g = s
        .get(pb::SettingsGetParams {
            scope: "global".into(),
            workdir: None,
        })
        .await
        .unwrap();
    let g = wkt::from_struct(&g.settings.unwrap());
    assert_eq!(g["providers"]["anthropic"]["api_key"], "***");
    assert!(!g.to_string().contains("sk-ant-secret"));
    // Project scope needs an absolute, existing workdir.
    for (workdir, why) in [
        (None, "missing"),
        (Some("rel/dir"), "relative"),
        (Some("/no/such/dir/x"), "missing dir"),
    ] {
        let e = s
            .get(pb::SettingsGetParams {
                scope: "project".into(),
                workdir: workdir.map(String::from),
            })
            .await
            .unwrap_err();
        assert_eq!(field_of(e), "params.workdir", "{why}");
    }
}

#[tokio::test]
async fn a_corrupt_file_gives_defaults_is_never_overwritten_and_reload_reports_changes() {
    let (t, _) = owner();
    let path = t.path().join("settings.json");
    std::fs::write(&path, b"{ broken").unwrap();
    let s = Settings::new(Home::new(t.path()), BusHub::new());
    let g = s.get(pb::SettingsGetParams::default()).await.unwrap();
    assert_eq!(
        wkt::from_struct(&g.settings.unwrap())["approvals"]["timeoutSec"],
        300
    );
    let e = s
        .set(set_params(json!({"a": 1}), "global", None))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
    assert_eq!(std::fs::read(&path).unwrap(), b"{ broken");
    assert!(
        !s.reload().await.unwrap().reloaded,
        "a corrupt file is not adopted"
    );
    // The user fixes it by hand.
    std::fs::write(
        &path,
        br#"{"scheduler": {"timeZone": "Asia/Seoul"}, "memory": {"top_k": 2}}"#,
    )
    .unwrap();
    let hub = s.hub.clone();
    let mut changes = hub.settings_changes();
    let r = s.reload().await.unwrap();
    assert_eq!(
        (r.reloaded, r.changed_keys.clone()),
        (true, vec!["memory".into(), "scheduler".into()])
    );
    assert_eq!(changes.try_recv().unwrap().keys, r.changed_keys);
    let again = s.reload().await.unwrap();
    assert_eq!((again.reloaded, again.changed_keys.len()), (false, 0));
    // Rewritten with the same content (new mtime): still nothing changed.
    std::fs::write(
        &path,
        br#"{"memory": {"top_k": 2}, "scheduler": {"timeZone": "Asia/Seoul"}}"#,
    )
    .unwrap();
    assert!(!s.reload().await.unwrap().reloaded);
}

#[tokio::test]
async fn a_global_change_is_announced_once_with_its_keys_and_a_project_change_is_not() {
    let (_t, s) = owner();
    let mut changes = s.hub.settings_changes();
    s.set(set_params(
        json!({"scheduler": {"timeZone": "Europe/Paris"}}),
        "global",
        None,
    ))
    .await
    .unwrap();
    let c = changes.try_recv().unwrap();
    assert_eq!(
        (c.scope.as_str(), c.keys),
        ("global", vec!["scheduler".to_owned()])
    );
    // Same value again: nothing changed, nothing announced.
    s.set(set_params(
        json!({"scheduler": {"timeZone": "Europe/Paris"}}),
        "global",
        None,
    ))
    .await
    .unwrap();
    let w = tempfile::tempdir().unwrap();
    s.set(set_params(
        json!({"memory": {"top_k": 1}}),
        "project",
        w.path().to_str(),
    ))
    .await
    .unwrap();
    assert!(changes.try_recv().is_err());
}

#[tokio::test]
async fn the_agent_loop_follows_agent_max_tool_rounds_from_the_settings() {
    use crate::testkit::{done_reason, of_kind, Harness};
    // A model that always asks for one more tool call.
    let script = json!({"steps": [], "default": {"tool_calls": [
        {"name": "list_dir", "arguments": {"path": "."}}
    ]}});
    let mut h = Harness::with_settings(script, json!({"agent": {"max_tool_rounds": 2}})).await;
    let sid = h.create("auto").await;
    let turn = h.prompt(&sid, "loop").await;
    let events = h.until_done(&turn, |_| None).await;
    assert_eq!(done_reason(&events), "budget");
    assert_eq!(of_kind(&events, "tool.result").len(), 2, "{events:?}");
}

#[tokio::test]
async fn get_shows_the_file_as_it_is_while_reload_still_reports_the_hand_edit() {
    let (t, s) = owner();
    let path = t.path().join("settings.json");
    s.set(set_params(json!({"memory": {"top_k": 1}}), "global", None))
        .await
        .unwrap();
    // Another writer (provider.configure, a person) changes the file.
    snowpea_common::settings::update_file(&path, |d| {
        d["providers"] = json!({"default": "openai"});
        Ok(())
    })
    .unwrap();
    let g = s.get(pb::SettingsGetParams::default()).await.unwrap();
    assert_eq!(
        wkt::from_struct(&g.settings.unwrap())["providers"]["default"],
        "openai"
    );
    let r = s.reload().await.unwrap();
    assert_eq!(
        (r.reloaded, r.changed_keys),
        (true, vec!["providers".to_owned()])
    );
}

#[tokio::test]
async fn keys_that_name_a_program_to_run_are_refused_and_the_file_is_unchanged() {
    let (t, owner) = owner();
    let path = t.path().join("settings.json");
    std::fs::write(&path, b"{\"updates\": {\"check\": true}}\n").unwrap();
    let before = std::fs::read(&path).unwrap();
    for (patch, field) in [
        (
            json!({"updates": {"command": ["sh", "-c", "id"]}}),
            "params.patch.updates.command",
        ),
        (
            json!({"updates": {"indexUrl": "http://127.0.0.1:1/x"}}),
            "params.patch.updates.indexUrl",
        ),
    ] {
        let e = owner
            .set(set_params(patch, "global", None))
            .await
            .unwrap_err();
        assert_eq!(field_of(e), field);
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }
    // Other `updates` keys stay settable.
    owner
        .set(set_params(
            json!({"updates": {"check": false}}),
            "global",
            None,
        ))
        .await
        .unwrap();
}

/// The silent check before `session.create`/`session.prompt`: nothing happens while the
/// file's `(mtime, size)` is what was last read; a hand edit is reloaded and announced with
/// its keys, once; a broken edit is not adopted and not announced.
#[tokio::test]
async fn reload_if_changed_adopts_a_hand_edit_once() {
    let (t, s) = owner();
    let mut changes = s.hub.settings_changes();
    s.reload_if_changed().await;
    assert!(changes.try_recv().is_err(), "nothing changed");
    let path = t.path().join("settings.json");
    std::fs::write(&path, r#"{"approvals": {"timeoutSec": 42}}"#).unwrap();
    s.reload_if_changed().await;
    let c = changes.try_recv().expect("the hand edit is announced");
    assert_eq!(
        (c.scope.as_str(), c.keys),
        ("global", vec!["approvals".to_owned()])
    );
    s.reload_if_changed().await;
    assert!(changes.try_recv().is_err(), "announced once");
    assert!(!s.reload().await.unwrap().reloaded, "already adopted");
    std::fs::write(&path, b"{ broken").unwrap();
    s.reload_if_changed().await;
    assert!(changes.try_recv().is_err(), "a broken file is not adopted");
    assert_eq!(std::fs::read(&path).unwrap(), b"{ broken", "left alone");
}
