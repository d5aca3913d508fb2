//! close() and drop stop the connection task: no reconnects afterwards, waiters released.

use std::time::Duration;

use serde_json::json;
use snowpea_sdk::{Client, ConnectionState, Error};
use tokio::sync::broadcast;

use super::fake_server::{fast_reconnect, within, FakeServer};

#[tokio::test]
async fn close_stops_the_connection_and_releases_everyone() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(
        server.options().with_reconnect(fast_reconnect()),
    ))
    .await
    .expect("connect");
    let mut raw = client.subscribe();
    let mut events = client.events("s-any");
    within(client.close()).await;
    assert_eq!(client.connection_state(), ConnectionState::Closed);
    assert!(matches!(
        within(client.call("echo", json!(1))).await,
        Err(Error::Closed)
    ));
    assert!(matches!(
        within(raw.recv()).await,
        Err(broadcast::error::RecvError::Closed)
    ));
    assert!(matches!(
        within(events.next(Duration::from_secs(5))).await,
        Err(Error::Closed)
    ));
    snowpea_testkit::assert_eventually!(
        within = super::fake_server::T,
        server.live() == 0,
        "server sees the close"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.accepted(), 1, "no reconnect after close");
    within(client.close()).await; // idempotent
}

#[tokio::test]
async fn dropping_the_client_stops_the_connection() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(
        server.options().with_reconnect(fast_reconnect()),
    ))
    .await
    .expect("connect");
    let mut raw = client.subscribe();
    drop(client);
    snowpea_testkit::assert_eventually!(
        within = super::fake_server::T,
        server.live() == 0,
        "server sees the drop"
    );
    assert!(matches!(
        within(raw.recv()).await,
        Err(broadcast::error::RecvError::Closed)
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.accepted(), 1, "no reconnect after drop");
}

#[tokio::test]
async fn pending_call_fails_closed_when_the_client_closes() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    let (pending, ()) = within(async {
        tokio::join!(client.call("never", json!({})), async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            client.close().await;
        })
    })
    .await;
    assert!(matches!(pending, Err(Error::Closed)), "{pending:?}");
}
