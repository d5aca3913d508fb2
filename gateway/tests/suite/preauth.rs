//! Issue 37 §3, before authentication: connections without a successful `system.hello` are
//! capped (one more upgrade is refused 503 at once) and have a deadline (the WebSocket is
//! closed 1008, a socket that never sends its HTTP request is dropped); an authenticated
//! client goes on being served throughout.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncReadExt;

use super::client::Client;
use super::fake::FakeService;
use super::harness::{GatewayProc, Opts, TestHome};

/// The cap and the deadline of this test's gateway.
const CAP: usize = 4;
const DEADLINE_MS: u64 = 1500;

#[tokio::test]
async fn unauthenticated_connections_are_capped_and_timed_and_the_authenticated_go_on() {
    let home = TestHome::new();
    let _fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(
        &home,
        Opts {
            env: vec![
                ("SNOWPEA_MAX_UNAUTHENTICATED", CAP.to_string()),
                ("SNOWPEA_HELLO_DEADLINE_MS", DEADLINE_MS.to_string()),
            ],
            ..Default::default()
        },
    );
    let mut authed = gw.authed().await;
    let started = Instant::now();

    // CAP idle upgrades fill the budget; one more is refused before any upgrade.
    let mut idle = Vec::new();
    for _ in 0..CAP {
        idle.push(gw.connect().await);
    }
    let refused = tokio_tungstenite::connect_async(gw.ws_url()).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            assert_eq!(resp.status(), 503);
            let body =
                String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).to_string();
            assert!(body.contains("system.hello"), "{body}");
        }
        other => panic!("the upgrade past the cap was not refused 503: {other:?}"),
    }
    // The authenticated client is served meanwhile.
    authed.ok("session.list", json!({})).await;

    // A hello gives the place back at once: a new upgrade fits.
    let mut first = idle.remove(0);
    first.hello(&home.token).await;
    let mut late = gw.connect().await;
    // A failed second hello leaves it unauthenticated, but it did authenticate once: the
    // deadline is not for it.
    let refused = first
        .err(
            "system.hello",
            json!({"token": "wrong", "clientVersion": "test",
                   "protocolVersion": snowpea_proto::PROTOCOL_VERSION}),
        )
        .await;
    assert_eq!(refused["data"]["code"], "unauthorized", "{refused}");

    // A raw socket that never sends its request holds no place for long either.
    let mut silent = tokio::net::TcpStream::connect(("127.0.0.1", gw.port))
        .await
        .unwrap();

    // Past the deadline: the idle WebSockets are closed 1008 with the reason...
    for c in idle.iter_mut().chain(std::iter::once(&mut late)) {
        let frame = c.expect_close().await.expect("a close frame");
        assert_eq!(u16::from(frame.code), 1008);
        assert!(frame.reason.contains("system.hello"), "{}", frame.reason);
    }
    assert!(started.elapsed() >= Duration::from_millis(DEADLINE_MS));
    // ...the silent socket is dropped...
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(20), silent.read(&mut buf))
        .await
        .expect("the silent socket was not dropped")
        .unwrap_or(0);
    assert_eq!(n, 0, "the server closed the silent socket");
    // ...and the one that said hello (then failed one) is still open: it says hello again
    // and is served, as is the first client.
    first.hello(&home.token).await;
    first.ok("session.list", json!({})).await;
    authed.ok("session.list", json!({})).await;
    let info = authed.ok("system.info", json!({})).await;
    assert!(
        info["counters"]["unauthenticatedRefused"].as_i64() >= Some(1),
        "{info}"
    );
    assert!(
        info["counters"]["helloTimeouts"].as_i64() >= Some(CAP as i64),
        "{info}"
    );
    // The budget is free again.
    let mut again = Client::connect(&gw.ws_url()).await;
    again.hello(&home.token).await;
}
