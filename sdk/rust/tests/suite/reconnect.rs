//! Reconnect + resume: every session event exactly once, in order, across a dropped socket;
//! gap filling; calls in flight and calls made while reconnecting.

use std::time::Duration;

use serde_json::json;
use snowpea_sdk::{Client, ConnectionState, Error, Notification};
use tokio::sync::broadcast;

use super::fake_server::{fast_reconnect, within, FakeServer};

/// Reads `session.event` seqs of `session_id` from a raw subscription until `last`, then
/// checks that nothing else arrives for a moment.
async fn seqs_until(
    rx: &mut broadcast::Receiver<Notification>,
    session_id: &str,
    last: u64,
) -> Vec<u64> {
    let mut seqs = Vec::new();
    while seqs.last() != Some(&last) {
        let n = within(rx.recv()).await.expect("notification");
        if let Some(event) = n.session_event() {
            if event.session_id == session_id {
                seqs.push(event.seq);
            }
        }
    }
    let extra = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await;
    assert!(extra.is_err(), "unexpected extra notification: {extra:?}");
    seqs
}

#[tokio::test]
async fn reconnect_resumes_every_event_exactly_once_in_order() {
    let server = FakeServer::bind().await;
    let opts = server.options().with_reconnect(fast_reconnect());
    let client = within(Client::connect(opts)).await.expect("connect");
    let sid = within(client.create_session("/tmp".as_ref(), None))
        .await
        .expect("create");
    let mut raw = client.subscribe();
    let mut events = client.events(&sid);

    server.emit(&sid, 5);
    for expected in 1..=5 {
        assert_eq!(
            within(events.next(Duration::from_secs(5)))
                .await
                .expect("event")
                .seq,
            expected
        );
    }

    // Drop the socket; more events happen while the client cannot get back in.
    server.pause(true);
    server.kill_all();
    snowpea_testkit::assert_eventually!(
        within = super::fake_server::T,
        { client.connection_state() == ConnectionState::Reconnecting },
        "client notices"
    );
    server.emit(&sid, 5);
    // A call made now waits for the reconnect.
    let waiting = {
        let client = &client;
        async move { client.call("echo", json!("after")).await }
    };
    let unpause = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.pause(false);
    };
    let (answer, ()) = within(async { tokio::join!(waiting, unpause) }).await;
    assert_eq!(answer.expect("call waits for reconnect"), "after");
    assert_eq!(client.generation(), 2);

    // Live events right after the reconnect race the resume; a duplicate is sent too.
    server.emit(&sid, 5);
    server.resend(&sid, 12);
    server.emit(&sid, 1);

    let expected: Vec<u64> = (1..=16).collect();
    assert_eq!(seqs_until(&mut raw, &sid, 16).await, expected);
    let mut typed = Vec::new();
    while typed.last() != Some(&16) {
        typed.push(
            within(events.next(Duration::from_secs(5)))
                .await
                .expect("event")
                .seq,
        );
    }
    assert_eq!(typed, (6..=16).collect::<Vec<_>>());
    assert!(
        server.resume_calls().contains(&(sid.clone(), 5)),
        "{:?}",
        server.resume_calls()
    );
    assert_eq!(client.last_seq(&sid), Some(16));
    within(client.close()).await;
}

#[tokio::test]
async fn gap_in_live_events_is_filled_with_resume() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    let sid = within(client.create_session("/tmp".as_ref(), None))
        .await
        .expect("create");
    let mut raw = client.subscribe();
    server.emit(&sid, 1);
    server.store(&sid, 3); // 2..4 never notified
    server.emit(&sid, 2); // 5, 6 live: a gap after 1
    assert_eq!(
        seqs_until(&mut raw, &sid, 6).await,
        (1..=6).collect::<Vec<_>>()
    );
    assert_eq!(server.resume_calls(), [(sid.clone(), 1)]);
    within(client.close()).await;
}

#[tokio::test]
async fn explicitly_tracked_session_is_resumed_from_its_baseline() {
    let server = FakeServer::bind().await;
    let opts = server.options().with_reconnect(fast_reconnect());
    let client = within(Client::connect(opts)).await.expect("connect");
    // A session created by someone else, of which this client has seen 2 events.
    let sid = {
        let other = within(Client::connect(server.options()))
            .await
            .expect("other");
        let sid = within(other.create_session("/tmp".as_ref(), None))
            .await
            .expect("create");
        within(other.close()).await;
        sid
    };
    server.store(&sid, 2);
    client.track(&sid, Some(2));
    let mut raw = client.subscribe();
    server.kill_all();
    server.store(&sid, 2);
    assert_eq!(seqs_until(&mut raw, &sid, 4).await, [3, 4]);
    within(client.close()).await;
}

#[tokio::test]
async fn call_in_flight_fails_closed_and_the_next_one_works() {
    let server = FakeServer::bind().await;
    let opts = server.options().with_reconnect(fast_reconnect());
    let client = within(Client::connect(opts)).await.expect("connect");
    let in_flight = client.call("never", json!({}));
    let kill = async {
        snowpea_testkit::assert_eventually!(
            within = super::fake_server::T,
            server.live() == 1,
            "connected"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.kill_all();
    };
    let (err, ()) = within(async { tokio::join!(in_flight, kill) }).await;
    assert!(matches!(err, Err(Error::Closed)), "{err:?}");
    assert_eq!(
        within(client.call("echo", json!(2))).await.expect("echo"),
        2
    );
    assert_eq!(client.generation(), 2);
    within(client.close()).await;
}

#[tokio::test]
async fn without_reconnect_a_drop_closes_the_client() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    let mut raw = client.subscribe();
    server.kill_all();
    snowpea_testkit::assert_eventually!(
        within = super::fake_server::T,
        { client.connection_state() == ConnectionState::Closed },
        "closed"
    );
    let err = within(client.call("echo", json!(1)))
        .await
        .expect_err("closed");
    assert!(matches!(err, Error::Closed), "{err:?}");
    assert!(matches!(
        within(raw.recv()).await,
        Err(broadcast::error::RecvError::Closed)
    ));
}

#[tokio::test]
async fn reconnect_gives_up_after_max_attempts() {
    let server = FakeServer::bind().await;
    let mut policy = fast_reconnect();
    policy.max_attempts = Some(3);
    let client = within(Client::connect(server.options().with_reconnect(policy)))
        .await
        .expect("connect");
    server.pause(true);
    server.kill_all();
    snowpea_testkit::assert_eventually!(
        within = super::fake_server::T,
        { client.connection_state() == ConnectionState::Closed },
        "gave up"
    );
    assert_eq!(server.accepted(), 4);
}
