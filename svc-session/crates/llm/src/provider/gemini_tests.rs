use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::provider::test_server::{fixture, serve, Reply};
use crate::provider::{ApiKind, ProviderError, ToolImage, ToolSpec};

const KEY: &str = "AIza-test-SECRET-0123456789";

fn config(base: &str, oauth: bool) -> ProviderConfig {
    ProviderConfig {
        vendor: "gemini".into(),
        base_url: format!("{base}/v1beta"),
        api_key: Some(KEY.into()),
        oauth,
        model: "gemini-2.5-flash".into(),
        api: ApiKind::Gemini,
    }
}

fn provider(base: &str) -> GeminiProvider {
    let retry = RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
    };
    GeminiProvider::with_retry(config(base, false), retry).unwrap()
}

fn request(messages: Vec<ChatMessage>) -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: "You are Snowpea.".into(),
        messages,
        tools: vec![],
        max_tokens: None,
        effort: None,
    }
}

async fn run(p: &GeminiProvider, r: ModelRequest) -> Vec<Result<StreamEvent, ProviderError>> {
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
async fn streams_text_usage_and_done_with_the_key_header() {
    let server = serve(vec![Reply::sse(fixture("gemini_text.sse"))]).await;
    let ev = run(
        &provider(&server.base),
        request(vec![ChatMessage::user("hello")]),
    )
    .await;
    assert_eq!(
        text(&ev),
        "Hello! How can I help you with your project today? 🌱"
    );
    let n = ev.len();
    assert_eq!(
        ev[n - 2],
        Ok(StreamEvent::Usage(Usage {
            input_tokens: 9,
            output_tokens: 13 + 19,
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
    assert_eq!(
        reqs[0].path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    );
    assert_eq!(reqs[0].headers["x-goog-api-key"], KEY);
    assert!(reqs[0].headers.get("authorization").is_none());
    assert_eq!(
        reqs[0].body,
        json!({
            "contents": [{"role": "user", "parts": [{"text": "hello"}]}],
            "systemInstruction": {"parts": [{"text": "You are Snowpea."}]}
        })
    );
}

#[tokio::test]
async fn function_calls_reasoning_and_the_next_request_carry_results_and_signatures() {
    let server = serve(vec![
        Reply::sse(fixture("gemini_tool_calls.sse")),
        Reply::sse(fixture("gemini_text.sse")),
    ])
    .await;
    let p = provider(&server.base);
    let mut r = request(vec![ChatMessage::user("run the tests")]);
    r.tools = vec![ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "description": "file", "default": "."},
                "limit": {"type": ["integer", "null"], "minimum": 1},
                "tags": {"type": "array", "items": {"type": "string", "examples": ["a"]}}
            },
            "required": ["path"]
        }),
    }];
    r.max_tokens = Some(512);
    let ev = run(&p, r.clone()).await;
    assert_eq!(ev[0], Ok(StreamEvent::Model("gemini-2.5-pro".into())));
    assert!(matches!(&ev[1], Ok(StreamEvent::ReasoningDelta(t)) if t.contains("read the file")));
    assert_eq!(text(&ev), "Let me read the file and run the tests.");
    let calls: Vec<ToolCall> = ev
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCall(c)) => Some(c.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2, "{ev:?}");
    assert_eq!(
        (calls[0].name.as_str(), &calls[0].arguments),
        ("read_file", &json!({"path": "src/main.rs"}))
    );
    assert_eq!(
        (calls[1].name.as_str(), &calls[1].arguments),
        ("shell", &json!({"command": "cargo test -q"}))
    );
    assert!(calls.iter().all(|c| c.id.starts_with(GENERATED_ID)));
    assert_ne!(calls[0].id, calls[1].id);
    let n = ev.len();
    assert_eq!(
        ev[n - 2],
        Ok(StreamEvent::Usage(Usage {
            input_tokens: 412,
            output_tokens: 41 + 28,
            cached_tokens: 256,
            timings: None,
        }))
    );
    assert_eq!(
        ev[n - 1],
        Ok(StreamEvent::Done {
            stop_reason: "tool_calls".into()
        })
    );
    let first = &server.requests()[0].body;
    assert_eq!(first["generationConfig"], json!({"maxOutputTokens": 512}));
    assert_eq!(
        first["tools"][0]["functionDeclarations"][0]["parameters"],
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "file"},
                "limit": {"type": "integer", "nullable": true, "minimum": 1},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["path"]
        }),
        "unsupported schema keys are dropped"
    );

    // The next round: the calls, their results (one failed, one with an image), then text.
    let image = ToolImage {
        mime_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };
    r.messages.push(ChatMessage::assistant(
        "Let me read the file and run the tests.",
        calls.clone(),
    ));
    r.messages
        .push(ChatMessage::tool_result(&calls[0], "fn main() {}", false).with_images(vec![image]));
    r.messages
        .push(ChatMessage::tool_result(&calls[1], "exit 101", true));
    r.messages.push(ChatMessage::user("and now?"));
    let ev = run(&p, r).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    let second = &server.requests()[1].body;
    assert_eq!(
        second["contents"],
        json!([
            {"role": "user", "parts": [{"text": "run the tests"}]},
            {"role": "model", "parts": [
                {"text": "Let me read the file and run the tests."},
                {"functionCall": {"name": "read_file", "args": {"path": "src/main.rs"}},
                 "thoughtSignature": "CiQB0e2Kb3Yk1PvcbZs2aOQJ2tr1Xe7AHxzp+cyl0nGpgBR6Ufo="},
                {"functionCall": {"name": "shell", "args": {"command": "cargo test -q"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "read_file", "response": {"result": "fn main() {}"}}},
                {"functionResponse": {"name": "shell", "response": {"error": "exit 101"}}},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
            ]},
            {"role": "user", "parts": [{"text": "and now?"}]}
        ])
    );
}

#[tokio::test]
async fn a_vendor_call_id_is_sent_back() {
    let call = ToolCall {
        id: "fc_123".into(),
        name: "shell".into(),
        arguments: json!({"command": "ls"}),
    };
    let body = build_body(&request(vec![
        ChatMessage::user("x"),
        ChatMessage::assistant("", vec![call.clone()]),
        ChatMessage::tool_result(&call, "a\nb", false),
    ]));
    assert_eq!(
        body["contents"][1]["parts"][0]["functionCall"]["id"],
        "fc_123"
    );
    assert_eq!(
        body["contents"][2]["parts"][0]["functionResponse"]["id"],
        "fc_123"
    );
}

#[tokio::test]
async fn errors_name_the_vendor_message_without_the_key_and_429_is_retried() {
    let server = serve(vec![Reply::json(400, &fixture("gemini_error_400.json"))]).await;
    let ev = run(
        &provider(&server.base),
        request(vec![ChatMessage::user("x")]),
    )
    .await;
    match &ev[..] {
        [Err(ProviderError::Http {
            status: 400,
            message,
            ..
        })] => {
            assert_eq!(message, "API key not valid. Please pass a valid API key.");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 1, "a 400 is not retried");

    let server = serve(vec![
        Reply::json(429, &fixture("gemini_error_429.json")),
        Reply::sse(fixture("gemini_text.sse")),
    ])
    .await;
    let ev = run(
        &provider(&server.base),
        request(vec![ChatMessage::user("x")]),
    )
    .await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_blocked_prompt_and_a_truncated_stream_fail_the_call() {
    let server = serve(vec![Reply::sse(fixture("gemini_blocked.sse"))]).await;
    let ev = run(
        &provider(&server.base),
        request(vec![ChatMessage::user("x")]),
    )
    .await;
    assert!(
        matches!(ev.last(), Some(Err(ProviderError::Http { status: 400, message, .. })) if message.contains("PROHIBITED_CONTENT")),
        "{ev:?}"
    );
    let server = serve(vec![Reply::sse(fixture("gemini_truncated.sse"))]).await;
    let ev = run(
        &provider(&server.base),
        request(vec![ChatMessage::user("x")]),
    )
    .await;
    assert_eq!(text(&ev), "Half an ans");
    assert!(
        matches!(ev.last(), Some(Err(ProviderError::Network { .. }))),
        "{ev:?}"
    );
}

#[tokio::test]
async fn an_oauth_token_is_a_bearer_token() {
    let server = serve(vec![Reply::sse(fixture("gemini_text.sse"))]).await;
    let p = GeminiProvider::new(config(&server.base, true)).unwrap();
    let ev = run(&p, request(vec![ChatMessage::user("x")])).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    let req = &server.requests()[0];
    assert_eq!(req.headers["authorization"], format!("Bearer {KEY}"));
    assert!(req.headers.get("x-goog-api-key").is_none());
    assert!(!format!("{p:?}").contains(KEY));
}
