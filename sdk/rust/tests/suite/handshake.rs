//! `system.hello`: capabilities, refused tokens, unreachable daemons, `daemon.json`.

use snowpea_sdk::{Client, ConnectOptions, DaemonInfo, Error};

use super::fake_server::{within, FakeServer, TOKEN};

#[tokio::test]
async fn hello_result_is_kept() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    assert_eq!(client.hello()["serverVersion"], "fake");
    assert!(client.has_capability("approvals"));
    assert!(!client.has_capability("audio"));
    assert_eq!(client.generation(), 1);
    within(client.close()).await;
}

#[tokio::test]
async fn bad_token_is_unauthorized_and_leaves_nothing_running() {
    let server = FakeServer::bind().await;
    let mut opts = server.options();
    opts.token = "wrong".into();
    opts.reconnect = Some(super::fake_server::fast_reconnect());
    let err = within(Client::connect(opts))
        .await
        .expect_err("hello must fail");
    assert_eq!(err.code_str(), Some("unauthorized"), "{err:?}");
    assert!(matches!(err, Error::Rpc(ref e) if e.code == -32000));
    // No task retries in the background: the server sees no further connection.
    snowpea_testkit::assert_eventually!(
        within = super::fake_server::T,
        server.live() == 0,
        "connection released"
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(server.accepted(), 1);
}

#[tokio::test]
async fn unreachable_daemon_is_a_connect_error() {
    let listener = within(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let err = within(Client::connect(ConnectOptions::new(port, TOKEN)))
        .await
        .expect_err("nothing listens");
    assert!(matches!(err, Error::Connect(_)), "{err:?}");
}

#[tokio::test]
async fn options_from_daemon_json() {
    let server = FakeServer::bind().await;
    let home = tempfile::tempdir().expect("tempdir");
    let info = format!(
        r#"{{"port":{},"pid":42,"token":"{TOKEN}","startedAt":"2025-01-01T00:00:00Z","protocolVersion":"1.25.0"}}"#,
        server.port
    );
    std::fs::write(home.path().join("daemon.json"), info).expect("write daemon.json");
    let parsed = DaemonInfo::read(home.path()).expect("read");
    assert_eq!(
        (parsed.port, parsed.pid, parsed.token.as_str()),
        (server.port, 42, TOKEN)
    );
    let opts = ConnectOptions::from_home(home.path()).expect("options");
    assert_eq!(opts.ws_url(), format!("ws://127.0.0.1:{}/ws", server.port));
    let client = within(Client::connect(opts)).await.expect("connect");
    within(client.close()).await;

    let missing = ConnectOptions::from_home(&home.path().join("nope")).expect_err("no file");
    assert!(matches!(missing, Error::Connect(_)));
}
