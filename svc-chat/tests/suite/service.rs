//! Edge cases without the suite: validation over gRPC, a binding that comes back after a
//! restart, and the cursor that is not committed while svc-session cannot take the message.

use std::time::Duration;

use serde_json::json;
use snowpea_proto::chat::v1::gateway_service_client::GatewayServiceClient;
use snowpea_proto::chat::v1::{GatewayBindParams, GatewayUnbindParams};
use snowpea_proto::error::RpcError;
use snowpea_testkit::fake_chat::FakeTelegram;
use snowpea_testkit::{assert_eventually, within};

const TOKEN: &str = "42:service-test-token";
const T: Duration = Duration::from_secs(15);

fn bind_params(target: serde_json::Value, credentials_ref: &str) -> GatewayBindParams {
    GatewayBindParams {
        channel_id: Some("7".into()),
        credentials_ref: credentials_ref.into(),
        platform: "telegram".into(),
        target: Some(snowpea_proto::wkt::to_struct(&target)),
        user_id: None,
    }
}

#[tokio::test]
async fn validation_restore_and_an_uncommitted_cursor_while_the_daemon_is_down() {
    let fake = FakeTelegram::start(TOKEN).await;
    let home = super::home(&fake.base_url(), &json!({"tg": TOKEN}));
    let mut svc = super::start(home.path()).await;
    let mut client = GatewayServiceClient::new(svc.channel());

    // Validation names the field; nothing is stored.
    for (params, field) in [
        (
            bind_params(json!({"session": ""}), "tg"),
            "params.target.session",
        ),
        (
            bind_params(json!({"new_session": {"workdir": "/w", "mode": "x"}}), "tg"),
            "params.target.new_session.mode",
        ),
        (
            bind_params(json!({"agent": "a"}), "missing_ref"),
            "params.credentialsRef",
        ),
        (
            bind_params(json!({"agent": "a"}), "settings:gateway.telegram"),
            "params.credentialsRef",
        ),
    ] {
        let status = within(T, "bind", client.bind(params)).await.unwrap_err();
        let e = RpcError::from_status(&status);
        assert_eq!(e.code.wire(), "invalid_params", "{e:?}");
        assert!(e.message.contains(field), "{} names {field}", e.message);
    }
    let status = within(
        T,
        "unbind",
        client.unbind(GatewayUnbindParams {
            binding_id: "gw-nope".into(),
        }),
    )
    .await
    .unwrap_err();
    assert_eq!(RpcError::from_status(&status).code.wire(), "not_found");

    let id = within(
        T,
        "bind",
        client.bind(bind_params(json!({"new_session": {"workdir": "/w"}}), "tg")),
    )
    .await
    .unwrap()
    .into_inner()
    .binding_id;
    assert_eventually!(
        within(T, "list", client.list(()))
            .await
            .unwrap()
            .into_inner()
            .bindings[0]
            .state
            == "active"
    );

    // No daemon: the message cannot become a turn, so its update is never confirmed.
    fake.message(7, 1, "hello");
    assert_eventually!(fake.get_updates_calls() >= 4);
    assert_eq!(
        fake.unconfirmed(),
        1,
        "the update stays until svc-session takes it"
    );
    // A chat outside the binding's channelId is dropped (confirmed) without a turn.
    let calls = fake.get_updates_calls();
    fake.message(8, 1, "elsewhere");
    assert_eventually!(fake.get_updates_calls() > calls + 2);
    assert_eq!(fake.unconfirmed(), 2, "nothing passes the held update");

    // A restart brings the binding back.
    svc.kill9();
    svc.spawn().await;
    let mut client = GatewayServiceClient::new(svc.channel());
    let list = within(T, "list", client.list(()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.bindings.len(), 1);
    assert_eq!(list.bindings[0].binding_id, id);
    assert_eq!(list.bindings[0].target, "new_session:/w");
    assert_eq!(list.bindings[0].channel_id.as_deref(), Some("7"));
    assert!(fake.sent().is_empty(), "nothing was answered");
    assert!(
        !svc.log().contains("service-test-token"),
        "token in the log"
    );
}

/// QA: binding the same credential and channel again answers the existing binding (nothing
/// added); the same channel with another target is `invalid_params` on `params.channelId`;
/// another `credentialsRef` holding the same bot token is `invalid_params` on
/// `params.credentialsRef`, and one that comes to hold it later (credentials.json edited) is
/// not connected: `gateway.event{error}` says why. One bot token, one poller.
#[tokio::test]
async fn one_binding_per_credential_and_channel_and_one_connection_per_bot_token() {
    use snowpea_proto::rpc::v1::outbound::Item;
    use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;
    use snowpea_proto::rpc::v1::SubscribeRequest;

    let fake = FakeTelegram::start(TOKEN).await;
    let home = super::home(
        &fake.base_url(),
        &json!({"tg": TOKEN, "tg_same": TOKEN, "tg_other": "43:other-token",
        "sl": {"appToken": "xapp-1", "botToken": "xoxb-2"}}),
    );
    let credentials = |doc: serde_json::Value| {
        std::fs::write(home.path().join("credentials.json"), doc.to_string()).unwrap()
    };
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
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<serde_json::Value>();
    tokio::spawn(async move {
        while let Ok(Some(out)) = stream.message().await {
            if let Some(Item::Notification(n)) = out.item {
                if n.method == "gateway.event" {
                    let _ = tx.send(serde_json::from_str(&n.params_json).unwrap());
                }
            }
        }
    });
    let mut client = GatewayServiceClient::new(svc.channel());
    let target = json!({"new_session": {"workdir": "/w"}});
    let id = within(T, "bind", client.bind(bind_params(target.clone(), "tg")))
        .await
        .unwrap()
        .into_inner()
        .binding_id;
    let again = within(T, "bind", client.bind(bind_params(target.clone(), "tg")))
        .await
        .unwrap()
        .into_inner()
        .binding_id;
    assert_eq!(again, id, "the same binding answers its id");
    for (params, field) in [
        (
            bind_params(json!({"new_session": {"workdir": "/other"}}), "tg"),
            "params.channelId",
        ),
        (
            bind_params(target.clone(), "tg_same"),
            "params.credentialsRef",
        ),
        (bind_params(target.clone(), "sl"), "params.credentialsRef"),
    ] {
        let status = within(T, "bind", client.bind(params)).await.unwrap_err();
        let e = RpcError::from_status(&status);
        assert_eq!(e.code.wire(), "invalid_params", "{e:?}");
        assert!(e.message.contains(field), "{} names {field}", e.message);
        assert!(!e.message.contains("service-test-token"), "{}", e.message);
    }
    let list = within(T, "list", client.list(()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.bindings.len(), 1, "{:?}", list.bindings);

    // Another token binds; when its entry is edited to the first one's token, it is not
    // connected (the first keeps the only poller) and an error event says why.
    let other = within(
        T,
        "bind",
        client.bind(bind_params(target.clone(), "tg_other")),
    )
    .await
    .unwrap()
    .into_inner()
    .binding_id;
    credentials(json!({"tg": TOKEN, "tg_other": TOKEN}));
    within(T, "sync", client.sync(())).await.unwrap();
    within(T, "error event", async {
        loop {
            let e = rx.recv().await.expect("bus");
            if e["bindingId"] == other.as_str() && e["kind"] == "error" {
                let m = e["payload"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if m.contains("same telegram bot token") {
                    assert!(!m.contains("service-test-token"), "{m}");
                    return;
                }
            }
        }
    })
    .await;
    let list = within(T, "list", client.list(()))
        .await
        .unwrap()
        .into_inner();
    let state = |b: &str| {
        list.bindings
            .iter()
            .find(|x| x.binding_id == b)
            .map(|x| x.state.clone())
    };
    assert_eq!(state(&other).as_deref(), Some("inactive"));
    assert_eventually!(within(T, "list", client.list(()))
        .await
        .unwrap()
        .into_inner()
        .bindings
        .iter()
        .any(|x| x.binding_id == id && x.state == "active"));
}
