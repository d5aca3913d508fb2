//! `/usage` (read): the session's token use, summed from its `usage` events, and its
//! context fill as the last `context` event reported it.

use serde_json::{json, Value};

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/usage`.
pub struct Usage;

impl Builtin for Usage {
    fn name(&self) -> &'static str {
        "usage"
    }
    fn summary(&self) -> &'static str {
        "Show this session's token use and context fill"
    }
    fn usage(&self) -> &'static str {
        "/usage"
    }
    fn risk(&self) -> Risk {
        Risk::Read
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let rows = cx
                .log
                .of_kinds(&call.session.id, &["usage"])
                .await
                .map_err(Failure::from_error)?;
            let (mut input, mut output, mut cached, mut calls) = (0i64, 0i64, 0i64, 0i64);
            for (_, p) in &rows {
                let n = |k: &str| p.get(k).and_then(Value::as_i64).unwrap_or(0);
                input += n("inputTokens");
                output += n("outputTokens");
                cached += n("cachedInputTokens");
                calls += 1;
            }
            let r = call.session.row();
            let text = format!(
                "model calls: {calls} · input tokens: {input} (cached {cached}) · output tokens: {output} · context: {}{}",
                r.context_used,
                r.context_window.map(|w| format!(" / {w}")).unwrap_or_default()
            );
            Ok(Reply::done(
                text,
                json!({
                    "calls": calls,
                    "inputTokens": input,
                    "outputTokens": output,
                    "cachedInputTokens": cached,
                    "contextUsed": r.context_used,
                    "contextWindow": r.context_window,
                }),
            ))
        })
    }
}
