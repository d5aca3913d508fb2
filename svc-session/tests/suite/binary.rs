//! The real `snowpea-svc-session` process on a temp home, driven over its unix socket the
//! way the gateway does: health, the bus (Subscribe, SyncConnections), SessionService with
//! connection metadata. Covers a full turn, kill -9 during a turn (synthetic `turn.done`
//! after the restart) and kill -9 while idle (sessions listed, resume works).

use serde_json::{json, Value};
use snowpea_common::client::is_serving;
use snowpea_common::context::CallContext;
use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;
use snowpea_proto::rpc::v1::{outbound, ConnectionInfo, ConnectionSet, Outbound, SubscribeRequest};
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::session_service_client::SessionServiceClient;
use snowpea_testkit::{within, ServiceProcess, WAIT};
use tonic::Streaming;

/// svc-session from the one test kit's [`ServiceProcess`], with the scripted provider.
struct Svc(ServiceProcess);

impl Svc {
    async fn start(home: &std::path::Path, script: &std::path::Path) -> Svc {
        std::fs::create_dir_all(home).unwrap();
        let svc = ServiceProcess::new("session", env!("CARGO_BIN_EXE_snowpea-svc-session"), home)
            .env("SNOWPEA_PROVIDER", format!("fake:{}", script.display()))
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .start()
            .await;
        for name in [
            "snowpea.session.v1.SessionService",
            "snowpea.session.v1.ApprovalService",
            "snowpea.session.v1.ToolService",
            "snowpea.rpc.v1.ServiceBus",
        ] {
            assert!(
                is_serving(svc.socket(), name, std::time::Duration::from_secs(2)).await,
                "{name}"
            );
        }
        Svc(svc)
    }

    async fn restart(&mut self) {
        self.0.restart().await;
    }

    fn sessions(&self) -> SessionServiceClient<tonic::transport::Channel> {
        SessionServiceClient::new(self.0.channel())
    }

    /// Subscribes like the gateway and announces connection `c1`.
    async fn gateway(&self) -> Streaming<Outbound> {
        let mut bus = ServiceBusClient::new(self.0.channel());
        let feed = within(
            WAIT,
            "Subscribe",
            bus.subscribe(SubscribeRequest {
                gateway_id: "test".into(),
            }),
        )
        .await
        .unwrap()
        .into_inner();
        within(
            WAIT,
            "SyncConnections",
            bus.sync_connections(ConnectionSet {
                full: true,
                connections: vec![ConnectionInfo {
                    connection_id: "c1".into(),
                    client_id: Some("cli".into()),
                    client_version: "t".into(),
                    ..Default::default()
                }],
                closed: vec![],
            }),
        )
        .await
        .unwrap();
        feed
    }
}

fn with_ctx<T>(msg: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    CallContext {
        connection_id: Some("c1".into()),
        client_id: Some("cli".into()),
        ..Default::default()
    }
    .apply(req.metadata_mut());
    req
}

/// Session events from the feed until `kind` (of `turn_id`, if given).
async fn events_until(feed: &mut Streaming<Outbound>, kind: &str, turn_id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let item = within(WAIT, "the next bus message", feed.message())
            .await
            .unwrap()
            .unwrap();
        if let Some(outbound::Item::Notification(n)) = item.item {
            if n.method != "session.event" {
                continue;
            }
            let p: Value = serde_json::from_str(&n.params_json).unwrap();
            let hit = p["kind"] == kind && p["payload"]["turnId"] == turn_id;
            out.push(p);
            if hit {
                return out;
            }
        }
    }
}

#[tokio::test]
async fn serves_a_turn_and_survives_kill_9_during_a_turn_and_while_idle() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let script = tmp.path().join("script.json");
    std::fs::write(
        &script,
        json!({"steps": [{"match": "slow", "delaySec": 60, "text": "never"}], "default": {"text": "hello from the fake model"}}).to_string(),
    )
    .unwrap();
    let mut svc = Svc::start(&home, &script).await;
    let mut feed = svc.gateway().await;
    let mut client = svc.sessions();

    let created = client
        .create(with_ctx(pb::SessionCreateParams {
            workdir: work.to_string_lossy().into(),
            mode: Some("auto".into()),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    let sid = created.session_id;
    let bad = client
        .create(with_ctx(pb::SessionCreateParams {
            workdir: "relative".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        snowpea_proto::error::RpcError::from_status(&bad)
            .details
            .unwrap()["field"],
        "params.workdir"
    );

    let t1 = client
        .prompt(with_ctx(pb::SessionPromptParams {
            session_id: sid.clone(),
            text: "hi".into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .turn_id;
    let ev = events_until(&mut feed, "turn.done", &t1).await;
    let text: String = ev
        .iter()
        .filter(|e| e["kind"] == "message.delta")
        .map(|e| e["payload"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "hello from the fake model");
    let last_seq = ev.last().unwrap()["seq"].as_i64().unwrap();

    // kill -9 during a turn: after the restart the turn is closed by a synthetic turn.done.
    let t2 = client
        .prompt(with_ctx(pb::SessionPromptParams {
            session_id: sid.clone(),
            text: "slow please".into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .turn_id;
    events_until(&mut feed, "message.user", &t2).await;
    svc.restart().await;
    let mut client = svc.sessions();
    let listed = client
        .list(pb::SessionListParams::default())
        .await
        .unwrap()
        .into_inner();
    assert!(
        listed.sessions.iter().any(|s| s.session_id == sid),
        "session listed after restart"
    );
    let resumed = client
        .resume(pb::SessionResumeParams {
            session_id: sid.clone(),
            after_seq: Some(last_seq),
            locale: None,
        })
        .await
        .unwrap()
        .into_inner();
    let kinds: Vec<_> = resumed.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["turn.started", "message.user", "turn.done"],
        "exactly the events after {last_seq}"
    );
    assert_eq!(resumed.events[0].seq, last_seq + 1);
    let done: serde_json::Value = serde_json::from_str(&resumed.events[2].payload).unwrap();
    assert_eq!(
        done,
        json!({"turnId": t2, "reason": "interrupted", "synthetic": true})
    );

    // The session works after the restart, then survives a kill -9 while idle.
    let mut feed = svc.gateway().await;
    let t3 = client
        .prompt(with_ctx(pb::SessionPromptParams {
            session_id: sid.clone(),
            text: "again".into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .turn_id;
    let ev = events_until(&mut feed, "turn.done", &t3).await;
    assert_eq!(ev.last().unwrap()["payload"]["reason"], "complete");
    let all_before = client
        .resume(pb::SessionResumeParams {
            session_id: sid.clone(),
            after_seq: None,
            locale: None,
        })
        .await
        .unwrap()
        .into_inner()
        .events
        .len();
    svc.restart().await;
    let mut client = svc.sessions();
    let all_after = client
        .resume(pb::SessionResumeParams {
            session_id: sid.clone(),
            after_seq: None,
            locale: None,
        })
        .await
        .unwrap()
        .into_inner()
        .events;
    assert_eq!(all_after.len(), all_before, "an idle restart adds nothing");
    let seqs: Vec<i64> = all_after.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    let missing = client
        .resume(pb::SessionResumeParams {
            session_id: "s_missing".into(),
            after_seq: None,
            locale: None,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
}
