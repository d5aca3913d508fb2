//! Edge cases without the suite: validation over gRPC, a binding that comes back after a
//! restart, and the cursor that is not committed while svc-session cannot take the message.

use std::time::Duration;

use serde_json::json;
use snowpea_proto::chat::v1::gateway_service_client::GatewayServiceClient;
use snowpea_proto::chat::v1::{GatewayBindParams, GatewayUnbindParams};
use snowpea_proto::error::RpcError;
use snowpea_testkit::fake_chat::FakeTelegram;
use snowpea_testkit::{assert_eventually, within, ServiceProcess};

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
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        json!({"gateway": {"telegram": {"baseUrl": fake.base_url(), "pollTimeoutSec": 1}}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        home.path().join("credentials.json"),
        json!({"tg": TOKEN}).to_string(),
    )
    .unwrap();
    let mut svc = ServiceProcess::new("chat", env!("CARGO_BIN_EXE_snowpea-svc-chat"), home.path())
        .start()
        .await;
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
