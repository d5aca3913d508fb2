//! A platform that cannot be reached: one `gateway.event{error}` per outage (not one per
//! retry), a changed `settings.gateway.telegram.baseUrl` reconnects without a restart, and a
//! drop after being up is `disconnected` then at most one `error` until `connected` again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_proto::chat::v1::gateway_service_client::GatewayServiceClient;
use snowpea_proto::chat::v1::GatewayBindParams;
use snowpea_proto::rpc::v1::outbound::Item;
use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;
use snowpea_proto::rpc::v1::{SettingsChange, SubscribeRequest};
use snowpea_testkit::fake_chat::FakeTelegram;
use snowpea_testkit::{assert_eventually, within};
use tokio::sync::mpsc;

const TOKEN: &str = "42:connection-test-token";
const T: Duration = Duration::from_secs(20);

/// A TCP port that accepts and at once closes every connection, counting them.
async fn closing_port() -> (String, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            drop(sock);
        }
    });
    (format!("http://{addr}"), count)
}

fn write_settings(home: &std::path::Path, base_url: &str) {
    std::fs::write(
        home.join("settings.json"),
        json!({"gateway": {"telegram": {"baseUrl": base_url, "pollTimeoutSec": 1, "maxBackoffSec": 1}}})
            .to_string(),
    )
    .unwrap();
}

/// The `gateway.event` kinds (with payloads) received up to and including the next
/// `connected`.
async fn until_connected(
    rx: &mut mpsc::UnboundedReceiver<(String, Value)>,
) -> Vec<(String, Value)> {
    within(T, "connected", async {
        let mut seen = Vec::new();
        while let Some((kind, payload)) = rx.recv().await {
            let done = kind == "connected";
            seen.push((kind, payload));
            if done {
                return seen;
            }
        }
        panic!("bus closed")
    })
    .await
}

fn count(events: &[(String, Value)], kind: &str) -> usize {
    events.iter().filter(|(k, _)| k == kind).count()
}

#[tokio::test]
async fn an_unreachable_platform_is_reported_once_and_a_new_base_url_reconnects() {
    let fake = FakeTelegram::start(TOKEN).await;
    let (dead_url, attempts) = closing_port().await;
    let home = tempfile::tempdir().unwrap();
    write_settings(home.path(), &dead_url);
    std::fs::write(
        home.path().join("credentials.json"),
        json!({"tg": TOKEN}).to_string(),
    )
    .unwrap();
    let svc = super::start(home.path()).await;
    let mut bus = ServiceBusClient::new(svc.channel());
    let mut stream = within(
        T,
        "subscribe",
        bus.subscribe(SubscribeRequest {
            gateway_id: "test".into(),
        }),
    )
    .await
    .unwrap()
    .into_inner();
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(out)) = stream.message().await {
            if let Some(Item::Notification(n)) = out.item {
                if n.method == "gateway.event" {
                    let p: Value = serde_json::from_str(&n.params_json).unwrap();
                    let _ = tx.send((
                        p["kind"].as_str().unwrap_or("").to_owned(),
                        p["payload"].clone(),
                    ));
                }
            }
        }
    });

    let mut client = GatewayServiceClient::new(svc.channel());
    within(
        T,
        "bind",
        client.bind(GatewayBindParams {
            channel_id: None,
            credentials_ref: "tg".into(),
            platform: "telegram".into(),
            target: Some(snowpea_proto::wkt::to_struct(
                &json!({"new_session": {"workdir": "/w"}}),
            )),
            user_id: None,
        }),
    )
    .await
    .unwrap();
    // Several attempts fail while the API cannot be reached.
    assert_eventually!(attempts.load(Ordering::SeqCst) >= 3);
    let state = within(T, "list", client.list(()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state.bindings[0].state, "inactive");

    // The base URL changes in the settings: svc-chat is told and reconnects there.
    write_settings(home.path(), &fake.base_url());
    within(
        T,
        "settings changed",
        bus.settings_changed(SettingsChange {
            scope: "global".into(),
            keys: vec!["gateway".into()],
        }),
    )
    .await
    .unwrap();
    let outage = until_connected(&mut rx).await;
    assert_eq!(
        count(&outage, "error"),
        1,
        "one error for the outage: {outage:?}"
    );
    let (_, error) = outage.iter().find(|(k, _)| k == "error").unwrap();
    assert_eq!(error["platform"], "telegram");
    assert!(
        error["message"].as_str().unwrap().contains("getUpdates"),
        "{error}"
    );
    assert!(!error.to_string().contains(TOKEN), "no token in events");
    assert_eventually!(
        within(T, "list", client.list(()))
            .await
            .unwrap()
            .into_inner()
            .bindings[0]
            .state
            == "active"
    );

    // A drop after being up: disconnected, then one error however many retries fail.
    let polls = fake.get_updates_calls();
    fake.drop_next_polls(4);
    let again = until_connected(&mut rx).await;
    assert!(
        fake.get_updates_calls() >= polls + 5,
        "every failed poll was retried"
    );
    assert_eq!(count(&again, "disconnected"), 1, "{again:?}");
    assert_eq!(count(&again, "error"), 1, "{again:?}");
    assert!(!svc.log().contains(TOKEN), "token in the log");
}
