use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::provider::test_server::{fixture, serve, Reply};
use crate::provider::{
    ApiKind, ChatMessage, ModelRequest, ProviderError, StreamEvent, ToolCall, ToolSpec, Usage,
};

const KEY: &str = "sk-test-SECRET-0123456789";

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
    }
}

fn provider(base: &str, vendor: &str) -> OpenAiProvider {
    let cfg = ProviderConfig {
        vendor: vendor.into(),
        base_url: format!("{base}/v1"),
        api_key: Some(KEY.into()),
        oauth: false,
        model: "gpt-4o-mini".into(),
        api: ApiKind::OpenAi,
    };
    OpenAiProvider::with_retry(cfg, fast_retry()).unwrap()
}

fn simple_request() -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: "You are Snowpea.".into(),
        messages: vec![ChatMessage::user("hello")],
        tools: vec![],
        max_tokens: None,
        effort: None,
    }
}

async fn run(p: &OpenAiProvider, r: ModelRequest) -> Vec<Result<StreamEvent, ProviderError>> {
    p.stream(r).collect().await
}

fn text(ev: &[Result<StreamEvent, ProviderError>]) -> String {
    ev.iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn streams_text_deltas_usage_and_done() {
    let server = serve(vec![Reply::sse(fixture("openai_text.sse"))]).await;
    let p = provider(&server.base, "openai");
    let ev = run(&p, simple_request()).await;
    let deltas = ev
        .iter()
        .filter(|e| matches!(e, Ok(StreamEvent::TextDelta(_))))
        .count();
    assert_eq!(deltas, 12, "{ev:?}");
    assert_eq!(
        text(&ev),
        "Hello! How can I help you today with your project? 👋"
    );
    let n = ev.len();
    assert_eq!(
        ev[n - 2],
        Ok(StreamEvent::Usage(Usage {
            input_tokens: 23,
            output_tokens: 13,
            cached_tokens: 0,
            timings: None,
        }))
    );
    assert_eq!(
        ev[n - 1],
        Ok(StreamEvent::Done {
            stop_reason: "stop".into()
        })
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].headers["authorization"], format!("Bearer {KEY}"));
    let body = &reqs[0].body;
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "You are Snowpea."}, {"role": "user", "content": "hello"}])
    );
    assert!(
        body.get("tools").is_none(),
        "no tools offered → no tools field"
    );
}

#[tokio::test]
async fn usage_with_cached_tokens() {
    let server = serve(vec![Reply::sse(fixture("openai_usage.sse"))]).await;
    let ev = run(&provider(&server.base, "openai"), simple_request()).await;
    assert_eq!(text(&ev), "The answer is 42.");
    assert!(
        ev.contains(&Ok(StreamEvent::Usage(Usage {
            input_tokens: 2006,
            output_tokens: 5,
            cached_tokens: 1920,
            timings: None,
        }))),
        "{ev:?}"
    );
}

#[tokio::test]
async fn tool_calls_split_across_chunks_are_assembled() {
    let mut reply = Reply::sse(fixture("openai_tool_calls_split.sse"));
    reply.chunk_size = 11; // cut events, JSON and header lines at awkward places
    let server = serve(vec![reply]).await;
    let p = provider(&server.base, "openai");
    let ev = run(&p, simple_request()).await;
    let calls: Vec<&ToolCall> = ev
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCall(c)) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2, "{ev:?}");
    assert_eq!(calls[0].id, "call_Qm3eXyN1vR8tL0aS4dKj7pWc");
    assert_eq!(calls[0].name, "read_file");
    assert_eq!(calls[0].arguments, json!({"path": "src/main.rs"}));
    assert_eq!(calls[1].id, "call_Zb7uHc2kF9wE5nYq1oGx3rMs");
    assert_eq!(calls[1].name, "shell");
    assert_eq!(
        calls[1].arguments,
        json!({"command": "cargo test -q", "timeout": 60})
    );
    assert!(text(&ev).is_empty());
    let n = ev.len();
    assert_eq!(
        ev[n - 2],
        Ok(StreamEvent::Usage(Usage {
            input_tokens: 312,
            output_tokens: 58,
            cached_tokens: 0,
            timings: None,
        }))
    );
    assert_eq!(
        ev[n - 1],
        Ok(StreamEvent::Done {
            stop_reason: "tool_calls".into()
        })
    );
}

#[tokio::test]
async fn reasoning_deltas_and_sse_comments() {
    let server = serve(vec![Reply::sse(fixture("openai_reasoning.sse"))]).await;
    let ev = run(&provider(&server.base, "openrouter"), simple_request()).await;
    let reasoning: String = ev
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ReasoningDelta(r)) => Some(r.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "The user wants a greeting.");
    assert_eq!(text(&ev), "Hi!");
    assert!(ev.contains(&Ok(StreamEvent::Usage(Usage {
        input_tokens: 9,
        output_tokens: 20,
        cached_tokens: 0,
        timings: None,
    }))));
    assert_eq!(
        ev.last(),
        Some(&Ok(StreamEvent::Done {
            stop_reason: "stop".into()
        }))
    );
}

#[tokio::test]
async fn request_body_maps_tools_and_history() {
    let server = serve(vec![Reply::sse(fixture("openai_text.sse"))]).await;
    let p = provider(&server.base, "ollama");
    let call = ToolCall {
        id: "call_1".into(),
        name: "shell".into(),
        arguments: json!({"command": "ls"}),
    };
    let call2 = ToolCall {
        id: "call_2".into(),
        name: "read_file".into(),
        arguments: json!({"path": "x"}),
    };
    let request = ModelRequest {
        model: "qwen3:8b".into(),
        system: "sys".into(),
        messages: vec![
            ChatMessage::user("list files"),
            ChatMessage::assistant("", vec![call.clone(), call2.clone()]),
            ChatMessage::tool_result(&call, "a.txt\nb.txt", false),
            ChatMessage::tool_result(&call2, "denied by the user", true),
            ChatMessage::assistant("Two files.", vec![]),
            ChatMessage::user("thanks"),
        ],
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: "Run a shell command".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        }],
        max_tokens: Some(256),
        effort: None,
    };
    let ev = run(&p, request).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    let body = &server.requests()[0].body;
    assert_eq!(body["model"], "qwen3:8b");
    assert_eq!(body["max_tokens"], 256);
    assert!(body.get("max_completion_tokens").is_none());
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "shell",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
        }}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":\"ls\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Error: denied by the user"},
            {"role": "assistant", "content": "Two files."},
            {"role": "user", "content": "thanks"}
        ])
    );
}

#[tokio::test]
async fn openai_itself_gets_max_completion_tokens() {
    let p = provider("http://127.0.0.1:9", "openai");
    let mut r = simple_request();
    r.max_tokens = Some(100);
    let body = p.request_body(&r);
    assert_eq!(body["max_completion_tokens"], 100);
    assert!(body.get("max_tokens").is_none());
}

#[tokio::test]
async fn rate_limit_is_retried_with_backoff_then_succeeds() {
    let server = serve(vec![
        Reply::json(429, &fixture("openai_error_429.json")).header("retry-after", "0.02"),
        Reply::sse(fixture("openai_text.sse")),
    ])
    .await;
    let started = std::time::Instant::now();
    let ev = run(&provider(&server.base, "openai"), simple_request()).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    assert_eq!(
        text(&ev),
        "Hello! How can I help you today with your project? 👋"
    );
    assert_eq!(server.requests().len(), 2, "one refused request, one retry");
    assert!(
        started.elapsed() >= Duration::from_millis(20),
        "Retry-After honoured"
    );
}

#[tokio::test]
async fn server_errors_exhaust_retries_then_fail() {
    let replies = (0..4)
        .map(|_| Reply::json(503, r#"{"error":{"message":"The server is overloaded"}}"#))
        .collect();
    let server = serve(replies).await;
    let ev = run(&provider(&server.base, "openai"), simple_request()).await;
    assert_eq!(
        ev,
        vec![Err(ProviderError::Http {
            vendor: "openai".into(),
            status: 503,
            message: "The server is overloaded".into()
        })]
    );
    assert_eq!(server.requests().len(), 4, "first attempt + 3 retries");
}

#[tokio::test]
async fn bad_request_fails_at_once_with_vendor_message() {
    let server = serve(vec![
        Reply::json(400, &fixture("openai_error_400.json")),
        Reply::sse(fixture("openai_text.sse")),
    ])
    .await;
    let ev = run(&provider(&server.base, "openai"), simple_request()).await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    match &ev[0] {
        Err(ProviderError::Http {
            vendor,
            status,
            message,
        }) => {
            assert_eq!(vendor, "openai");
            assert_eq!(*status, 400);
            assert!(
                message.starts_with("Invalid schema for function 'shell'"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 1, "4xx is not retried");
}

#[tokio::test]
async fn api_key_echoed_by_vendor_is_redacted() {
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}.","type":"invalid_request_error"}}}}"#
    );
    let server = serve(vec![Reply::json(401, &body)]).await;
    let p = provider(&server.base, "openai");
    let ev = run(&p, simple_request()).await;
    let err = ev[0].as_ref().unwrap_err();
    assert!(!err.to_string().contains(KEY), "{err}");
    assert!(
        err.to_string().contains("Incorrect API key provided: ***"),
        "{err}"
    );
    assert!(!format!("{p:?}").contains(KEY));
}

#[tokio::test]
async fn error_inside_the_stream_ends_the_call() {
    let server = serve(vec![Reply::sse(fixture("openai_midstream_error.sse"))]).await;
    let ev = run(&provider(&server.base, "openrouter"), simple_request()).await;
    assert_eq!(ev[0], Ok(StreamEvent::Model("deepseek/deepseek-r1".into())));
    let ev = ev[1..].to_vec();
    assert_eq!(ev[0], Ok(StreamEvent::TextDelta("Partial".into())));
    assert_eq!(
        ev[1],
        Err(ProviderError::Http {
            vendor: "openrouter".into(),
            status: 502,
            message: "Provider returned error".into()
        })
    );
    assert_eq!(ev.len(), 2);
}

#[tokio::test]
async fn truncated_stream_is_a_network_error() {
    let full = fixture("openai_text.sse");
    let cut = full[..full.find("\"finish_reason\":\"stop\"").unwrap()]
        .rsplit_once("data:")
        .unwrap()
        .0
        .to_string();
    let server = serve(vec![Reply::sse(cut)]).await;
    let ev = run(&provider(&server.base, "openai"), simple_request()).await;
    assert!(
        matches!(ev.last(), Some(Err(ProviderError::Network { .. }))),
        "{ev:?}"
    );
    assert!(!ev.iter().any(|e| matches!(e, Ok(StreamEvent::Done { .. }))));
}

#[tokio::test]
async fn connection_refused_is_a_network_error() {
    // Bind then drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = provider(&format!("http://127.0.0.1:{port}"), "llamacpp");
    let ev = run(&p, simple_request()).await;
    assert!(
        matches!(&ev[..], [Err(ProviderError::Network { vendor, .. })] if vendor == "llamacpp"),
        "{ev:?}"
    );
}

#[tokio::test]
async fn dropping_the_stream_aborts_the_request() {
    let mut reply = Reply::sse(
        fixture("openai_text.sse")
            .split("data: [DONE]")
            .next()
            .unwrap()
            .to_string(),
    );
    reply.chunk_delay = Duration::from_millis(5);
    reply.hold_open = true; // a server that keeps streaming (keep-alives) forever
    let server = serve(vec![reply]).await;
    let p = provider(&server.base, "openai");
    let mut s = p.stream(simple_request());
    let model = tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .unwrap();
    assert!(
        matches!(model, Some(Ok(StreamEvent::Model(_)))),
        "{model:?}"
    );
    let first = tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .unwrap();
    assert!(
        matches!(first, Some(Ok(StreamEvent::TextDelta(_)))),
        "{first:?}"
    );
    assert!(!server.client_dropped());
    drop(s);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !server.client_dropped() {
        assert!(
            std::time::Instant::now() < deadline,
            "server never saw the client go away"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn chunk_state_handles_calls_without_index_or_id() {
    let mut st = ChunkState::new("ollama".into(), 0);
    let mut out = st.on_data(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"glob","arguments":{"pattern":"*.rs"}}}]},"finish_reason":null}]}"#);
    out.extend(st.on_data(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#));
    out.extend(st.finish());
    match &out[0] {
        Ok(StreamEvent::ToolCall(c)) => {
            assert_eq!(c.name, "glob");
            assert_eq!(c.arguments, json!({"pattern": "*.rs"}));
            assert!(c.id.starts_with("call_"));
        }
        other => panic!("{other:?}"),
    }
    // No usage from the server → an estimate is still reported.
    assert!(matches!(out[1], Ok(StreamEvent::Usage(_))));
    assert_eq!(
        out[2],
        Ok(StreamEvent::Done {
            stop_reason: "tool_calls".into()
        })
    );
}

#[test]
fn chunk_state_keeps_invalid_arguments_raw() {
    let mut st = ChunkState::new("vllm".into(), 0);
    let mut out = st.on_data(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"shell","arguments":"{\"command\": \"ls"}}]},"finish_reason":null}]}"#);
    out.extend(st.on_data("[DONE]"));
    out.extend(st.finish());
    assert_eq!(
        out[0],
        Ok(StreamEvent::ToolCall(ToolCall {
            id: "c".into(),
            name: "shell".into(),
            arguments: json!({"_raw": "{\"command\": \"ls"})
        }))
    );
}

#[test]
fn chunk_state_rejects_garbage() {
    let mut st = ChunkState::new("openai".into(), 0);
    assert!(matches!(
        &st.on_data("{not json")[..],
        [Err(ProviderError::Protocol { .. })]
    ));
}

#[tokio::test]
async fn tool_result_images_follow_the_tool_messages_as_a_user_message() {
    let server = serve(vec![Reply::sse(fixture("openai_text.sse"))]).await;
    let p = provider(&server.base, "openai");
    let a = ToolCall {
        id: "call_img".into(),
        name: "mcp__ev__get-tiny-image".into(),
        arguments: json!({}),
    };
    let b = ToolCall {
        id: "call_txt".into(),
        name: "read_file".into(),
        arguments: json!({"path": "x"}),
    };
    let png = crate::provider::ToolImage {
        mime_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };
    let svg = crate::provider::ToolImage {
        mime_type: "image/svg+xml".into(),
        data: "PHN2Zy8+".into(),
    };
    let request = ModelRequest {
        model: String::new(),
        system: String::new(),
        messages: vec![
            ChatMessage::user("show me"),
            ChatMessage::assistant("", vec![a.clone(), b.clone()]),
            ChatMessage::tool_result(&a, "Here's the image:", false).with_images(vec![png, svg]),
            ChatMessage::tool_result(&b, "X", false),
            ChatMessage::assistant("Nice.", vec![]),
        ],
        tools: vec![],
        max_tokens: None,
        effort: None,
    };
    let ev = run(&p, request).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    // Tool messages stay text and stay together right after the calls; one user message
    // after them carries the image as a data: URL (the unsupported SVG left out).
    let body = &server.requests()[0].body;
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "show me"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_img", "type": "function", "function": {"name": "mcp__ev__get-tiny-image", "arguments": "{}"}},
                {"id": "call_txt", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_img", "content": "Here's the image:"},
            {"role": "tool", "tool_call_id": "call_txt", "content": "X"},
            {"role": "user", "content": [
                {"type": "text", "text": "Image returned by tool call call_img (mcp__ev__get-tiny-image):"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
            ]},
            {"role": "assistant", "content": "Nice."}
        ])
    );
}

#[test]
fn images_at_the_end_of_the_history_still_go_out() {
    let p = provider("http://127.0.0.1:9", "ollama");
    let a = ToolCall {
        id: "c1".into(),
        name: "shot".into(),
        arguments: json!({}),
    };
    let img = crate::provider::ToolImage {
        mime_type: "image/jpeg".into(),
        data: "/9j/4AAQ".into(),
    };
    let mut r = simple_request();
    r.messages.push(ChatMessage::assistant("", vec![a.clone()]));
    r.messages
        .push(ChatMessage::tool_result(&a, "shot taken", false).with_images(vec![img]));
    let body = p.request_body(&r);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"][1]["image_url"]["url"],
        "data:image/jpeg;base64,/9j/4AAQ"
    );
}

/// The session's effort reaches the wire as `reasoning_effort` (`max` as `high`); no effort,
/// no field.
#[tokio::test]
async fn effort_is_sent_as_reasoning_effort() {
    let server = serve(vec![
        Reply::sse(fixture("openai_text.sse")),
        Reply::sse(fixture("openai_text.sse")),
        Reply::sse(fixture("openai_text.sse")),
    ])
    .await;
    let p = provider(&server.base, "openai");
    for effort in [Some("low"), Some("max"), None] {
        let mut r = simple_request();
        r.model = "o4-mini".into();
        r.effort = effort.map(str::to_owned);
        let ev = run(&p, r).await;
        assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    }
    let reqs = server.requests();
    assert_eq!(reqs[0].body["reasoning_effort"], "low");
    assert_eq!(reqs[1].body["reasoning_effort"], "high");
    assert!(reqs[2].body.get("reasoning_effort").is_none());
}

/// An image attached to a prompt reaches the wire as an `image_url` part of the user message.
#[tokio::test]
async fn an_attached_image_is_a_user_image_url_part() {
    let server = serve(vec![Reply::sse(fixture("openai_text.sse"))]).await;
    let p = provider(&server.base, "openai");
    let mut r = simple_request();
    r.messages = vec![ChatMessage::user("what is this?").with_images(vec![
        crate::provider::ToolImage {
            mime_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        },
    ])];
    let ev = run(&p, r).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    let body = &server.requests()[0].body;
    let user = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        user,
        json!({"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
        ]})
    );
}

/// Capability `llmTimings` (issue 32 item 8): llama.cpp's `timings` in its final chunk ride
/// in the usage — the spec's five keys only.
#[tokio::test]
async fn llama_cpp_timings_ride_in_the_usage() {
    let server = serve(vec![Reply::sse(fixture("openai_llamacpp_timings.sse"))]).await;
    let ev = run(&provider(&server.base, "llamacpp"), simple_request()).await;
    assert_eq!(text(&ev), "Hi there.");
    let usage = ev
        .iter()
        .find_map(|e| match e {
            Ok(StreamEvent::Usage(u)) => Some(u.clone()),
            _ => None,
        })
        .expect("usage");
    let timings = usage.timings.expect("timings");
    let expected: std::collections::BTreeMap<String, f64> = [
        ("cache_n", 19.0),
        ("predicted_ms", 61.5),
        ("predicted_n", 3.0),
        ("prompt_ms", 48.25),
        ("prompt_n", 12.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(timings, expected);
    assert_eq!((usage.input_tokens, usage.output_tokens), (31, 3));
}
