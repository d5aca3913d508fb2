//! `memory.*` and `site.*` through the real suite over WebSocket (issue 4): every method,
//! the refusals and limits, kill -9 of svc-memory, and sessions working while it is down.

use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::Suite;
use snowpea_sdk::{Client, Error};

async fn ok(c: &Client, method: &str, params: Value) -> Value {
    tokio::time::timeout(Duration::from_secs(20), c.call(method, params.clone()))
        .await
        .expect("call timed out")
        .unwrap_or_else(|e| panic!("{method} {params}: {e:?}"))
}

async fn err(c: &Client, method: &str, params: Value) -> (String, Option<String>) {
    match tokio::time::timeout(Duration::from_secs(20), c.call(method, params.clone()))
        .await
        .expect("call timed out")
    {
        Ok(v) => panic!("{method} {params}: expected an error, got {v}"),
        Err(Error::Rpc(e)) => {
            let field = e
                .data
                .as_ref()
                .and_then(|d| d["details"]["field"].as_str())
                .map(str::to_owned);
            (e.data_code.unwrap_or_default(), field)
        }
        Err(e) => panic!("{method}: {e:?}"),
    }
}

async fn browser(suite: &Suite, profile: &str) -> Client {
    let p = profile.to_owned();
    suite
        .client_with(move |o| o.with_client_kind("browser").with_client_id(p))
        .await
}

fn entry(page_type: &str, pattern: &str) -> Value {
    json!({
        "pageType": page_type,
        "urlPattern": pattern,
        "summary": "search page",
        "actions": [{"name": "query", "kind": "fill", "locators": [{"by": "css", "value": "input#q"}]}],
        "flows": [{"name": "find", "steps": ["type the query", {"verb": "enter", "action": "query"}]}],
        "recipes": [{"name": "rows", "item": "li.row", "fields": [{"name": "title", "selector": "h2"}]}]
    })
}

#[tokio::test]
async fn memory_methods_over_websocket() {
    let suite = Suite::start().await;
    let c = suite.client().await;
    let id = ok(
        &c,
        "memory.write",
        json!({"text": "The user prefers tabs over spaces in Go code", "tags": ["style"]}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ok(&c, "memory.write", json!({"text": "Lunch is at noon"})).await;
    let ko = ok(
        &c,
        "memory.write",
        json!({"text": "배포는 금요일에 하지 않는다", "namespace": "project:/work/app"}),
    )
    .await;
    let hits = ok(
        &c,
        "memory.search",
        json!({"query": "which indentation style, tabs or spaces?"}),
    )
    .await;
    assert_eq!(hits["hits"][0]["id"], id.as_str(), "{hits}");
    assert_eq!(hits["hits"][0]["tags"], json!(["style"]));
    assert!(hits["hits"][0]["score"].as_f64().unwrap() > 0.0);
    let hits = ok(
        &c,
        "memory.search",
        json!({"query": "금요", "namespace": "project:/work/app"}),
    )
    .await;
    assert_eq!(hits["hits"][0]["id"], ko["id"]);
    assert_eq!(
        ok(&c, "memory.search", json!({"query": "금요"})).await["hits"],
        json!([]),
        "never crosses namespaces"
    );
    let listed = ok(&c, "memory.list", json!({"project": "/work/app"})).await;
    assert_eq!(listed["entries"].as_array().unwrap().len(), 3);
    assert_eq!(listed["entries"][0]["scope"], "project");
    assert_eq!(
        err(
            &c,
            "memory.write",
            json!({"text": "x", "namespace": "nope"})
        )
        .await,
        ("invalid_params".into(), Some("params.namespace".into()))
    );
    assert_eq!(
        err(&c, "memory.delete", json!({"id": "mem_missing"}))
            .await
            .0,
        "not_found"
    );
    assert_eq!(
        ok(&c, "memory.delete", json!({"id": id})).await["removed"],
        1
    );
    let items = json!([
        {"url": "https://docs.example/a", "text": "tokio guide", "title": "A", "visitedAt": "2026-01-01T00:00:00Z"},
        {"url": "https://docs.example/b", "text": "axum guide", "title": "B", "visitedAt": "2026-01-02T00:00:00Z"}
    ]);
    let r = ok(&c, "memory.ingest", json!({"items": items})).await;
    assert_eq!(
        (r["added"].as_i64(), r["skipped"].as_i64().unwrap_or(0)),
        (Some(2), 0)
    );
    let r = ok(&c, "memory.ingest", json!({"items": items})).await;
    assert_eq!(
        (r["added"].as_i64().unwrap_or(0), r["skipped"].as_i64()),
        (0, Some(2))
    );
    let r = ok(
        &c,
        "memory.delete",
        json!({"source": "browser", "url": "https://docs.example"}),
    )
    .await;
    assert_eq!(r["removed"], 2, "a whole site");
}

#[tokio::test]
async fn site_methods_refusals_and_callers_over_websocket() {
    let suite = Suite::start().await;
    let b = browser(&suite, "profile-1").await;
    let ui = suite.client().await;
    let o = "https://shop.example";
    assert_eq!(
        err(
            &ui,
            "site.put",
            json!({"origin": o, "entry": entry("search", "/s")})
        )
        .await
        .0,
        "unauthorized"
    );
    assert_eq!(
        err(&ui, "site.get", json!({"origin": o})).await.0,
        "unauthorized"
    );
    let r = ok(
        &b,
        "site.put",
        json!({"origin": o, "entry": entry("search", "/s")}),
    )
    .await;
    assert_eq!(r["created"], true);
    let id = r["entryId"].as_str().unwrap().to_owned();
    ok(
        &b,
        "site.put",
        json!({"origin": o, "entry": entry("any", "/*")}),
    )
    .await;
    let got = ok(&b, "site.get", json!({"origin": o, "path": "/s?q=1"})).await;
    let types: Vec<_> = got["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pageType"].clone())
        .collect();
    assert_eq!(
        types,
        vec![json!("search"), json!("any")],
        "most specific first"
    );
    let e = ok(
        &b,
        "site.mark",
        json!({"origin": o, "entryId": id, "outcome": "stale"}),
    )
    .await;
    assert_eq!(
        (
            e["entry"]["stale"].clone(),
            e["entry"]["failureCount"].clone()
        ),
        (json!(true), json!(1))
    );
    let e = ok(
        &b,
        "site.markPart",
        json!({"origin": o, "entryId": id, "part": "recipe", "name": "rows", "outcome": "ok"}),
    )
    .await;
    assert_eq!(e["entry"]["recipes"][0]["stats"]["hits"], 1);
    assert_eq!(e["entry"]["stale"], true, "markPart never verifies");
    assert_eq!(
        err(
            &b,
            "site.markPart",
            json!({"origin": o, "entryId": id, "part": "flow", "name": "zzz", "outcome": "ok"})
        )
        .await
        .0,
        "not_found"
    );
    // Refusals name the field.
    let mut x = entry("x", "/x");
    x["actions"][0]["locators"][0]["value"] = json!("//div[@id='q']");
    assert_eq!(
        err(&b, "site.put", json!({"origin": o, "entry": x})).await,
        (
            "invalid_params".into(),
            Some("params.entry.actions[0].locators[0].value".into())
        )
    );
    let mut x = entry("x", "/x");
    x["actions"][0]["loginField"] = json!(true);
    x["actions"][0]["locators"] = json!([{"by": "label", "name": "Email", "value": "jane"}]);
    assert_eq!(
        err(&b, "site.put", json!({"origin": o, "entry": x}))
            .await
            .1
            .as_deref(),
        Some("params.entry.actions[0].locators[0].value")
    );
    let mut x = entry("x", "/x");
    x["pitfalls"] = json!(["call 010-1234-5678"]);
    assert_eq!(
        err(&b, "site.put", json!({"origin": o, "entry": x}))
            .await
            .1
            .as_deref(),
        Some("params.entry.pitfalls[0]")
    );
    let mut x = entry("x", "/x");
    x["summary"] = json!("y".repeat(25 * 1024));
    assert_eq!(
        err(&b, "site.put", json!({"origin": o, "entry": x}))
            .await
            .1
            .as_deref(),
        Some("params.entry")
    );
    for i in 0..28 {
        ok(
            &b,
            "site.put",
            json!({"origin": o, "entry": entry(&format!("t{i}"), "/t")}),
        )
        .await;
    }
    assert_eq!(
        err(
            &b,
            "site.put",
            json!({"origin": o, "entry": entry("t99", "/t")})
        )
        .await
        .1
        .as_deref(),
        Some("params.origin"),
        "30 per origin"
    );
    // list/delete callers.
    let page = ok(&b, "site.list", json!({"limit": 1})).await;
    assert_eq!(page["sites"][0]["origin"], o);
    assert_eq!(
        err(&b, "site.list", json!({"hostToolsFrom": "profile-2"}))
            .await
            .0,
        "unauthorized"
    );
    assert_eq!(
        err(&ui, "site.list", json!({})).await.1.as_deref(),
        Some("params.hostToolsFrom")
    );
    assert_eq!(
        ok(&ui, "site.list", json!({"hostToolsFrom": "profile-1"})).await["sites"][0]["entries"],
        30
    );
    assert_eq!(
        ok(
            &ui,
            "site.delete",
            json!({"hostToolsFrom": "profile-1", "origin": o})
        )
        .await["deleted"],
        30
    );
}

#[tokio::test]
async fn kill9_of_memory_loses_no_write_and_sessions_keep_working() {
    let suite = Suite::start().await;
    let c = suite.client().await;
    let id = ok(
        &c,
        "memory.write",
        json!({"text": "acknowledged before the crash"}),
    )
    .await["id"]
        .clone();
    let old = suite.kill9("memory");
    // While it is down (or restarting) a session still runs turns.
    let sid = c
        .create_session(suite.workdir.path(), Some("plan"))
        .await
        .unwrap();
    let out = c
        .prompt_and_collect(&sid, "hello", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    suite.wait_restarted("memory", old).await;
    // Bounded retry: the gateway may still be reconnecting to the restarted service.
    let mut hits = Value::Null;
    for _ in 0..50 {
        match c
            .call("memory.search", json!({"query": "acknowledged"}))
            .await
        {
            Ok(v) => {
                hits = v;
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert_eq!(hits["hits"][0]["id"], id, "{hits}");
}
