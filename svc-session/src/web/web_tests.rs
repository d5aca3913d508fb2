//! Service-level tests of `web.search`: every provider adapter against a fake server on
//! 127.0.0.1 speaking its API, the fallback order, timeouts, `unavailable` details, plain
//! text results and the browser-host-only rule.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use snowpea_common::context::CallContext;
use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use super::WebSearch;
use snowpea_session_error::Error;

type Seen = Arc<Mutex<Vec<String>>>;

const DDG_PAGE: &str = r##"<html><body>
<div class="result results_links result--ad"><a rel="nofollow" class="result__a" href="https://duckduckgo.com/y.js?ad_provider=x&amp;u3=1">Ad</a>
<a class="result__snippet" href="#">buy now</a></div>
<div class="result results_links"><h2 class="result__title"><a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Frust&amp;rut=abc">The <b>Rust</b> &amp; you</a></h2>
<a class="result__snippet" href="//duckduckgo.com/l/?uddg=x">Learn <b>Rust</b>&#39;s   ways&nbsp;here</a></div>
<div class="result results_links"><a href="https://docs.example.org/book" class="result__a">Book</a></div>
<div class="result results_links"><a class="result__a" href="javascript:alert(1)">Evil</a></div>
</body></html>"##;

async fn fake() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route(
            "/ddg/html/",
            get(|State(s): State<Seen>, Query(q): Query<Vec<(String, String)>>| async move {
                s.lock().unwrap().push(format!("ddg {q:?}"));
                axum::response::Html(DDG_PAGE)
            }),
        )
        .route(
            "/searx/search",
            get(|State(s): State<Seen>, Query(q): Query<Vec<(String, String)>>| async move {
                s.lock().unwrap().push(format!("searx {q:?}"));
                Json(json!({"results": [{"url": "https://searx.example/a", "title": "S<i>A</i>", "content": "from searx"}]}))
            }),
        )
        .route(
            "/brave",
            get(|State(s): State<Seen>, h: HeaderMap, Query(q): Query<Vec<(String, String)>>| async move {
                s.lock().unwrap().push(format!("brave {:?} {q:?}", h.get("x-subscription-token")));
                Json(json!({"web": {"results": [
                    {"url": "https://brave.example/1", "title": "B1", "description": "d1"},
                    {"url": "https://brave.example/2", "title": "B2", "description": "d2"},
                    {"url": "https://brave.example/3", "title": "B3", "description": "d3"}
                ]}}))
            }),
        )
        .route(
            "/tavily",
            post(|State(s): State<Seen>, h: HeaderMap, Json(b): Json<Value>| async move {
                s.lock().unwrap().push(format!("tavily {:?} {b}", h.get("authorization")));
                Json(json!({"results": [{"url": "https://tavily.example/", "title": "T", "content": "tc"}]}))
            }),
        )
        .route(
            "/exa",
            post(|State(s): State<Seen>, h: HeaderMap, Json(b): Json<Value>| async move {
                s.lock().unwrap().push(format!("exa {:?} {b}", h.get("x-api-key")));
                Json(json!({"results": [{"url": "https://exa.example/", "title": "E", "text": "et"}]}))
            }),
        )
        .route(
            "/fc/v1/search",
            post(|State(s): State<Seen>, h: HeaderMap, Json(b): Json<Value>| async move {
                s.lock().unwrap().push(format!("firecrawl {:?} {b}", h.get("authorization")));
                Json(json!({"success": true, "data": [{"url": "https://fc.example/", "title": "F", "description": "fd"}]}))
            }),
        )
        .route(
            "/keenable/v1/search/public",
            post(|State(s): State<Seen>, h: HeaderMap, Json(b): Json<Value>| async move {
                s.lock().unwrap().push(format!("keenable_free {:?} {b}", h.get("x-api-key")));
                Json(json!({"results": [
                    {"url": "https://keen.example/a", "title": "KA", "snippet": "page text", "description": "meta"},
                    {"url": "https://keen.example/b", "title": "KB", "snippet": "", "description": "only meta"}
                ]}))
            }),
        )
        .route(
            "/keenable/v1/search",
            post(|State(s): State<Seen>, h: HeaderMap, Json(b): Json<Value>| async move {
                s.lock().unwrap().push(format!("keenable {:?} {b}", h.get("x-api-key")));
                Json(json!({"results": [{"url": "https://keen.example/k", "title": "KK", "snippet": "keyed"}]}))
            }),
        )
        .route(
            "/parallel/v1/search",
            post(|State(s): State<Seen>, h: HeaderMap, Json(b): Json<Value>| async move {
                s.lock().unwrap().push(format!("parallel {:?} {b}", h.get("x-api-key")));
                Json(json!({"search_id": "search_1", "results": [
                    {"url": "https://par.example/1", "title": "P1", "excerpts": ["first part", "second part"]},
                    {"url": "ftp://par.example/bad", "title": "bad", "excerpts": []},
                    {"url": "https://par.example/2", "title": "P2", "excerpts": []}
                ]}))
            }),
        )
        .route(
            "/grok/v1/responses",
            post(|State(s): State<Seen>, h: HeaderMap, Json(b): Json<Value>| async move {
                s.lock().unwrap().push(format!("grok {:?} {b}", h.get("authorization")));
                let text = "Rust 1.90 shipped in September. See the blog.";
                Json(json!({
                    "id": "resp_1", "object": "response", "model": "grok-4-fast",
                    "output": [
                        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
                        {"type": "message", "role": "assistant", "content": [{
                            "type": "output_text", "text": text,
                            "annotations": [
                                {"type": "url_citation", "url": "https://blog.rust-lang.org/2025/09/18/Rust-1.90.0/", "title": "Announcing Rust 1.90.0", "start_index": 0, "end_index": 32},
                                {"type": "url_citation", "url": "https://blog.rust-lang.org/2025/09/18/Rust-1.90.0/", "title": "dup", "start_index": 33, "end_index": 45}
                            ]
                        }]}
                    ],
                    "citations": ["https://blog.rust-lang.org/2025/09/18/Rust-1.90.0/", "https://releases.rs/"]
                }))
            }),
        )
        .route(
            "/fail/search",
            get(|| async { (axum::http::StatusCode::BAD_GATEWAY, "upstream down") }),
        )
        .route(
            "/slow/search",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Json(json!({"results": []}))
            }),
        )
        .route("/empty/search", get(|| async { Json(json!({"results": []})) }))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

struct Setup {
    _tmp: tempfile::TempDir,
    web: WebSearch,
}

fn setup(settings: Value) -> Setup {
    setup_with_env(settings, false)
}

/// With `tavily_key`, the environment holds `TAVILY_API_KEY` (so only a test that points
/// tavily at the fake may set it: no test reaches a real vendor).
fn setup_with_env(settings: Value, tavily_key: bool) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.ensure_dirs().unwrap();
    std::fs::write(home.settings_path(), settings.to_string()).unwrap();
    let env: crate::app::EnvFn =
        Arc::new(move |k| (tavily_key && k == "TAVILY_API_KEY").then(|| "tk-env".to_owned()));
    Setup {
        web: WebSearch::new(home, env),
        _tmp: tmp,
    }
}

fn browser() -> CallContext {
    CallContext {
        connection_id: Some("c1".into()),
        client_id: Some("ext-1".into()),
        client_kind: Some("browser".into()),
        ..Default::default()
    }
}

fn ask(q: &str, num: i64) -> pb::WebSearchParams {
    pb::WebSearchParams {
        num,
        query: q.into(),
    }
}

#[tokio::test]
async fn every_adapter_speaks_its_providers_api() {
    let (base, seen) = fake().await;
    let only = |id: &str, conf: Value| {
        setup_with_env(
            json!({"search": {"provider": id, "fallback": false, id: conf}}),
            true,
        )
    };
    // ddgs: redirects decoded, ads and non-http links dropped, markup made plain text.
    let s = only("ddgs", json!({"url": format!("{base}/ddg/html/")}));
    let r = s
        .web
        .search(&browser(), ask("rust lang", 10))
        .await
        .unwrap();
    assert_eq!(r.provider, "ddgs");
    let got: Vec<_> = r
        .results
        .iter()
        .map(|h| (h.url.as_str(), h.title.as_str(), h.snippet.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "https://example.com/rust",
                "The Rust & you",
                "Learn Rust's ways here"
            ),
            ("https://docs.example.org/book", "Book", "")
        ]
    );
    let s = only("searxng", json!({"url": format!("{base}/searx")}));
    let r = s.web.search(&browser(), ask("q1", 5)).await.unwrap();
    assert_eq!(
        (
            r.provider.as_str(),
            r.results[0].title.as_str(),
            r.results[0].snippet.as_str()
        ),
        ("searxng", "SA", "from searx")
    );
    // Keys travel in each API's header; num caps the results.
    let s = only(
        "brave",
        json!({"url": format!("{base}/brave"), "apiKey": "bk"}),
    );
    let r = s.web.search(&browser(), ask("q2", 2)).await.unwrap();
    assert_eq!(r.results.len(), 2);
    let s = only("tavily", json!({"url": format!("{base}/tavily")}));
    assert_eq!(
        s.web
            .search(&browser(), ask("q3", 3))
            .await
            .unwrap()
            .results[0]
            .snippet,
        "tc"
    );
    let s = only("exa", json!({"url": format!("{base}/exa"), "apiKey": "ek"}));
    assert_eq!(
        s.web
            .search(&browser(), ask("q4", 3))
            .await
            .unwrap()
            .results[0]
            .snippet,
        "et"
    );
    let s = only(
        "firecrawl",
        json!({"url": format!("{base}/fc"), "apiKey": "fk"}),
    );
    assert_eq!(
        s.web
            .search(&browser(), ask("q5", 3))
            .await
            .unwrap()
            .results[0]
            .title,
        "F"
    );
    let seen = seen.lock().unwrap().join("\n");
    for want in [
        r#"ddg [("q", "rust lang")]"#,
        r#"searx [("q", "q1"), ("format", "json")]"#,
        r#"brave Some("bk") [("q", "q2"), ("count", "2")]"#,
        r#"tavily Some("Bearer tk-env") {"query":"q3","max_results":3}"#,
        r#"exa Some("ek")"#,
        r#"firecrawl Some("Bearer fk") {"query":"q5","limit":3}"#,
    ] {
        assert!(seen.contains(want), "{want} not in\n{seen}");
    }
}

/// Keenable (keyless public and keyed endpoints), Parallel and xAI Grok's web search each
/// against a fake server speaking its API: the request each sends (key header, body) and
/// how its answer becomes results.
#[tokio::test]
async fn keenable_parallel_and_grok_adapters() {
    let (base, seen) = fake().await;
    let only = |id: &str, conf: Value| {
        setup(json!({"search": {"provider": id, "fallback": false, id: conf}}))
    };
    let s = only(
        "keenable_free",
        json!({"url": format!("{base}/keenable/v1/search/public")}),
    );
    let r = s.web.search(&browser(), ask("rust", 10)).await.unwrap();
    assert_eq!(r.provider, "keenable_free");
    let got: Vec<_> = r
        .results
        .iter()
        .map(|h| (h.url.as_str(), h.title.as_str(), h.snippet.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("https://keen.example/a", "KA", "page text"),
            ("https://keen.example/b", "KB", "only meta")
        ]
    );
    let s = only(
        "keenable",
        json!({"url": format!("{base}/keenable/v1/search"), "apiKey": "keen_k"}),
    );
    let r = s.web.search(&browser(), ask("rust", 1)).await.unwrap();
    assert_eq!(r.results[0].snippet, "keyed");
    // keenable without a key is not tried.
    let s = setup(json!({"search": {"provider": "keenable", "fallback": false}}));
    assert!(matches!(
        s.web.search(&browser(), ask("x", 1)).await.unwrap_err(),
        Error::UnavailableWith { .. }
    ));

    let s = only(
        "parallel",
        json!({"url": format!("{base}/parallel/v1/search"), "apiKey": "par-k"}),
    );
    let r = s.web.search(&browser(), ask("batteries", 5)).await.unwrap();
    let got: Vec<_> = r
        .results
        .iter()
        .map(|h| (h.url.as_str(), h.snippet.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("https://par.example/1", "first part … second part"),
            ("https://par.example/2", "")
        ],
        "non-http URLs dropped"
    );

    let s = only(
        "xai_grok",
        json!({"url": format!("{base}/grok/v1/responses"), "apiKey": "xai-k", "model": "grok-test"}),
    );
    let r = s
        .web
        .search(&browser(), ask("rust release", 5))
        .await
        .unwrap();
    assert_eq!(r.provider, "xai_grok");
    let got: Vec<_> = r
        .results
        .iter()
        .map(|h| (h.url.as_str(), h.title.as_str(), h.snippet.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "https://blog.rust-lang.org/2025/09/18/Rust-1.90.0/",
                "Announcing Rust 1.90.0",
                "Rust 1.90 shipped in September."
            ),
            ("https://releases.rs/", "https://releases.rs/", "")
        ]
    );
    let seen = seen.lock().unwrap().join("\n");
    for want in [
        r#"keenable_free None {"query":"rust"}"#,
        r#"keenable Some("keen_k") {"query":"rust"}"#,
        r#"parallel Some("par-k") {"objective":"batteries","search_queries":["batteries"],"advanced_settings":{"max_results":5}}"#,
        r#"grok Some("Bearer xai-k")"#,
        r#""model":"grok-test""#,
        r#""tools":[{"type":"web_search"}]"#,
    ] {
        assert!(seen.contains(want), "{want} not in\n{seen}");
    }
}

#[tokio::test]
async fn a_failing_first_provider_falls_back_and_none_answering_is_unavailable() {
    let (base, _) = fake().await;
    let s = setup(json!({"search": {
        "provider": "searxng",
        "searxng": {"url": format!("{base}/fail")},
        "ddgs": {"url": format!("{base}/ddg/html/")},
    }}));
    let r = s.web.search(&browser(), ask("x", 0)).await.unwrap();
    assert_eq!(r.provider, "ddgs");

    // Every provider fails (one by timeout): unavailable, with each attempt named.
    let s = setup(json!({"search": {
        "provider": "searxng",
        "timeoutSec": 1,
        "searxng": {"url": format!("{base}/slow")},
        "ddgs": {"url": format!("{base}/fail/search")},
        "firecrawl_selfhost": {"url": format!("{base}/nowhere")},
    }}));
    match s.web.search(&browser(), ask("x", 3)).await.unwrap_err() {
        Error::UnavailableWith { details, .. } => {
            assert_eq!(details["reason"], "all_failed");
            let tried: Vec<_> = details["attempts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["provider"].as_str().unwrap().to_owned())
                .collect();
            // Keyed providers without a key are not tried.
            assert_eq!(
                tried,
                ["searxng", "ddgs", "firecrawl_selfhost"],
                "{details}"
            );
            assert!(
                details["attempts"][0]["error"]
                    .as_str()
                    .unwrap()
                    .contains("timed out"),
                "{details}"
            );
            assert!(
                details["attempts"][1]["error"]
                    .as_str()
                    .unwrap()
                    .contains("HTTP 502"),
                "{details}"
            );
        }
        e => panic!("{e:?}"),
    }
    // An empty answer is still an answer when nothing has results.
    let s = setup(
        json!({"search": {"provider": "searxng", "fallback": false, "searxng": {"url": format!("{base}/empty")}}}),
    );
    let r = s.web.search(&browser(), ask("x", 3)).await.unwrap();
    assert_eq!((r.provider.as_str(), r.results.len()), ("searxng", 0));
    // Nothing usable configured.
    let s = setup(json!({"search": {"provider": "brave", "fallback": false}}));
    match s.web.search(&browser(), ask("x", 3)).await.unwrap_err() {
        Error::UnavailableWith { details, .. } => {
            assert_eq!(details["reason"], "no_provider");
            assert!(details["attempts"][0]["error"]
                .as_str()
                .unwrap()
                .contains("search.brave.apiKey"));
        }
        e => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn only_browser_hosts_may_search_and_bad_params_name_the_field() {
    let s = setup(
        json!({"search": {"provider": "ddgs", "fallback": false, "ddgs": {"url": "http://127.0.0.1:9/"}}}),
    );
    for ctx in [
        CallContext {
            client_kind: Some("tui".into()),
            client_id: Some("t".into()),
            ..Default::default()
        },
        CallContext {
            client_kind: Some("browser".into()),
            ..Default::default()
        },
    ] {
        assert!(matches!(
            s.web.search(&ctx, ask("x", 1)).await.unwrap_err(),
            Error::Unauthorized(_)
        ));
    }
    let field = |e: Error| match e {
        Error::InvalidParams { field, .. } => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field(s.web.search(&browser(), ask(" ", 1)).await.unwrap_err()),
        "params.query"
    );
    assert_eq!(
        field(s.web.search(&browser(), ask("x", 21)).await.unwrap_err()),
        "params.num"
    );
    assert_eq!(
        field(s.web.search(&browser(), ask("x", -1)).await.unwrap_err()),
        "params.num"
    );
}

#[test]
fn plain_text_strips_markup_controls_and_caps_length() {
    use super::html::plain;
    assert_eq!(
        plain(
            "<script>x</script>a&lt;b&gt;\u{202E}c\u{0007}<style>p{}</style>",
            100
        ),
        "a<b>c"
    );
    assert_eq!(plain("abcdef", 3), "abc…");
    assert_eq!(plain("  a \n\t b  ", 10), "a b");
}

fn tool_ctx() -> crate::tools::ToolContext {
    crate::tools::ToolContext {
        workdir: std::env::temp_dir(),
        progress: tokio::sync::mpsc::unbounded_channel().0,
        cancel: Default::default(),
        output_cap: 64 * 1024,
        session_id: String::new(),
        mode: "auto".into(),
        turn_id: String::new(),
        call_id: String::new(),
        named_agent: None,
        turn: None,
        backend: crate::backend::local(),
    }
}

/// The `web_search` agent tool goes through the same chain (the preferred provider fails,
/// the fallback answers), tells the model the results are untrusted and fences each, carries
/// `{provider, untrusted, results, failed}` in `meta`, refuses bad arguments naming them,
/// and fails naming the providers when none answers.
#[tokio::test]
async fn the_web_search_tool_uses_the_chain_and_marks_results_untrusted() {
    use crate::tools::{Permission, Tool};
    let (base, _) = fake().await;
    let s = setup(json!({"search": {
        "provider": "searxng",
        "searxng": {"url": format!("{base}/fail")},
        "ddgs": {"url": format!("{base}/ddg/html/")},
    }}));
    let tool = crate::tools::web_search::WebSearchTool::new(s.web.clone());
    assert_eq!(tool.permission(), Permission::Network);
    let dir = std::env::temp_dir();
    assert!(tool.plan(&json!({"query": "rust"}), &dir).is_ok());
    for (bad, why) in [
        (json!({}), "`query`"),
        (json!({"query": "  "}), "`query`"),
        (json!({"query": "x", "num": 0}), "`num`"),
        (json!({"query": "x", "num": 21}), "`num`"),
    ] {
        let e = tool.plan(&bad, &dir).unwrap_err();
        assert!(e.contains(why), "{bad}: {e}");
    }
    let out = tool
        .run(json!({"query": "rust lang", "num": 1}), tool_ctx())
        .await;
    assert!(out.ok, "{out:?}");
    assert!(
        out.content.contains("untrusted web content"),
        "{}",
        out.content
    );
    assert!(
        out.content
            .contains("<result n=\"1\">\nThe Rust & you\nhttps://example.com/rust\nLearn Rust's ways here\n</result>"),
        "{}",
        out.content
    );
    assert!(
        !out.content.contains("docs.example.org"),
        "num caps: {}",
        out.content
    );
    assert_eq!(out.meta["provider"], "ddgs");
    assert_eq!(out.meta["untrusted"], true);
    assert_eq!(out.meta["results"][0]["url"], "https://example.com/rust");
    assert_eq!(out.meta["failed"][0]["provider"], "searxng");

    let s = setup(json!({"search": {
        "provider": "searxng", "fallback": false,
        "searxng": {"url": format!("{base}/fail")},
    }}));
    let tool = crate::tools::web_search::WebSearchTool::new(s.web.clone());
    let out = tool.run(json!({"query": "x"}), tool_ctx()).await;
    assert!(!out.ok);
    assert!(
        out.content.contains("searxng") && out.content.contains("HTTP 502"),
        "{}",
        out.content
    );
}
