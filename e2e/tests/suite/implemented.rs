//! The declaration `snowpea_proto::implemented::IMPLEMENTED` — the status column of
//! `docs/protocol.md` — agrees with the real suite (issue 25 item 5): every client-callable
//! method it lists is answered by a service or the gateway (called with `{}` it may fail any
//! other way, e.g. invalid_params, but never not_implemented), and every method it leaves out
//! answers not_implemented. Because the gateway answers from the declaration, the services
//! are also asked directly over gRPC: an rpc the declaration leaves out must be the generated
//! default (plain `UNIMPLEMENTED`), one it lists must not.

use prost_reflect::DynamicMessage;
use serde_json::json;
use snowpea_common::home::Home;
use snowpea_e2e::{raw::RawWs, Suite};
use snowpea_proto::codec::DynamicCodec;
use snowpea_proto::implemented::is_implemented;
use snowpea_proto::schema::{schema, Direction, MethodSpec};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::Code;

/// Implemented methods that `{}` would really run and that end the suite; the lifecycle tests
/// call them.
const ENDS_THE_SUITE: [&str; 2] = ["system.restart", "system.shutdown"];

#[tokio::test]
async fn every_method_answers_as_the_declaration_says() {
    let suite = Suite::start().await;
    let mut ws = suite.raw_hello().await;
    let (mut implemented, mut not_yet) = (0, 0);
    let mut wrong = Vec::new();
    for (name, spec) in &schema().methods {
        // Requests only: approval.request & co. are the daemon's to send, and a client
        // notification (tool.progress) is never answered (the gRPC test below covers it).
        if spec.direction != Direction::ClientToServer || ENDS_THE_SUITE.contains(&name.as_str()) {
            continue;
        }
        let r = ws.call(name, json!({})).await;
        let answered = RawWs::code(&r) != "not_implemented";
        if is_implemented(name) {
            implemented += 1;
        } else {
            not_yet += 1;
        }
        if answered != is_implemented(name) {
            wrong.push(format!("{name}: declared {} → {r}", is_implemented(name)));
        }
    }
    assert!(
        wrong.is_empty(),
        "declaration and suite disagree:\n{}",
        wrong.join("\n")
    );
    // The walk covered the whole client surface, most of it implemented.
    assert!(
        implemented > 40 && implemented + not_yet > 100,
        "{implemented} / {not_yet}"
    );
    // The suite still answers after every call (nothing above stopped it).
    let r = ws.call("system.health", json!({})).await;
    assert!(r.get("result").is_some(), "{r}");
}

/// True unless the service answers `spec`'s rpc, called with an empty message, with the
/// generated default: a plain `UNIMPLEMENTED` without a Snowpea code.
async fn service_implements(home: &Home, spec: &MethodSpec) -> bool {
    let channel = snowpea_common::client::unix_channel(home.socket(&spec.owner));
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("service socket");
    let path = PathAndQuery::try_from(spec.grpc_path.as_str()).expect("gRPC path");
    let request = tonic::Request::new(DynamicMessage::new(spec.input()));
    let call = grpc.unary(request, path, DynamicCodec::new(spec.output()));
    match tokio::time::timeout(snowpea_e2e::WAIT, call)
        .await
        .expect("service answered in time")
    {
        Ok(_) => true,
        Err(s) => !(s.code() == Code::Unimplemented && s.metadata().get("snowpea-code").is_none()),
    }
}

#[tokio::test]
async fn every_service_rpc_is_overridden_exactly_when_declared() {
    let suite = Suite::start().await;
    let home = Home::new(suite.home());
    let mut wrong = Vec::new();
    let mut asked = 0;
    for (name, spec) in &schema().methods {
        // system.* is the gateway's (see route::table's test); the rest is a service's.
        if spec.owner == "system"
            || spec.direction == Direction::ServerToClient
            || ENDS_THE_SUITE.contains(&name.as_str())
        {
            continue;
        }
        asked += 1;
        let implements = service_implements(&home, spec).await;
        if implements != is_implemented(name) {
            wrong.push(format!(
                "{name}: declared {}, service {}",
                is_implemented(name),
                if implements {
                    "implements it"
                } else {
                    "answers UNIMPLEMENTED"
                }
            ));
        }
    }
    assert!(asked > 80, "{asked} service rpcs asked");
    assert!(
        wrong.is_empty(),
        "declaration and services disagree:\n{}",
        wrong.join("\n")
    );
}
