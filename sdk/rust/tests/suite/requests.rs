//! Server→client requests: answered by a handler, `method_not_found` without one, errors and
//! panics of a handler turned into JSON-RPC errors.

use serde_json::{json, Value};
use snowpea_sdk::{Client, RpcError};

use super::fake_server::{within, FakeServer};

async fn ask(client: &Client, method: &str, params: Value) -> Value {
    let got = within(client.call("ask", json!({ "method": method, "params": params })))
        .await
        .expect("ask");
    got["response"].clone()
}

#[tokio::test]
async fn handler_answers_the_request() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    client.on_request("approval.request", |params| async move {
        Ok(json!({ "decision": "allow", "scope": "once", "tool": params["tool"] }))
    });
    let response = ask(
        &client,
        "approval.request",
        json!({ "requestId": "r1", "tool": "shell" }),
    )
    .await;
    assert_eq!(
        response["result"],
        json!({ "decision": "allow", "scope": "once", "tool": "shell" })
    );
    assert!(response["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("srv-")));
    within(client.close()).await;
}

#[tokio::test]
async fn request_without_handler_is_method_not_found() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    let response = ask(&client, "question.request", json!({ "requestId": "q1" })).await;
    assert_eq!(response["error"]["code"], -32601);
    assert_eq!(response["error"]["data"]["code"], "method_not_found");
    client.on_request("question.request", |_| async {
        Ok(json!({ "answers": [] }))
    });
    client.remove_request_handler("question.request");
    let response = ask(&client, "question.request", json!({})).await;
    assert_eq!(response["error"]["code"], -32601);
    within(client.close()).await;
}

#[tokio::test]
async fn handler_errors_and_panics_become_error_responses() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    client.on_request("tool.invoke", |_| async {
        Err(RpcError::with_code("tool_inactive", "not here"))
    });
    let response = ask(&client, "tool.invoke", json!({})).await;
    assert_eq!(response["error"]["code"], -32000);
    assert_eq!(response["error"]["data"]["code"], "tool_inactive");

    client.on_request("tool.invoke", |_| async { panic!("handler bug") });
    let response = ask(&client, "tool.invoke", json!({})).await;
    assert_eq!(response["error"]["data"]["code"], "internal");
    // The connection survived the panic.
    within(client.call("echo", json!(1))).await.expect("echo");
    within(client.close()).await;
}
