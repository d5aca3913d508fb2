//! `gateway.bind` targets against a fake svc-session (its internal `CheckTarget` on
//! `run/session.sock`): an unknown session or agent is refused naming the field, svc-session
//! down answers `unavailable`, `TargetRemoved` removes the bindings of a deleted target with a
//! `gateway.event{removed}`, and a restart drops a binding whose target went away meanwhile.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use snowpea_proto::chat::v1::chat_internal_service_client::ChatInternalServiceClient;
use snowpea_proto::chat::v1::gateway_service_client::GatewayServiceClient;
use snowpea_proto::chat::v1::{GatewayBindParams, TargetRemovedRequest};
use snowpea_proto::error::RpcError;
use snowpea_proto::session::v1::channel_internal_service_server::{
    ChannelInternalService, ChannelInternalServiceServer,
};
use snowpea_proto::session::v1::{CheckTargetReply, CheckTargetRequest};
use snowpea_testkit::fake_chat::FakeTelegram;
use snowpea_testkit::{assert_eventually, within};
use tonic::{Request, Response, Status};

const TOKEN: &str = "42:targets-test-token";
const T: Duration = Duration::from_secs(15);

/// svc-session's side: the sessions and agents that exist.
#[derive(Clone, Default)]
struct FakeSession {
    known: Arc<Mutex<BTreeSet<String>>>,
}

#[tonic::async_trait]
impl ChannelInternalService for FakeSession {
    async fn check_target(
        &self,
        req: Request<CheckTargetRequest>,
    ) -> Result<Response<CheckTargetReply>, Status> {
        let r = req.into_inner();
        let key = if r.session_id.is_empty() {
            format!("agent:{}", r.agent)
        } else {
            format!("session:{}", r.session_id)
        };
        let found = self.known.lock().unwrap().contains(&key);
        Ok(Response::new(CheckTargetReply { found }))
    }
}

fn bind(target: serde_json::Value) -> GatewayBindParams {
    GatewayBindParams {
        channel_id: None,
        credentials_ref: "tg".into(),
        platform: "telegram".into(),
        target: Some(snowpea_proto::wkt::to_struct(&target)),
        user_id: None,
    }
}

async fn targets(client: &mut GatewayServiceClient<tonic::transport::Channel>) -> Vec<String> {
    within(T, "list", client.list(()))
        .await
        .unwrap()
        .into_inner()
        .bindings
        .into_iter()
        .map(|b| b.target)
        .collect()
}

#[tokio::test]
async fn bind_checks_the_target_and_a_deleted_target_removes_its_bindings() {
    let fake = FakeTelegram::start(TOKEN).await;
    let home = super::home(&fake.base_url(), &json!({"tg": TOKEN}));
    let mut svc = super::start(home.path()).await;
    let mut client = GatewayServiceClient::new(svc.channel());

    // svc-session down: the target cannot be checked, nothing is stored.
    let status = within(T, "bind", client.bind(bind(json!({"session": "s-live"}))))
        .await
        .unwrap_err();
    let e = RpcError::from_status(&status);
    assert_eq!(e.code.wire(), "unavailable", "{e:?}");
    assert!(e.message.contains("params.target.session"), "{}", e.message);
    assert!(targets(&mut client).await.is_empty());

    // The fake svc-session knows session s-live and agent helper.
    let session = FakeSession::default();
    session
        .known
        .lock()
        .unwrap()
        .extend(["session:s-live".to_owned(), "agent:helper".to_owned()]);
    let socket = snowpea_common::home::Home::new(home.path()).socket("session");
    let services = snowpea_common::service::Services::new()
        .add_service(ChannelInternalServiceServer::new(session.clone()));
    let path = socket.clone();
    let server = tokio::spawn(async move {
        snowpea_common::service::serve("session", &path, services, std::future::pending()).await
    });
    assert_eventually!(socket.exists());

    for (target, field) in [
        (json!({"session": "s-gone"}), "params.target.session"),
        (json!({"agent": "nobody"}), "params.target.agent"),
    ] {
        let status = within(T, "bind", client.bind(bind(target.clone())))
            .await
            .unwrap_err();
        let e = RpcError::from_status(&status);
        assert_eq!(e.code.wire(), "invalid_params", "{target}: {e:?}");
        assert!(e.message.contains(field), "{} names {field}", e.message);
    }
    assert!(targets(&mut client).await.is_empty(), "nothing stored");

    // One binding per chat of a credential: each target gets its own channelId.
    let in_chat = |target: serde_json::Value, chat: &str| GatewayBindParams {
        channel_id: Some(chat.into()),
        ..bind(target)
    };
    let on_session = within(
        T,
        "bind",
        client.bind(in_chat(json!({"session": "s-live"}), "1")),
    )
    .await
    .unwrap()
    .into_inner()
    .binding_id;
    within(
        T,
        "bind",
        client.bind(in_chat(json!({"agent": "helper"}), "2")),
    )
    .await
    .unwrap();
    within(
        T,
        "bind",
        client.bind(in_chat(json!({"new_session": {"workdir": "/w"}}), "3")),
    )
    .await
    .unwrap();
    assert_eq!(targets(&mut client).await.len(), 3);

    // svc-session deletes the session: its binding goes, the others stay.
    let mut internal = ChatInternalServiceClient::new(svc.channel());
    session.known.lock().unwrap().remove("session:s-live");
    let removed = within(
        T,
        "TargetRemoved",
        internal.target_removed(TargetRemovedRequest {
            session_id: "s-live".into(),
            agent: String::new(),
        }),
    )
    .await
    .unwrap()
    .into_inner()
    .binding_ids;
    assert_eq!(removed, vec![on_session]);
    assert_eq!(
        targets(&mut client).await,
        vec!["agent:helper", "new_session:/w"]
    );

    // The agent is deleted while svc-chat is down: the restart drops its binding.
    svc.kill9();
    session.known.lock().unwrap().remove("agent:helper");
    svc.spawn().await;
    let mut client = GatewayServiceClient::new(svc.channel());
    assert_eventually!(targets(&mut client).await == vec!["new_session:/w"]);
    assert!(
        svc.log().contains("binding removed"),
        "the removal is logged"
    );
    server.abort();
}
