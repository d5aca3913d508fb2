//! Token estimates of a history before the provider reports usage (issue 16 "Context and
//! tokens"): OpenAI-family models are counted with their real BPE (`tiktoken-rs`:
//! `o200k_base` for GPT-4o/4.1/5 and the o-series, `cl100k_base` for GPT-4/3.5, the model
//! name as the vendor spells it, an `openai/` style prefix ignored); every other model
//! (Anthropic and Gemini publish no local tokenizer) is ≈ 4 characters per token. Each
//! message adds [`MESSAGE_OVERHEAD`] tokens, each image [`ToolImage::ESTIMATED_TOKENS`].
//!
//! Counts are cached per text (a hash of the encoding and the text → its count; at most
//! [`CACHE_ENTRIES`], cleared when full), so the model calls of a turn tokenize only the
//! messages added since the last call, not the whole history again. The cache is
//! process-wide and holds no text.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use snowpea_proto::limits::TOKEN_ESTIMATE_RUN;
use tiktoken_rs::tokenizer::{get_tokenizer, Tokenizer};
use tiktoken_rs::CoreBPE;

use crate::provider::{ChatMessage, ToolImage};

/// Tokens added per message (role and separators of the chat format).
pub const MESSAGE_OVERHEAD: u64 = 4;
/// Most texts whose counts are cached.
pub const CACHE_ENTRIES: usize = 65_536;

/// How a count was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// The model's own BPE (`tiktoken-rs`), named by its encoding.
    Bpe(&'static str),
    /// ≈ 4 characters per token.
    Chars,
}

impl Method {
    /// `o200k_base`, `cl100k_base`, … or `chars/4`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Bpe(name) => name,
            Method::Chars => "chars/4",
        }
    }
}

/// The encoding of `model`, when it is an OpenAI-family model.
fn encoding(model: &str) -> Option<(&'static str, &'static CoreBPE)> {
    let bare = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .trim()
        .to_ascii_lowercase();
    if bare.is_empty() {
        return None;
    }
    let tokenizer = get_tokenizer(&bare).or_else(|| {
        ["gpt-5", "gpt-oss", "o4", "codex-"]
            .iter()
            .any(|p| bare.starts_with(p))
            .then_some(Tokenizer::O200kBase)
    })?;
    Some(match tokenizer {
        Tokenizer::O200kBase => ("o200k_base", tiktoken_rs::o200k_base_singleton()),
        Tokenizer::Cl100kBase => ("cl100k_base", tiktoken_rs::cl100k_base_singleton()),
        Tokenizer::P50kBase => ("p50k_base", tiktoken_rs::p50k_base_singleton()),
        Tokenizer::P50kEdit => ("p50k_edit", tiktoken_rs::p50k_edit_singleton()),
        _ => ("r50k_base", tiktoken_rs::r50k_base_singleton()),
    })
}

/// How `model`'s texts are counted.
pub fn method(model: &str) -> Method {
    encoding(model).map_or(Method::Chars, |(name, _)| Method::Bpe(name))
}

static CACHE: Mutex<Option<HashMap<u64, u32>>> = Mutex::new(None);

fn key(encoding: &str, text: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    encoding.hash(&mut h);
    text.hash(&mut h);
    h.finish()
}

/// Tokens of `text` for `model` (cached; see the module doc).
pub fn count_text(text: &str, model: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    let Some((name, bpe)) = encoding(model) else {
        return (text.len() as u64).div_ceil(4);
    };
    let k = key(name, text);
    if let Some(n) = CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&k))
    {
        return u64::from(*n);
    }
    // Encoded outside the lock: another thread may count the same text meanwhile.
    let n: u64 = pieces(text)
        .map(|p| bpe.encode_ordinary(p).len() as u64)
        .sum();
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if map.len() >= CACHE_ENTRIES {
        map.clear();
    }
    map.insert(k, n.min(u64::from(u32::MAX)) as u32);
    n
}

/// `text` cut into consecutive pieces for the BPE: wherever a run of whitespace or of
/// other characters reaches [`TOKEN_ESTIMATE_RUN`] bytes (an ordinary text is one piece).
/// BPE work is quadratic in the length of a run, linear in the number of pieces.
pub fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut run_start = 0;
        let mut run_ws: Option<bool> = None;
        for (i, c) in rest.char_indices() {
            let ws = c.is_whitespace();
            if run_ws != Some(ws) {
                run_ws = Some(ws);
                run_start = i;
            } else if i - run_start >= TOKEN_ESTIMATE_RUN {
                let (piece, tail) = rest.split_at(i);
                rest = tail;
                return Some(piece);
            }
        }
        Some(std::mem::take(&mut rest))
    })
}

/// Estimated input tokens of `messages` for `model`, and how they were counted.
pub fn estimate(messages: &[ChatMessage], model: &str) -> (u64, Method) {
    let how = method(model);
    let total = messages
        .iter()
        .map(|m| {
            let calls: u64 = m
                .tool_calls
                .iter()
                .map(|c| count_text(&c.name, model) + count_text(&c.arguments.to_string(), model))
                .sum();
            let thinking: u64 = m
                .thinking
                .iter()
                .map(|t| count_text(&t.thinking, model))
                .sum();
            MESSAGE_OVERHEAD
                + count_text(&m.content, model)
                + calls
                + thinking
                + m.images.len() as u64 * ToolImage::ESTIMATED_TOKENS
        })
        .sum();
    (total, how)
}

/// [`estimate`] (plus `system`, the system prompt) on tokio's blocking pool: loading a BPE
/// the first time and tokenizing a long new history take long enough that they must not run
/// on an async worker. Falls back to ≈ 4 characters per token if the task fails.
pub async fn estimate_blocking(messages: Vec<ChatMessage>, system: String, model: String) -> u64 {
    let fallback = messages.iter().map(|m| m.content.len()).sum::<usize>() + system.len();
    tokio::task::spawn_blocking(move || estimate(&messages, &model).0 + count_text(&system, &model))
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "token estimate failed; counting characters");
            (fallback as u64).div_ceil(4)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolCall;
    use serde_json::json;

    #[test]
    fn long_runs_are_counted_in_pieces() {
        // An ordinary text is one piece, so its count is the BPE's own.
        let text = "The deploy script lives in scripts/release.sh  and needs a token.\n\n";
        assert_eq!(pieces(text).collect::<Vec<_>>(), vec![text]);
        // A pasted blob: no piece holds a run longer than the bound, nothing is lost.
        let blob = format!("see {} and {}", "z".repeat(100_000), " ".repeat(1_000));
        let cut: Vec<&str> = pieces(&blob).collect();
        assert_eq!(cut.concat(), blob);
        assert!(cut.len() > 100_000 / TOKEN_ESTIMATE_RUN);
        for p in &cut {
            let longest = p
                .split(char::is_whitespace)
                .map(str::len)
                .max()
                .unwrap_or(0);
            assert!(longest <= TOKEN_ESTIMATE_RUN, "a run of {longest} bytes");
        }
        // Multi-byte characters are cut on their boundaries.
        assert_eq!(
            pieces(&"é".repeat(1_000)).collect::<String>(),
            "é".repeat(1_000)
        );
        // A megabyte run of one letter (minutes of BPE whole) is estimated as its pieces:
        // o200k_base counts "zz" as one token.
        let n = count_text(&"z".repeat(1 << 20), "gpt-4o");
        assert!(n.abs_diff(1 << 19) < (1 << 19) / 100, "{n} tokens");
    }

    #[test]
    fn openai_models_use_their_bpe_and_others_chars() {
        assert_eq!(method("gpt-4o-mini"), Method::Bpe("o200k_base"));
        assert_eq!(method("openai/gpt-4.1"), Method::Bpe("o200k_base"));
        assert_eq!(method("gpt-5-mini"), Method::Bpe("o200k_base"));
        assert_eq!(method("gpt-4-0613"), Method::Bpe("cl100k_base"));
        assert_eq!(method("claude-sonnet-4-5"), Method::Chars);
        assert_eq!(method("gemini-2.5-pro"), Method::Chars);
        assert_eq!(method(""), Method::Chars);
        // "hello world" is 2 tokens in o200k_base; 11 characters are 3 by chars/4.
        assert_eq!(count_text("hello world", "gpt-4o"), 2);
        assert_eq!(count_text("hello world", "claude-sonnet-4-5"), 3);
        // Cached: the same answer again.
        assert_eq!(count_text("hello world", "gpt-4o"), 2);
    }

    #[test]
    fn a_history_counts_text_calls_overhead_and_images() {
        let call = ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: json!({"path": "a"}),
        };
        let m = vec![
            ChatMessage::user("hello world"),
            ChatMessage::assistant("", vec![call.clone()]),
            ChatMessage::tool_result(&call, "x", false).with_images(vec![ToolImage {
                mime_type: "image/png".into(),
                data: "AAAA".into(),
            }]),
        ];
        let (n, how) = estimate(&m, "gpt-4o");
        assert_eq!(how, Method::Bpe("o200k_base"));
        let expected = 3 * MESSAGE_OVERHEAD
            + 2
            + count_text("read_file", "gpt-4o")
            + count_text(r#"{"path":"a"}"#, "gpt-4o")
            + count_text("x", "gpt-4o")
            + ToolImage::ESTIMATED_TOKENS;
        assert_eq!(n, expected);
    }

    /// The cost of counting a 100k-token history, cold and then with the per-text cache
    /// (docs/PERFORMANCE.md): `cargo test --release -p snowpea-svc-session --lib
    /// turn::tokens::tests::measure -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement"]
    fn measure_a_100k_token_history() {
        let words = [
            "the",
            "agent",
            "reads",
            "src/main.rs",
            "and",
            "runs",
            "cargo",
            "test",
            "--",
            "-q",
            "fn",
            "main()",
            "{",
            "println!(\"hi\");",
            "}",
            "error[E0308]:",
            "mismatched",
            "types",
        ];
        let mut messages = Vec::new();
        let mut i = 0usize;
        for n in 0..200 {
            let text: Vec<&str> = (0..250)
                .map(|_| {
                    i = (i * 7 + 3) % words.len();
                    words[i]
                })
                .collect();
            let text = format!("{n}: {}", text.join(" "));
            messages.push(if n % 2 == 0 {
                ChatMessage::user(text)
            } else {
                ChatMessage::assistant(text, vec![])
            });
        }
        let model = "gpt-4o";
        let start = std::time::Instant::now();
        count_text("warm up", model);
        let load = start.elapsed();
        let start = std::time::Instant::now();
        let (n, _) = estimate(&messages, model);
        let cold = start.elapsed();
        messages.push(ChatMessage::user("one more question"));
        let start = std::time::Instant::now();
        let (m, _) = estimate(&messages, model);
        let warm = start.elapsed();
        let start = std::time::Instant::now();
        let (c, _) = estimate(&messages, "claude-sonnet-4-5");
        let chars = start.elapsed();
        println!(
            "o200k_base loaded in {load:?}; history of {} messages: {n} tokens; cold {cold:?}; next call (+1 message) {m} tokens in {warm:?}; chars/4 {c} tokens in {chars:?}",
            messages.len() - 1
        );
        assert!(n >= 90_000, "about 100k tokens: {n}");
    }
}
