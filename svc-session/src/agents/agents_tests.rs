//! Service-level edge cases of the agents component (the end-to-end behaviour is in
//! e2e/tests/suite/agents.rs): the depth bound, the caller rule and bad input of
//! `session.setAgent`, `agent.bindChannel` / `agent.delete` refusals, the concurrency limit's
//! precedence, and a `delegate_task` that is refused as a duplicate.

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::spawn::ChildSpec;
use crate::testkit::Harness;
use snowpea_session_error::Error;

fn define(h: &Harness, name: &str, front: &str) {
    let dir = h.workdir.join(".snowpea/agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{name}.md")),
        format!("---\nname: {name}\n{front}---\nYou help.\n"),
    )
    .unwrap();
}

fn refused_field(e: Error) -> (String, &'static str) {
    match e {
        Error::Refused { field, reason, .. } => (field, reason),
        Error::InvalidParams { field, .. } => (field, "invalid_params"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn delegation_depth_is_bounded_by_the_setting() {
    let h = Harness::with_settings(
        json!({"steps": [{"match": "hold", "delaySec": 30, "text": "late", "repeat": true}], "default": {"text": "ok"}}),
        json!({"agents": {"maxDepth": 1}}),
    )
    .await;
    define(&h, "helper", "");
    let root = h.create("accept").await;
    let mut child = h
        .app
        .agents
        .spawn_child(ChildSpec {
            parent_session_id: root.clone(),
            agent: Some("helper".into()),
            task: "hold on".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let child_sid = snowpea_testkit::eventually(
        std::time::Duration::from_secs(20),
        "child session",
        || async {
            h.app
                .agents
                .running()
                .into_iter()
                .find_map(|r| r.session_id())
        },
    )
    .await;
    let e = h
        .app
        .agents
        .spawn_child(ChildSpec {
            parent_session_id: child_sid.clone(),
            task: "deeper".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused_field(e),
        ("params.sessionId".to_owned(), "max_depth")
    );
    // At the bound the child is not offered delegate_task at all.
    let session = h.app.sessions.get(&child_sid).unwrap();
    let profile = h.app.agents.turn_profile(&session).await;
    assert!(profile.tools.is_empty());
    assert_eq!(profile.definition.unwrap().name, "helper");
    child.cancel();
    let r = child
        .wait(std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!((r.status.as_str(), r.ok), ("interrupted", false));
    // An interrupted task may be delegated again (no duplicate_task).
    let again = h
        .app
        .agents
        .spawn_child(ChildSpec {
            parent_session_id: root,
            agent: Some("helper".into()),
            task: "hold  ON".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    again.cancel();
}

#[tokio::test]
async fn set_agent_checks_the_caller_the_name_and_the_definition() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    define(&h, "good", "tools: [read_file]\n");
    define(&h, "broken", "tools: 7\n");
    let sid = h.create("accept").await;
    let set = |agent: Option<&str>| pb::SessionSetAgentParams {
        session_id: sid.clone(),
        agent: agent.map(str::to_owned),
        guard_turn: false,
    };
    let gateway = crate::session::callers::GATEWAY;
    let ctx = snowpea_common::context::CallContext {
        connection_id: Some("g1".into()),
        client_kind: Some(gateway.into()),
        ..Default::default()
    };
    assert!(matches!(
        h.app.agents.set_agent(&ctx, set(Some("good"))).await,
        Err(Error::Unauthorized(_))
    ));
    let origin = Harness::ctx("c1", Some("cli"));
    for (bad, why) in [
        ("Bad Name", "slug"),
        ("nobody", "unknown"),
        ("broken", "malformed"),
    ] {
        let e = h
            .app
            .agents
            .set_agent(&origin, set(Some(bad)))
            .await
            .unwrap_err();
        assert_eq!(refused_field(e).0, "params.agent", "{why}");
    }
    assert_eq!(
        h.app.sessions.get(&sid).unwrap().row().agent,
        None,
        "nothing changed"
    );
    let r = h
        .app
        .agents
        .set_agent(&origin, set(Some("good")))
        .await
        .unwrap();
    assert_eq!(r.agent.as_deref(), Some("good"));
    assert!(!r.guarded, "no turn runs: guardTurn has no effect");
    let session = h.app.sessions.get(&sid).unwrap();
    let profile = h.app.agents.turn_profile(&session).await;
    assert_eq!(profile.allowed_tools(), Some(vec!["read_file".to_owned()]));
    assert!(profile.persona().unwrap().contains("You help."));
    let events = h.app.events.after(&sid, 0).await.unwrap();
    assert_eq!(
        events.iter().filter(|e| e.kind == "agent.changed").count(),
        1
    );
}

/// Regression (issue 32 item 5): clearing the agent sent `agent.changed{}`; the spec's
/// "null for none" is `{agent: null}`.
#[tokio::test]
async fn clearing_the_agent_emits_agent_changed_with_agent_null() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    define(&h, "good", "");
    let sid = h.create("accept").await;
    let origin = Harness::ctx("c1", Some("cli"));
    for agent in [Some("good"), None] {
        h.app
            .agents
            .set_agent(
                &origin,
                pb::SessionSetAgentParams {
                    session_id: sid.clone(),
                    agent: agent.map(str::to_owned),
                    guard_turn: false,
                },
            )
            .await
            .unwrap();
    }
    let events = h.app.events.after(&sid, 0).await.unwrap();
    let payloads: Vec<_> = events
        .iter()
        .filter(|e| e.kind == "agent.changed")
        .map(|e| e.payload.clone())
        .collect();
    assert_eq!(payloads.len(), 2, "{payloads:?}");
    assert_eq!(payloads[0]["agent"], json!("good"));
    let cleared = payloads[1].as_object().unwrap();
    assert_eq!(cleared.get("agent"), Some(&json!(null)), "{cleared:?}");
}

#[tokio::test]
async fn bind_channel_and_delete_refuse_unknown_agents() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let e = h
        .app
        .agents
        .bind_channel(pb::AgentBindChannelParams {
            name: "ghost".into(),
            channel: "telegram:1".into(),
            credentials_ref: None,
        })
        .await
        .unwrap_err();
    // One rule for an unknown agent (issue 32 item 6): `not_found`, as agent.delete and
    // agent.spawn answer.
    assert!(matches!(e, Error::NotFound(_)), "{e:?}");
    let e = h
        .app
        .agents
        .delete(pb::AgentDeleteParams {
            name: "ghost".into(),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e:?}");
    let parent = h.create("accept").await;
    let spawned = h
        .app
        .agents
        .spawn_child(ChildSpec {
            parent_session_id: parent,
            agent: Some("ghost".into()),
            task: "anything".into(),
            ..Default::default()
        })
        .await;
    let Err(e) = spawned else {
        panic!("an unknown agent is refused")
    };
    assert!(matches!(e, Error::NotFound(_)), "{e:?}");
    assert!(h.app.agents.bindings().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_concurrency_limit_comes_from_the_session_then_the_settings() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let s = h.app.sessions.get(&sid).unwrap();
    assert_eq!(super::concurrency::limit(&s, &json!({})), 3);
    assert_eq!(
        super::concurrency::limit(&s, &json!({"agents": {"max_concurrent": 5}})),
        5
    );
    s.update(|r| r.max_concurrent = Some(2));
    assert_eq!(
        super::concurrency::limit(&s, &json!({"agents": {"max_concurrent": 5}})),
        2
    );
}

#[tokio::test]
async fn a_childs_approval_is_listed_and_answered_in_the_parent() {
    let h = Harness::new(json!({"steps": [
        {"match": "check it", "tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]},
        {"after_tool": "shell", "match": "check it", "text": "checked"}
    ], "default": {"text": "ok"}}))
    .await;
    h.connect("c1", Some("cli")).await;
    let parent = h.create("accept").await;
    let mut child = h
        .app
        .agents
        .spawn_child(ChildSpec {
            parent_session_id: parent.clone(),
            task: "check it".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let request = snowpea_testkit::eventually(
        std::time::Duration::from_secs(20),
        "the child's approval in the parent's list",
        || async {
            h.app
                .approvals
                .list(Some(&parent))
                .await
                .unwrap()
                .requests
                .into_iter()
                .next()
        },
    )
    .await;
    assert_ne!(request.session_id, parent, "it is the child's request");
    assert!(
        request.note.starts_with("[subagent (general)]"),
        "{}",
        request.note
    );
    // The parent's origin answers (any surface may: the shared queue, issue 32 item 10).
    let respond = |conn: &str| {
        h.app.approvals.respond(
            &Harness::ctx(conn, None),
            pb::ApprovalRespondParams {
                decision: "allow".into(),
                request_id: request.request_id.clone(),
                scope: "once".into(),
                reason: String::new(),
            },
        )
    };
    respond("c1").unwrap();
    let r = child
        .wait(std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.result, "checked");
}

#[tokio::test]
async fn closing_the_parent_interrupts_its_children() {
    let h = Harness::new(json!({"steps": [
        {"match": "wait long", "delaySec": 60, "text": "late", "repeat": true}
    ], "default": {"text": "ok"}}))
    .await;
    let parent = h.create("accept").await;
    let mut child = h
        .app
        .agents
        .spawn_child(ChildSpec {
            parent_session_id: parent.clone(),
            task: "wait long".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    h.app.sessions.close(&parent).await.unwrap();
    let r = child
        .wait(std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(r.status, "interrupted", "{r:?}");
}

/// `ChannelInternalService.ResolveChannel`: a channel bound with `agent.bindChannel` talks to
/// the named agent's own session (the same one every time, re-opened when it was closed); an
/// unbound channel answers empty; bad input names the field.
#[tokio::test]
async fn resolve_channel_answers_the_bound_agents_session() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    define(&h, "helper", "description: Helps\n");
    let def =
        super::definitions::find(&h.app.skills, Some(&h.workdir), "params.name", "helper").unwrap();
    let named = h
        .app
        .agents
        .register_named("params.name", &def)
        .await
        .unwrap();
    std::fs::write(
        h.home.root().join("credentials.json"),
        json!({"telegram": "1:token"}).to_string(),
    )
    .unwrap();
    h.app
        .agents
        .bind_channel(pb::AgentBindChannelParams {
            name: "helper".into(),
            channel: "telegram:42".into(),
            credentials_ref: None,
        })
        .await
        .unwrap();
    let ask = |platform: &str, channel: &str| pb::ResolveChannelRequest {
        platform: platform.into(),
        channel: channel.into(),
        workdir: h.workdir.to_string_lossy().into_owned(),
        origin_surface: format!("gateway:{platform}:{channel}"),
        agent: String::new(),
    };
    let r = h
        .app
        .agents
        .resolve_channel(ask("telegram", "42"))
        .await
        .unwrap();
    assert_eq!(
        (r.session_id.as_str(), r.agent.as_str()),
        (named.session_id.as_str(), "helper")
    );
    // Closed meanwhile: re-opened under the same id.
    h.app.sessions.close(&named.session_id).await.unwrap();
    let again = h
        .app
        .agents
        .resolve_channel(ask("telegram", "42"))
        .await
        .unwrap();
    assert_eq!(again.session_id, named.session_id);
    assert!(h.app.sessions.get(&named.session_id).is_ok());
    // Another channel, or the same id on another platform: not bound.
    for (p, c) in [("telegram", "43"), ("slack", "42")] {
        let r = h.app.agents.resolve_channel(ask(p, c)).await.unwrap();
        assert_eq!(r, pb::ResolveChannelReply::default(), "{p}:{c}");
    }
    // A `gateway.bind{target:{agent}}` binding names the agent: a named one answers with its
    // own session even for a channel `agent.bindChannel` never bound; a plain name, nothing.
    for (agent, want) in [("helper", named.session_id.as_str()), ("nobody", "")] {
        let r = h
            .app
            .agents
            .resolve_channel(pb::ResolveChannelRequest {
                agent: agent.into(),
                ..ask("slack", "C9")
            })
            .await
            .unwrap();
        assert_eq!(r.session_id, want, "{agent}");
    }
    for (p, c, field) in [
        ("fax", "1", "params.platform"),
        ("telegram", " ", "params.channel"),
    ] {
        let e = h.app.agents.resolve_channel(ask(p, c)).await.unwrap_err();
        assert_eq!(refused_field(e).0, field);
    }
}

/// `session.create{agent}` loads the definition's persona (the row keeps the name) and
/// refuses an unknown or malformed one on `params.agent`, creating nothing.
#[tokio::test]
async fn session_create_with_an_agent_runs_as_its_definition() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    define(&h, "reviewer", "tools: [read_file]\n");
    define(&h, "broken", "tools: 7\n");
    let ctx = Harness::ctx("c1", Some("cli"));
    let create = |agent: &str| pb::SessionCreateParams {
        workdir: h.workdir.to_string_lossy().into_owned(),
        mode: Some("accept".into()),
        agent: Some(agent.into()),
        ..Default::default()
    };
    let before = h
        .app
        .sessions
        .list(Default::default())
        .await
        .unwrap()
        .sessions
        .len();
    for bad in ["nope", "broken", "../x"] {
        let e = h
            .app
            .agents
            .create_session(&ctx, create(bad))
            .await
            .unwrap_err();
        assert_eq!(refused_field(e).0, "params.agent", "{bad}");
    }
    let after = h
        .app
        .sessions
        .list(Default::default())
        .await
        .unwrap()
        .sessions
        .len();
    assert_eq!(before, after, "a refused create creates nothing");
    let sid = h
        .app
        .agents
        .create_session(&ctx, create("reviewer"))
        .await
        .unwrap()
        .session_id;
    let row = h.app.sessions.get(&sid).unwrap().row();
    assert_eq!(row.agent.as_deref(), Some("reviewer"));
    let profile = h
        .app
        .agents
        .turn_profile(&h.app.sessions.get(&sid).unwrap())
        .await;
    assert_eq!(
        profile.definition.map(|d| d.name).as_deref(),
        Some("reviewer"),
        "the persona is loaded for its turns"
    );
}

/// `ChannelInternalService.CheckTarget` (QA): a stored session (open or saved) and a named
/// agent or a definition visible from the workdir exist; deleted ones and unknown names do
/// not; neither or both is refused on `params.target`.
#[tokio::test]
async fn check_target_knows_sessions_and_agents() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    define(&h, "helper", "description: Helps\n");
    let sid = h.create("accept").await;
    let wd = h.workdir.to_string_lossy().into_owned();
    let check = |session: &str, agent: &str| pb::CheckTargetRequest {
        session_id: session.into(),
        agent: agent.into(),
        workdir: wd.clone(),
    };
    let found = |r: snowpea_session_error::Result<pb::CheckTargetReply>| r.unwrap().found;
    assert!(found(h.app.agents.check_target(check(&sid, "")).await));
    assert!(found(h.app.agents.check_target(check("", "helper")).await));
    assert!(!found(h.app.agents.check_target(check("nope", "")).await));
    assert!(!found(h.app.agents.check_target(check("", "nobody")).await));
    // A definition of another project is not visible from a workdir without it.
    let elsewhere = pb::CheckTargetRequest {
        workdir: "/".into(),
        ..check("", "helper")
    };
    assert!(!found(h.app.agents.check_target(elsewhere).await));
    // Saved (closed) still exists; deleted does not.
    h.app.sessions.close(&sid).await.unwrap();
    assert!(found(h.app.agents.check_target(check(&sid, "")).await));
    h.app.sessions.delete_with(&sid, false).await.unwrap();
    assert!(!found(h.app.agents.check_target(check(&sid, "")).await));
    for (s, a) in [("", ""), ("x", "y")] {
        let e = h.app.agents.check_target(check(s, a)).await.unwrap_err();
        assert_eq!(refused_field(e).0, "params.target");
    }
}

/// `agent.bindChannel{credentialsRef}` (QA): a reference that names no credential is
/// `invalid_params` on `params.credentialsRef` and nothing is stored; a credentials.json key,
/// a `gateway.<ref>` key, `settings:gateway.<platform>` with a token, or an omitted one bind.
#[tokio::test]
async fn bind_channel_refuses_an_unknown_credentials_ref() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    define(&h, "helper", "description: Helps\n");
    let def =
        super::definitions::find(&h.app.skills, Some(&h.workdir), "params.name", "helper").unwrap();
    h.app
        .agents
        .register_named("params.name", &def)
        .await
        .unwrap();
    std::fs::write(
        h.home.root().join("credentials.json"),
        json!({"tg_main": "1:secret-token", "gateway": {"tg_nested": {"token": "2:x"}}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        h.home.settings_path(),
        json!({"gateway": {"telegram": {"token": "3:y"}}}).to_string(),
    )
    .unwrap();
    let bind = |channel: &str, credentials_ref: Option<&str>| pb::AgentBindChannelParams {
        name: "helper".into(),
        channel: channel.into(),
        credentials_ref: credentials_ref.map(str::to_owned),
    };
    for bad in ["nope", "SNOWPEA_TEST_NO_SUCH_VAR", "settings:gateway.slack"] {
        let e = h
            .app
            .agents
            .bind_channel(bind("telegram:1", Some(bad)))
            .await
            .unwrap_err();
        let (field, _) = refused_field(e);
        assert_eq!(field, "params.credentialsRef", "{bad}");
    }
    assert!(h.app.agents.bindings().await.unwrap().is_empty());
    // Omitted, it is the platform's own credential ("telegram", as svc-chat resolves it):
    // settings.gateway.telegram.token does not count, and the message says how to add one.
    let e = h
        .app
        .agents
        .bind_channel(bind("telegram:1", None))
        .await
        .unwrap_err();
    let Error::InvalidParams { field, message } = e else {
        panic!("expected invalid_params, got {e:?}")
    };
    assert_eq!(field, "params.credentialsRef");
    assert!(
        message.contains("credentials.json") && message.contains("\"telegram\""),
        "{message}"
    );
    assert!(h.app.agents.bindings().await.unwrap().is_empty());
    std::fs::write(
        h.home.root().join("credentials.json"),
        json!({"tg_main": "1:secret-token", "gateway": {"tg_nested": {"token": "2:x"}, "telegram": "4:z"}})
            .to_string(),
    )
    .unwrap();
    for (i, good) in [
        Some("tg_main"),
        Some("tg_nested"),
        Some("settings:gateway.telegram"),
        None,
    ]
    .into_iter()
    .enumerate()
    {
        h.app
            .agents
            .bind_channel(bind(&format!("telegram:{i}"), good))
            .await
            .unwrap_or_else(|e| panic!("{good:?}: {e:?}"));
    }
    assert_eq!(h.app.agents.bindings().await.unwrap().len(), 4);
}

/// The mode a child of `parent` running definition `agent` gets (the child holds its turn).
async fn child_mode(h: &Harness, parent: &str, agent: &str) -> String {
    let child = h
        .app
        .agents
        .spawn_child(ChildSpec {
            parent_session_id: parent.to_owned(),
            agent: Some(agent.into()),
            task: format!("hold as {agent}"),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = child.agent_id.clone();
    let sid = snowpea_testkit::eventually(
        std::time::Duration::from_secs(20),
        "child session",
        || async {
            h.app
                .agents
                .running()
                .into_iter()
                .find(|r| r.agent_id == id)
                .and_then(|r| r.session_id())
        },
    )
    .await;
    let mode = h.app.sessions.get(&sid).unwrap().row().mode;
    child.cancel();
    mode
}

#[tokio::test]
async fn a_definitions_permission_narrows_the_mode_but_never_widens_it() {
    let h = Harness::new(
        json!({"steps": [{"match": "hold", "delaySec": 30, "text": "late", "repeat": true}], "default": {"text": "ok"}}),
    )
    .await;
    define(&h, "planner", "permission: plan\n");
    define(&h, "wide", "permission: auto\n");
    define(&h, "plain", "permission: default\n");
    let root = h.create("accept").await;
    // Delegated children: the definition's mode, capped by the parent's.
    assert_eq!(child_mode(&h, &root, "planner").await, "plan");
    assert_eq!(child_mode(&h, &root, "wide").await, "accept");
    assert_eq!(child_mode(&h, &root, "plain").await, "accept");
    let auto_root = h.create("auto").await;
    assert_eq!(child_mode(&h, &auto_root, "wide").await, "auto");

    // session.setAgent: widening is ignored, narrowing is applied like session.setMode.
    let origin = Harness::ctx("c1", Some("cli"));
    let set = |agent: &str| pb::SessionSetAgentParams {
        session_id: root.clone(),
        agent: Some(agent.into()),
        guard_turn: false,
    };
    h.app.agents.set_agent(&origin, set("wide")).await.unwrap();
    assert_eq!(h.app.sessions.get(&root).unwrap().row().mode, "accept");
    h.app
        .agents
        .set_agent(&origin, set("planner"))
        .await
        .unwrap();
    assert_eq!(h.app.sessions.get(&root).unwrap().row().mode, "plan");
    let events = h.app.events.after(&root, 0).await.unwrap();
    let changes: Vec<_> = events
        .iter()
        .filter(|e| e.kind == "mode.changed")
        .map(|e| e.payload["mode"].clone())
        .collect();
    assert_eq!(changes, vec![json!("plan")]);

    // session.create{agent}: the asked-for mode, narrowed by the definition.
    let create = |agent: &str, mode: &str| pb::SessionCreateParams {
        workdir: h.workdir.to_string_lossy().into_owned(),
        mode: Some(mode.into()),
        agent: Some(agent.into()),
        ..Default::default()
    };
    for (agent, asked, expect) in [("planner", "auto", "plan"), ("wide", "accept", "accept")] {
        let sid = h
            .app
            .agents
            .create_session(&origin, create(agent, asked))
            .await
            .unwrap()
            .session_id;
        assert_eq!(
            h.app.sessions.get(&sid).unwrap().row().mode,
            expect,
            "{agent} asked {asked}"
        );
    }
}
