use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::provider::test_server::{fixture, serve, Reply};
use crate::provider::{
    ApiKind, ChatMessage, ModelRequest, ProviderError, RetryPolicy, StreamEvent, ThinkingBlock,
    ToolCall, ToolSpec, Usage,
};

const KEY: &str = "sk-ant-api03-TEST-SECRET-abcdef";

fn provider(base: &str) -> AnthropicProvider {
    let cfg = ProviderConfig {
        vendor: "anthropic".into(),
        base_url: base.to_string(),
        api_key: Some(KEY.into()),
        oauth: false,
        model: "claude-sonnet-4-5".into(),
        api: ApiKind::Anthropic,
    };
    let retry = RetryPolicy {
        max_retries: 3,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
    };
    AnthropicProvider::with_retry(cfg, retry).unwrap()
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

async fn run(p: &AnthropicProvider, r: ModelRequest) -> Vec<Result<StreamEvent, ProviderError>> {
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
async fn streams_text_usage_and_done() {
    let server = serve(vec![Reply::sse(fixture("anthropic_text.sse"))]).await;
    let ev = run(&provider(&server.base), simple_request()).await;
    assert_eq!(
        ev,
        vec![
            Ok(StreamEvent::Model("claude-sonnet-4-5-20250929".into())),
            Ok(StreamEvent::TextDelta("Hello".into())),
            Ok(StreamEvent::TextDelta("! How can I help".into())),
            Ok(StreamEvent::TextDelta(
                " you with your project today? 🌱".into()
            )),
            Ok(StreamEvent::Usage(Usage {
                input_tokens: 25,
                output_tokens: 19,
                cached_tokens: 0,
                timings: None,
            })),
            Ok(StreamEvent::Done {
                stop_reason: "end_turn".into()
            }),
        ]
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].headers["x-api-key"], KEY);
    assert_eq!(reqs[0].headers["anthropic-version"], "2023-06-01");
    assert!(reqs[0].headers.get("authorization").is_none());
    let body = &reqs[0].body;
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
    assert_eq!(body["system"], "You are Snowpea.");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hello"}]}])
    );
}

#[tokio::test]
async fn tool_use_split_across_deltas_with_thinking_and_cache_usage() {
    let mut reply = Reply::sse(fixture("anthropic_tool_use.sse"));
    reply.chunk_size = 13;
    let server = serve(vec![reply]).await;
    let ev = run(&provider(&server.base), simple_request()).await;
    let reasoning: String = ev
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ReasoningDelta(r)) => Some(r.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "I should look at the file first.");
    assert_eq!(text(&ev), "Let me read the file and run the tests.");
    let calls: Vec<&ToolCall> = ev
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCall(c)) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            &ToolCall {
                id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                name: "read_file".into(),
                arguments: json!({"path": "src/main.rs"})
            },
            &ToolCall {
                id: "toolu_01KxGc7Wj2Yq9dFv5Ns3PbHe".into(),
                name: "shell".into(),
                arguments: json!({"command": "cargo test -q", "timeout": 60})
            },
        ]
    );
    let n = ev.len();
    assert_eq!(
        ev[n - 2],
        Ok(StreamEvent::Usage(Usage {
            input_tokens: 472 + 1024,
            output_tokens: 89,
            cached_tokens: 1024,
            timings: None,
        }))
    );
    assert_eq!(
        ev[n - 1],
        Ok(StreamEvent::Done {
            stop_reason: "tool_use".into()
        })
    );
}

#[tokio::test]
async fn error_event_mid_stream_is_a_provider_error() {
    let server = serve(vec![Reply::sse(fixture("anthropic_error.sse"))]).await;
    let ev = run(&provider(&server.base), simple_request()).await;
    assert_eq!(
        ev,
        vec![
            Ok(StreamEvent::Model("claude-sonnet-4-5-20250929".into())),
            Ok(StreamEvent::TextDelta("Sure, ".into())),
            Err(ProviderError::Http {
                vendor: "anthropic".into(),
                status: 529,
                message: "Overloaded".into()
            }),
        ]
    );
    assert_eq!(
        server.requests().len(),
        1,
        "errors after the stream started are not retried"
    );
}

#[tokio::test]
async fn overloaded_is_retried_then_succeeds() {
    let server = serve(vec![
        Reply::json(529, &fixture("anthropic_error_529.json")),
        Reply::sse(fixture("anthropic_text.sse")),
    ])
    .await;
    let ev = run(&provider(&server.base), simple_request()).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    assert_eq!(
        text(&ev),
        "Hello! How can I help you with your project today? 🌱"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn rate_limit_is_retried_with_backoff_then_succeeds() {
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#;
    let server = serve(vec![
        Reply::json(429, body).header("retry-after", "0"),
        Reply::sse(fixture("anthropic_text.sse")),
    ])
    .await;
    let ev = run(&provider(&server.base), simple_request()).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn bad_request_fails_with_vendor_message() {
    let server = serve(vec![Reply::json(400, &fixture("anthropic_error_400.json"))]).await;
    let ev = run(&provider(&server.base), simple_request()).await;
    assert_eq!(
        ev,
        vec![Err(ProviderError::Http {
            vendor: "anthropic".into(),
            status: 400,
            message: "messages.1.content.0.tool_use.input: Input should be a valid dictionary"
                .into(),
        })]
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn request_body_maps_tools_and_history() {
    let server = serve(vec![Reply::sse(fixture("anthropic_text.sse"))]).await;
    let p = provider(&server.base);
    let a = ToolCall {
        id: "toolu_a".into(),
        name: "shell".into(),
        arguments: json!({"command": "ls"}),
    };
    let b = ToolCall {
        id: "toolu_b".into(),
        name: "read_file".into(),
        arguments: json!({"path": "x"}),
    };
    let request = ModelRequest {
        model: "claude-opus-4-1".into(),
        system: "sys".into(),
        messages: vec![
            ChatMessage::user("list files"),
            ChatMessage::assistant("Looking.", vec![a.clone(), b.clone()]),
            ChatMessage::tool_result(&a, "a.txt", false),
            ChatMessage::tool_result(&b, "denied by the user", true),
            ChatMessage::user("and then?"),
            ChatMessage::assistant("", vec![]),
        ],
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: "Run a shell command".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        }],
        max_tokens: Some(1000),
        effort: None,
    };
    let ev = run(&p, request).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    let body = &server.requests()[0].body;
    assert_eq!(body["model"], "claude-opus-4-1");
    assert_eq!(body["max_tokens"], 1000);
    assert_eq!(
        body["tools"],
        json!([{
            "name": "shell",
            "description": "Run a shell command",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
        }])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "list files"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_a", "name": "shell", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "x"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "a.txt"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "denied by the user", "is_error": true},
                {"type": "text", "text": "and then?"}
            ]}
        ])
    );
}

#[tokio::test]
async fn truncated_stream_is_a_network_error() {
    let full = fixture("anthropic_text.sse");
    let cut = full[..full.find("event: message_delta").unwrap()].to_string();
    let server = serve(vec![Reply::sse(cut)]).await;
    let ev = run(&provider(&server.base), simple_request()).await;
    assert!(
        matches!(ev.last(), Some(Err(ProviderError::Network { .. }))),
        "{ev:?}"
    );
}

#[tokio::test]
async fn dropping_the_stream_aborts_the_request() {
    let mut reply = Reply::sse(
        fixture("anthropic_text.sse")
            .split("event: message_delta")
            .next()
            .unwrap()
            .to_string(),
    );
    reply.chunk_delay = Duration::from_millis(5);
    reply.hold_open = true;
    let server = serve(vec![reply]).await;
    let p = provider(&server.base);
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
fn debug_masks_key() {
    let p = provider("http://127.0.0.1:9");
    let dbg = format!("{p:?}");
    assert!(!dbg.contains(KEY), "{dbg}");
    assert!(dbg.contains("***"));
}

#[test]
fn input_json_delta_for_text_block_is_protocol_error() {
    let mut st = EventState::new("anthropic".into());
    st.on_event(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    );
    let out = st.on_event(
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
    );
    assert!(
        matches!(&out[..], [Err(ProviderError::Protocol { .. })]),
        "{out:?}"
    );
}

#[tokio::test]
async fn tool_result_images_are_image_blocks_inside_the_tool_result() {
    let server = serve(vec![Reply::sse(fixture("anthropic_text.sse"))]).await;
    let p = provider(&server.base);
    let a = ToolCall {
        id: "toolu_img".into(),
        name: "mcp__ev__get-tiny-image".into(),
        arguments: json!({}),
    };
    let b = ToolCall {
        id: "toolu_txt".into(),
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
            ChatMessage::tool_result(
                &a,
                "Here's the image:\n[image image/png (12 bytes base64)]",
                false,
            )
            .with_images(vec![png, svg]),
            ChatMessage::tool_result(&b, "X", false),
        ],
        tools: vec![],
        max_tokens: None,
        effort: None,
    };
    let ev = run(&p, request).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    // What went over the wire: the image as a base64 image block inside the tool_result
    // content (the unsupported SVG left out), the plain result unchanged.
    let body = &server.requests()[0].body;
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_img", "content": [
                {"type": "text", "text": "Here's the image:\n[image image/png (12 bytes base64)]"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
            ]},
            {"type": "tool_result", "tool_use_id": "toolu_txt", "content": "X"}
        ]})
    );
}

/// The session's effort reaches the wire as an extended-thinking budget, with `max_tokens`
/// raised above it; a tool-result continuation whose assistant message kept no signed
/// thinking block goes without.
#[tokio::test]
async fn effort_is_sent_as_a_thinking_budget() {
    let server = serve(vec![
        Reply::sse(fixture("anthropic_text.sse")),
        Reply::sse(fixture("anthropic_text.sse")),
        Reply::sse(fixture("anthropic_text.sse")),
    ])
    .await;
    let p = provider(&server.base);
    let mut high = simple_request();
    high.effort = Some("high".into());
    let mut none = simple_request();
    none.effort = None;
    let call = ToolCall {
        id: "toolu_a".into(),
        name: "shell".into(),
        arguments: json!({"command": "ls"}),
    };
    let mut after_tool = simple_request();
    after_tool.effort = Some("max".into());
    after_tool
        .messages
        .push(ChatMessage::assistant("", vec![call.clone()]));
    after_tool
        .messages
        .push(ChatMessage::tool_result(&call, "a.txt", false));
    for r in [high, none, after_tool] {
        let ev = run(&p, r).await;
        assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    }
    let reqs = server.requests();
    assert_eq!(
        reqs[0].body["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384})
    );
    assert!(reqs[0].body["max_tokens"].as_u64().unwrap() > 16384);
    assert!(reqs[1].body.get("thinking").is_none());
    assert_eq!(reqs[1].body["max_tokens"], DEFAULT_MAX_TOKENS);
    assert!(reqs[2].body.get("thinking").is_none());
}

/// An image attached to a prompt reaches the wire as an `image` block of the user message.
#[tokio::test]
async fn an_attached_image_is_a_user_image_block() {
    let server = serve(vec![Reply::sse(fixture("anthropic_text.sse"))]).await;
    let p = provider(&server.base);
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
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "text", "text": "what is this?"}
        ]}])
    );
}

/// A signed thinking block streamed by Anthropic comes out as one `Thinking` event (the text
/// of its deltas and its signature); kept on the assistant message, it is sent back first in
/// that message's content, unchanged, and the tool-result continuation then carries the
/// thinking budget too (the API requires the signed block for thinking across tool rounds).
#[tokio::test]
async fn signed_thinking_is_kept_and_sent_back_on_the_tool_round() {
    let mut reply = Reply::sse(fixture("anthropic_tool_use.sse"));
    reply.chunk_size = 17;
    let server = serve(vec![reply, Reply::sse(fixture("anthropic_text.sse"))]).await;
    let p = provider(&server.base);
    let mut first = simple_request();
    first.effort = Some("high".into());
    let ev = run(&p, first.clone()).await;
    let thinking: Vec<ThinkingBlock> = ev
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::Thinking(t)) => Some(t.clone()),
            _ => None,
        })
        .collect();
    let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds";
    assert_eq!(
        thinking,
        vec![ThinkingBlock {
            thinking: "I should look at the file first.".into(),
            signature: signature.into(),
            redacted: None,
        }]
    );
    let calls: Vec<ToolCall> = ev
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCall(c)) => Some(c.clone()),
            _ => None,
        })
        .collect();
    let mut next = first;
    next.messages.push(
        ChatMessage::assistant("Let me read the file and run the tests.", calls.clone())
            .with_thinking(thinking),
    );
    for c in &calls {
        next.messages.push(ChatMessage::tool_result(c, "ok", false));
    }
    let ev = run(&p, next).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    let reqs = server.requests();
    let body = &reqs[1].body;
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384}),
        "thinking continues on the tool round"
    );
    let assistant = &body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "I should look at the file first.", "signature": signature})
    );
    assert_eq!(assistant["content"][1]["type"], "text");
    assert_eq!(assistant["content"][2]["type"], "tool_use");
}

/// A `redacted_thinking` block is kept as its opaque `data` and sent back as it came.
#[test]
fn redacted_thinking_is_kept_opaque() {
    let mut state = EventState::new("anthropic".into());
    let mut out = state.on_event(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}"#,
    );
    out.extend(state.on_event(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    ));
    let block = ThinkingBlock {
        thinking: String::new(),
        signature: String::new(),
        redacted: Some("EmwKAhgBEgy3va3pzix".into()),
    };
    assert_eq!(out, vec![Ok(StreamEvent::Thinking(block.clone()))]);
    let msgs = messages_json(&[
        ChatMessage::user("q"),
        ChatMessage::assistant("a", vec![]).with_thinking(vec![block]),
    ]);
    assert_eq!(
        msgs[1]["content"][0],
        json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"})
    );
}
