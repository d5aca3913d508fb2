//! `session.setModel` / `session.setEffort` against the scripted provider: the pin, the
//! routing through `models.default`, `model.changed`, and what the next model call gets.

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::testkit::{of_kind, Harness};

fn set_model(sid: &str, model: Option<&str>) -> pb::SessionSetModelParams {
    pb::SessionSetModelParams {
        session_id: sid.into(),
        model: model.map(str::to_owned),
    }
}

fn set_effort(sid: &str, effort: Option<&str>) -> pb::SessionSetEffortParams {
    pb::SessionSetEffortParams {
        session_id: sid.into(),
        effort: effort.map(str::to_owned),
    }
}

/// The model and effort of the last model call.
fn last_call(h: &Harness) -> (String, Option<String>) {
    let r = snowpea_session_llm::provider::fake_provider(&h.script)
        .unwrap()
        .received()
        .pop()
        .expect("a model call");
    (r.model, r.effort)
}

async fn turn(h: &mut Harness, sid: &str) -> Vec<Value> {
    let t = h.prompt(sid, "hello").await;
    h.until_done(&t, |_| None).await
}

#[tokio::test]
async fn set_model_pins_routes_and_clears() {
    let mut h = Harness::with_settings(
        json!({"default": {"text": "ok"}}),
        json!({"models": {"default": "openai:gpt-4o", "profiles": {"deep": {"provider": "anthropic", "model": "claude-opus-4-1"}}}}),
    )
    .await;
    std::fs::create_dir_all(h.workdir.join(".snowpea")).unwrap();
    let sid = h.create("accept").await;
    // Global default.
    turn(&mut h, &sid).await;
    assert_eq!(last_call(&h).0, "gpt-4o");
    // Project default over global.
    std::fs::write(
        h.workdir.join(".snowpea/settings.json"),
        json!({"models": {"default": "anthropic:claude-sonnet-4-5"}}).to_string(),
    )
    .unwrap();
    turn(&mut h, &sid).await;
    assert_eq!(last_call(&h).0, "claude-sonnet-4-5");
    // The session pin over both; a profile id.
    let r = h
        .app
        .models
        .set_model(set_model(&sid, Some("deep")))
        .await
        .unwrap();
    assert_eq!(
        (r.model.as_deref(), r.pinned),
        (Some("claude-opus-4-1"), true)
    );
    let ev = turn(&mut h, &sid).await;
    assert_eq!(last_call(&h).0, "claude-opus-4-1");
    assert_eq!(
        of_kind(&ev, "usage")[0]["payload"]["model"],
        "claude-opus-4-1"
    );
    // vendor:model.
    h.app
        .models
        .set_model(set_model(&sid, Some("openai:o3")))
        .await
        .unwrap();
    turn(&mut h, &sid).await;
    assert_eq!(last_call(&h).0, "o3");
    // A reference to nothing configured is refused and loses nothing.
    for bad in ["nosuchvendor", "nosuch:model", "gpt-4o"] {
        let err = h
            .app
            .models
            .set_model(set_model(&sid, Some(bad)))
            .await
            .unwrap_err();
        assert!(err.to_string().starts_with("params.model:"), "{err}");
    }
    turn(&mut h, &sid).await;
    assert_eq!(last_call(&h).0, "o3", "the pin survived the refusals");
    // inherit clears: the project default again.
    for clear in [Some("inherit"), Some(""), None] {
        let r = h
            .app
            .models
            .set_model(set_model(&sid, clear))
            .await
            .unwrap();
        assert!(!r.pinned);
        assert_eq!(r.model.as_deref(), Some("claude-sonnet-4-5"));
    }
    turn(&mut h, &sid).await;
    assert_eq!(last_call(&h).0, "claude-sonnet-4-5");
}

#[tokio::test]
async fn set_effort_reports_its_source_emits_model_changed_and_reaches_the_call() {
    let mut h = Harness::with_settings(
        json!({"default": {"text": "ok"}}),
        json!({"agent": {"effortBy": {"fake": "high"}}}),
    )
    .await;
    let sid = h.create("accept").await;
    turn(&mut h, &sid).await;
    assert_eq!(last_call(&h).1.as_deref(), Some("high"), "vendor rule");
    let r = h
        .app
        .models
        .set_effort(set_effort(&sid, Some("max")))
        .await
        .unwrap();
    assert_eq!(
        (
            r.effort.as_deref(),
            r.effort_source.as_str(),
            r.pinned.as_deref()
        ),
        (Some("max"), "session", Some("max"))
    );
    assert_eq!(r.efforts, ["low", "medium", "high", "max"]);
    let ev = turn(&mut h, &sid).await;
    assert_eq!(last_call(&h).1.as_deref(), Some("max"));
    let _ = ev;
    let err = h
        .app
        .models
        .set_effort(set_effort(&sid, Some("extreme")))
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("params.effort:"), "{err}");
    let r = h
        .app
        .models
        .set_effort(set_effort(&sid, None))
        .await
        .unwrap();
    assert_eq!(
        (r.effort.as_deref(), r.effort_source.as_str(), r.pinned),
        (Some("high"), "vendor", None)
    );
    // model.changed carries what is in effect.
    h.app.flush().await.unwrap();
    let rows = crate::testkit::read(&h.home, |c| {
        crate::store::events::of_kinds(c, &sid, &["model.changed"])
    });
    let last: Value = serde_json::from_str(&rows.last().unwrap().1).unwrap();
    assert_eq!(
        last,
        json!({"provider": "fake", "model": "fake", "effort": "high", "effortSource": "vendor", "efforts": ["low", "medium", "high", "max"]})
    );
    assert_eq!(rows.len(), 2, "one per accepted call, none for the refusal");
    // A model without tiers: no effort on the wire.
    h.app
        .models
        .set_model(set_model(&sid, Some("openai:gpt-4o")))
        .await
        .unwrap();
    let r = h
        .app
        .models
        .set_effort(set_effort(&sid, Some("low")))
        .await
        .unwrap();
    assert_eq!(r.effort, None);
    assert!(r.efforts.is_empty());
}

#[tokio::test]
async fn session_create_checks_provider_model_effort_and_limits() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let base = || pb::SessionCreateParams {
        workdir: h.workdir.to_string_lossy().into_owned(),
        ..Default::default()
    };
    let ctx = Harness::ctx("c1", Some("cli"));
    let bad = [
        (
            pb::SessionCreateParams {
                provider: Some("nope".into()),
                ..base()
            },
            "params.provider",
        ),
        (
            pb::SessionCreateParams {
                model: Some("nope:x".into()),
                ..base()
            },
            "params.model",
        ),
        (
            pb::SessionCreateParams {
                effort: Some("huge".into()),
                ..base()
            },
            "params.effort",
        ),
        (
            pb::SessionCreateParams {
                max_concurrent: Some(0),
                ..base()
            },
            "params.maxConcurrent",
        ),
    ];
    for (p, field) in bad {
        let err = h.app.sessions.create(&ctx, p).await.unwrap_err();
        assert!(err.to_string().starts_with(field), "{err}");
    }
    let sid = h
        .app
        .sessions
        .create(
            &ctx,
            pb::SessionCreateParams {
                model: Some("anthropic:claude-sonnet-4-5".into()),
                effort: Some("low".into()),
                max_concurrent: Some(3),
                locale: Some("ko-KR".into()),
                ..base()
            },
        )
        .await
        .unwrap()
        .session_id;
    let row = h.app.sessions.get(&sid).unwrap().row();
    assert_eq!(row.provider.as_deref(), Some("anthropic"));
    assert_eq!(row.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(row.effort.as_deref(), Some("low"));
    assert_eq!(row.max_concurrent, Some(3));
    assert_eq!(row.locale.as_deref(), Some("ko-KR"));
    assert_eq!(
        row.browser_memory,
        Some(false),
        "off for a non-browser creator"
    );
}
