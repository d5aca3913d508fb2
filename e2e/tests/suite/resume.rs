//! Resume after a dropped connection returns exactly the missed events.
use std::time::Duration;

use serde_json::json;
use snowpea_e2e::{Suite, SuiteOptions};

#[tokio::test]
async fn resume_after_a_dropped_connection_returns_exactly_the_missed_events() {
    let script = json!({"steps": [
        {"match": "slow", "delaySec": 1.0, "text": "a fairly long answer that streams in several small pieces to the client"}
    ]});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    // Connection A: create, prompt, read the first events, then drop the socket.
    let mut ws = suite.raw_hello().await;
    let r = ws
        .call(
            "session.create",
            json!({"workdir": suite.workdir.path(), "mode": "plan"}),
        )
        .await;
    let sid = r["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_owned();
    let r = ws
        .call(
            "session.prompt",
            json!({"sessionId": sid, "text": "slow please"}),
        )
        .await;
    let turn = r["result"]["turnId"].as_str().unwrap().to_owned();
    let mut last_seen = 0;
    while last_seen < 2 {
        let n = ws.recv_any(Duration::from_secs(20)).await.expect("event");
        if n["method"] == "session.event" && n["params"]["sessionId"] == sid.as_str() {
            last_seen = n["params"]["seq"].as_u64().unwrap();
        }
    }
    drop(ws);

    // Connection B waits for the turn to finish, then resumes from what A saw.
    let client = suite.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let full = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "turn {turn} did not finish within 60 s"
        );
        let evs = client.resume(&sid, 0).await.unwrap();
        if evs
            .iter()
            .any(|e| e.kind == "turn.done" && e.payload["turnId"] == turn.as_str())
        {
            break evs;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let missed = client.resume(&sid, last_seen).await.unwrap();
    let expected: Vec<u64> = full
        .iter()
        .map(|e| e.seq)
        .filter(|s| *s > last_seen)
        .collect();
    let got: Vec<u64> = missed.iter().map(|e| e.seq).collect();
    assert_eq!(got, expected);
    assert_eq!(got.first().copied(), Some(last_seen + 1));
    assert_eq!(missed.last().unwrap().kind, "turn.done");
    // seq starts at 1 and is contiguous.
    let seqs: Vec<u64> = full.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let r = client.resume("s_unknown", 0).await.unwrap_err();
    assert_eq!(r.code_str(), Some("not_found"));
}
