//! Crash tests: kill -9 of svc-session (idle and mid-turn) and of the gateway.
use std::time::Duration;

use serde_json::json;
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::ReconnectPolicy;

#[tokio::test]
async fn kill9_of_idle_session_service_keeps_sessions() {
    let suite = Suite::start().await;
    let client = suite.client().await;
    let sid = client
        .create_session(suite.workdir.path(), Some("plan"))
        .await
        .unwrap();
    let out = client
        .prompt_and_collect(&sid, "hello", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    let before = client.resume(&sid, 0).await.unwrap();

    let old = suite.kill9("session");
    suite.wait_restarted("session", old).await;
    let (_, _, restarts) = suite.process("session");
    assert!(restarts >= 1);

    let listed = client.call("session.list", json!({})).await.unwrap();
    assert!(
        listed.to_string().contains(&sid),
        "session survives the restart: {listed}"
    );
    let after = client.resume(&sid, 0).await.unwrap();
    assert_eq!(after.len(), before.len());
    // It still works.
    let out = client
        .prompt_and_collect(&sid, "again", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
}

#[tokio::test]
async fn kill9_during_a_turn_closes_it_with_a_synthetic_turn_done() {
    let script = json!({"steps": [{"match": "hang", "delaySec": 60, "text": "never"}]});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let sid = client
        .create_session(suite.workdir.path(), Some("plan"))
        .await
        .unwrap();
    let mut events = client.events(&sid);
    let turn = client.prompt(&sid, "hang on").await.unwrap();
    loop {
        if events.next(Duration::from_secs(20)).await.unwrap().kind == "message.user" {
            break;
        }
    }
    let old = suite.kill9("session");
    suite.wait_restarted("session", old).await;
    let evs = client.resume(&sid, 0).await.unwrap();
    let last = evs.last().unwrap();
    assert_eq!(last.kind, "turn.done", "{evs:?}");
    assert_eq!(last.payload["turnId"], turn.as_str());
    assert_eq!(last.payload["reason"], "interrupted");
    assert_eq!(last.payload["synthetic"], true);
}

#[tokio::test]
async fn kill9_of_the_gateway_keeps_the_port_and_the_client_resumes() {
    let script = json!({"steps": [{"match": "slow", "delaySec": 2.0, "text": "done after the gateway came back"}]});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite
        .client_with(|o| {
            o.with_reconnect(ReconnectPolicy {
                initial_delay: Duration::from_millis(50),
                ..Default::default()
            })
        })
        .await;
    let sid = client
        .create_session(suite.workdir.path(), Some("plan"))
        .await
        .unwrap();
    let mut events = client.events(&sid);
    let turn = client.prompt(&sid, "slow").await.unwrap();
    let old = suite.kill9("gateway");
    suite.wait_restarted("gateway", old).await;
    let daemon: serde_json::Value =
        serde_json::from_slice(&std::fs::read(suite.home().join("daemon.json")).unwrap()).unwrap();
    assert_eq!(
        daemon["port"], suite.port,
        "same port after a gateway restart"
    );
    let out = events
        .wait_for_turn_done(&turn, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    // Exactly once, in order: the delivered events equal the stored log.
    let stored = client.resume(&sid, 0).await.unwrap();
    let delivered: Vec<u64> = out.events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = stored
        .iter()
        .map(|e| e.seq)
        .filter(|s| *s >= delivered[0])
        .collect();
    assert_eq!(delivered, expected);
}
