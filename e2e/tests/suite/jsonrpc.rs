//! Every JSON-RPC error path through the real gateway and svc-session.
use std::time::Duration;

use serde_json::json;
use snowpea_e2e::{raw::RawWs, Suite};

#[tokio::test]
async fn parse_error_and_invalid_requests() {
    let suite = Suite::start().await;
    let mut ws = suite.raw_hello().await;
    ws.send_text("{not json").await;
    let r = ws
        .recv_response(Duration::from_secs(10))
        .await
        .expect("answer");
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert!(r["id"].is_null());

    ws.send_text("42").await;
    let r = ws
        .recv_response(Duration::from_secs(10))
        .await
        .expect("answer");
    assert_eq!(r["error"]["code"], -32600, "{r}");

    ws.send_text(r#"{"jsonrpc":"1.0","id":7,"method":"system.health"}"#)
        .await;
    let r = ws
        .recv_response(Duration::from_secs(10))
        .await
        .expect("answer");
    assert_eq!(r["error"]["code"], -32600, "{r}");

    ws.send_text("[]").await;
    let r = ws
        .recv_response(Duration::from_secs(10))
        .await
        .expect("answer");
    assert_eq!(r["error"]["code"], -32600, "{r}");
}

#[tokio::test]
async fn batch_answers_requests_and_skips_notifications() {
    let suite = Suite::start().await;
    let mut ws = suite.raw_hello().await;
    ws.send_text(
        r#"[{"jsonrpc":"2.0","id":"a","method":"system.health"},
            {"jsonrpc":"2.0","method":"system.health"},
            {"jsonrpc":"2.0","id":"b","method":"no.such"}]"#,
    )
    .await;
    let r = ws
        .recv_response(Duration::from_secs(10))
        .await
        .expect("answer");
    let arr = r.as_array().expect("batch answer");
    assert_eq!(arr.len(), 2, "{r}");
    let a = arr.iter().find(|x| x["id"] == "a").expect("a");
    assert_eq!(a["result"]["status"], "ok");
    let b = arr.iter().find(|x| x["id"] == "b").expect("b");
    assert_eq!(b["error"]["code"], -32601);
}

#[tokio::test]
async fn error_codes_map_to_the_protocol_table() {
    let suite = Suite::start().await;
    let mut ws = suite.raw_hello().await;

    let r = ws.call("session.nope", json!({})).await;
    assert_eq!(
        (r["error"]["code"].clone(), RawWs::code(&r)),
        (json!(-32601), "method_not_found".into()),
        "{r}"
    );

    // A string at the accepted limit reaches every service (each server decodes up to
    // limits::GRPC_REQUEST): an answer about the session, never `internal`.
    let at_limit = "a".repeat(snowpea_proto::limits::STRING_PARAM);
    for method in ["command.list", "checkpoint.list"] {
        let r = ws.call(method, json!({"sessionId": at_limit})).await;
        let code = RawWs::code(&r);
        assert!(
            code == "not_found" || code == "invalid_params",
            "{method} with a 4 MiB sessionId: {code} {}",
            r["error"]["message"]
        );
    }

    let r = ws.call("session.create", json!({"mode": "plan"})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(
        r["error"]["data"]["details"]["field"], "params.workdir",
        "{r}"
    );

    let r = ws
        .call(
            "session.create",
            json!({"workdir": suite.workdir.path(), "mode": "yolo"}),
        )
        .await;
    assert_eq!(r["error"]["data"]["details"]["field"], "params.mode", "{r}");

    let r = ws
        .call(
            "session.create",
            json!({"workdir": suite.workdir.path(), "bogus": 1}),
        )
        .await;
    assert_eq!(
        r["error"]["data"]["details"]["field"], "params.bogus",
        "{r}"
    );

    let r = ws
        .call(
            "session.rename",
            json!({"sessionId": "s_missing", "title": "x"}),
        )
        .await;
    assert_eq!(
        (r["error"]["code"].clone(), RawWs::code(&r)),
        (json!(-32004), "not_found".into()),
        "{r}"
    );

    // A title over the cap names the field (one client cannot bloat session.list).
    let created = ws
        .call("session.create", json!({"workdir": suite.workdir.path()}))
        .await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let r = ws
        .call(
            "session.rename",
            json!({"sessionId": sid, "title": "z".repeat(600)}),
        )
        .await;
    assert_eq!(
        r["error"]["data"]["details"]["field"], "params.title",
        "{r}"
    );

    // An error that quotes a huge client value still arrives whole (clipped), and the
    // service connection it travelled on keeps working for everyone.
    let r = ws
        .call("session.close", json!({"sessionId": "x".repeat(100_000)}))
        .await;
    assert_eq!(RawWs::code(&r), "not_found", "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().len() < 4096,
        "clipped"
    );
    let r = ws.call("session.list", json!({})).await;
    assert!(r["result"]["sessions"].is_array(), "{r}");

    // Schema'd but not implemented by any running service (whichever are still left: the
    // declaration grows as issues land; implemented.rs walks every method).
    let not_yet = snowpea_proto::schema::schema()
        .methods
        .iter()
        .filter(|(name, spec)| {
            spec.direction == snowpea_proto::schema::Direction::ClientToServer
                && !snowpea_proto::implemented::is_implemented(name)
        })
        .map(|(name, _)| name.clone())
        .take(2)
        .collect::<Vec<_>>();
    for name in not_yet {
        let r = ws.call(&name, json!({"sessionId": "s"})).await;
        assert_eq!(RawWs::code(&r), "not_implemented", "{name}: {r}");
    }
}

#[tokio::test]
async fn http_endpoints_answer() {
    let suite = Suite::start().await;
    let get = |path: &'static str| {
        let port = suite.port;
        async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            s.write_all(
                format!(
                    "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
            let mut buf = Vec::new();
            tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
                .await
                .unwrap()
                .unwrap();
            String::from_utf8_lossy(&buf).into_owned()
        }
    };
    assert!(get("/health").await.contains("\"ok\""));
    assert!(get("/version").await.contains("1.25.0"));
    let p = get("/protocol.json").await;
    assert!(
        p.contains("session.create") && p.contains("sessionEventKinds"),
        "protocol.json"
    );
}
