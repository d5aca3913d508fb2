//! The scripted provider, selected by `SNOWPEA_PROVIDER=fake:<script.json>` (issue 2
//! "Providers"). It lets tests and demos drive whole turns — text, reasoning, tool calls,
//! delays and provider errors — without a model.
//!
//! Script format:
//!
//! ```json
//! {
//!   "steps": [
//!     {"match": "write a file", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]},
//!     {"after_tool": "write_file", "text": "Done.", "reasoning": "The file exists now."},
//!     {"match": "slow", "delaySec": 0.5, "text": "…finally", "repeat": true},
//!     {"match": "fail", "error": {"status": 500, "message": "boom"}}
//!   ],
//!   "default": {"text": "I have nothing scripted for that."}
//! }
//! ```
//!
//! Matching rules, for each call, over the steps in order (the first unused match wins):
//! * `match` — case-insensitive substring of the last user message; a step with only
//!   `match` is considered only when the last message is **not** a tool result;
//! * `after_tool` — the conversation ends with tool results and one of them (the trailing
//!   block of tool messages, so parallel calls work) is of that tool; when a step has both
//!   `after_tool` and `match`, `match` is checked against the last user message before the
//!   tool results;
//! * neither — matches anything.
//!
//! The step is chosen (and consumed) when [`Provider::stream`] is called, not when the
//! stream is first polled. A step is used once unless `repeat` is true. Consumption state belongs to the provider
//! instance (shared by every session that uses it; [`super::select::select_provider`] keeps one
//! instance per script path). With no matching step the `default` reply is used (it is
//! never consumed); without a `default` the text is `(no scripted reply)`.
//!
//! Step fields: `text`, `reasoning` (streamed as reasoning deltas before the text),
//! `tool_calls: [{name, arguments}]` (`arguments` an object or a JSON string; ids are
//! `call_<n>`, counting per provider instance), `delaySec` (seconds, fractional allowed,
//! slept before streaming; dropping the stream cancels the sleep), `stopReason` (default
//! `tool_calls` when there are tool calls, else `stop`), `error: {status, message}` (the
//! call fails with [`ProviderError::Http`]). camelCase and snake_case spellings of
//! `after_tool`/`afterTool`, `tool_calls`/`toolCalls`, `delaySec`/`delay_sec`,
//! `stopReason`/`stop_reason` are both accepted. Usage is estimated at ≈ 4 characters per
//! token of input and output.
//!
//! What the model was given is observable two ways, so tests can check that tool results
//! (images included) reach it: `describeImages: true` (or `describe_images`) on a step
//! appends one line per image of the trailing tool results to its text,
//! `[image <mime type>, <n> base64 characters, from <tool>]` (`[no images]` when there are
//! none); `echoRequest: true` appends `[model <model> effort <effort or none>]` and one
//! `[user] <text>` line per user message of the request (each message's lines joined with
//! ` / `, then `[image <mime>, <n> base64 characters]` per attached image), so suite tests
//! can see steered prompts, notices, summaries, attachments and the routed model;
//! `echoToolResults: true` appends one `[tool <name> ok|error] <content>` line per trailing
//! tool result (lines joined with ` / `) and `echoTools: true` one `[tools] <names>` line of
//! the tools offered (issue 21: host tool results and deferred tools reaching the model);
//! `echoSystem: true` one `[system] <headings>` line of the system prompt's `# ` headings
//! (joined with ` | `: the persona, delegation mode and other layers reaching the model);
//! and [`FakeProvider::received`] returns the last [`RECEIVED_KEEP`] requests.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::http::{estimate_tokens, request_chars};
use super::interface::{
    EventStream, ModelRequest, Provider, ProviderError, Role, StreamEvent, ToolCall, Usage,
};

/// Text used when nothing matches and the script has no `default`.
pub const NO_SCRIPTED_REPLY: &str = "(no scripted reply)";

/// How many of the latest requests [`FakeProvider::received`] keeps.
pub const RECEIVED_KEEP: usize = 16;

/// A scripted tool call.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    /// Tool name.
    pub name: String,
    /// Arguments: an object, or a string holding JSON.
    #[serde(default)]
    pub arguments: Value,
}

/// A scripted provider error.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ScriptError {
    /// HTTP status to report.
    #[serde(default = "default_error_status")]
    pub status: u16,
    /// Error message.
    #[serde(default)]
    pub message: String,
}

fn default_error_status() -> u16 {
    500
}

/// One step of a script (also the shape of `default`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptStep {
    /// Case-insensitive substring of the last user message.
    #[serde(default, rename = "match")]
    pub match_text: Option<String>,
    /// Name of the tool whose result the conversation ends with.
    #[serde(default, alias = "afterTool")]
    pub after_tool: Option<String>,
    /// Answer text.
    #[serde(default)]
    pub text: Option<String>,
    /// Reasoning text streamed before the answer.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Tool calls to make.
    #[serde(default, alias = "toolCalls")]
    pub tool_calls: Vec<ScriptToolCall>,
    /// The step may be used any number of times.
    #[serde(default)]
    pub repeat: bool,
    /// Seconds to wait before streaming.
    #[serde(default, rename = "delaySec", alias = "delay_sec")]
    pub delay_sec: Option<f64>,
    /// Stop reason to report.
    #[serde(default, rename = "stopReason", alias = "stop_reason")]
    pub stop_reason: Option<String>,
    /// Fail the call with this error.
    #[serde(default)]
    pub error: Option<ScriptError>,
    /// Append a line per image of the trailing tool results to the text (module doc).
    #[serde(default, rename = "describeImages", alias = "describe_images")]
    pub describe_images: bool,
    /// Append what the call was given: `[model <m> effort <e>]` and one `[user] …` line per
    /// user message (module doc).
    #[serde(default, rename = "echoRequest", alias = "echo_request")]
    pub echo_request: bool,
    /// Append one line per trailing tool result (module doc).
    #[serde(default, rename = "echoToolResults", alias = "echo_tool_results")]
    pub echo_tool_results: bool,
    /// Append the names of the tools offered (module doc).
    #[serde(default, rename = "echoTools", alias = "echo_tools")]
    pub echo_tools: bool,
    /// Append the `# ` headings of the system prompt (module doc).
    #[serde(default, rename = "echoSystem", alias = "echo_system")]
    pub echo_system: bool,
    /// llama.cpp timings reported with the call's usage, as a llama.cpp server sends them
    /// (`usage.timings`, capability `llmTimings`); only [`crate::provider::interface::TIMINGS_KEYS`]
    /// are kept.
    #[serde(default)]
    pub timings: Option<std::collections::BTreeMap<String, f64>>,
}

/// A whole script.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Steps, tried in order.
    #[serde(default)]
    pub steps: Vec<ScriptStep>,
    /// Reply when no step matches.
    #[serde(default)]
    pub default: Option<ScriptStep>,
}

/// The scripted provider.
pub struct FakeProvider {
    source: String,
    script: Script,
    used: Mutex<Vec<bool>>,
    next_call: AtomicU64,
    received: Mutex<VecDeque<ModelRequest>>,
}

impl std::fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeProvider")
            .field("source", &self.source)
            .field("steps", &self.script.steps.len())
            .finish()
    }
}

impl FakeProvider {
    /// Loads a script file. Unreadable or malformed files give [`ProviderError::Config`]
    /// naming the path.
    pub fn from_path(path: &Path) -> Result<Self, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ProviderError::Config(format!(
                "cannot read fake provider script {}: {e}",
                path.display()
            ))
        })?;
        let script: Script = serde_json::from_str(&text).map_err(|e| {
            ProviderError::Config(format!(
                "malformed fake provider script {}: {e}",
                path.display()
            ))
        })?;
        Self::validate(&script).map_err(|e| {
            ProviderError::Config(format!(
                "invalid fake provider script {}: {e}",
                path.display()
            ))
        })?;
        Ok(Self::with_source(script, path.display().to_string()))
    }

    /// A provider over an in-memory script.
    pub fn from_script(script: Script) -> Result<Self, ProviderError> {
        Self::validate(&script)
            .map_err(|e| ProviderError::Config(format!("invalid fake provider script: {e}")))?;
        Ok(Self::with_source(script, "<inline>".to_string()))
    }

    fn with_source(script: Script, source: String) -> Self {
        let used = Mutex::new(vec![false; script.steps.len()]);
        FakeProvider {
            source,
            script,
            used,
            next_call: AtomicU64::new(1),
            received: Mutex::new(VecDeque::new()),
        }
    }

    fn validate(script: &Script) -> Result<(), String> {
        for (i, step) in script.steps.iter().chain(script.default.iter()).enumerate() {
            if let Some(d) = step.delay_sec {
                if !d.is_finite() || d < 0.0 {
                    return Err(format!("step {i}: delaySec must be a non-negative number"));
                }
            }
            for call in &step.tool_calls {
                arguments_of(call)
                    .map_err(|e| format!("step {i}: tool call {}: {e}", call.name))?;
            }
        }
        Ok(())
    }

    /// The latest requests (at most [`RECEIVED_KEEP`]), oldest first: what the "model" was
    /// given, tool results and their images included.
    pub fn received(&self) -> Vec<ModelRequest> {
        let r = self.received.lock().unwrap_or_else(|e| e.into_inner());
        r.iter().cloned().collect()
    }

    fn record(&self, request: &ModelRequest) {
        let mut r = self.received.lock().unwrap_or_else(|e| e.into_inner());
        if r.len() == RECEIVED_KEEP {
            r.pop_front();
        }
        r.push_back(request.clone());
    }

    /// Picks (and consumes, unless `repeat`) the step for this conversation.
    fn pick(&self, request: &ModelRequest) -> ScriptStep {
        let msgs = &request.messages;
        let trailing_tools: Vec<&str> = msgs
            .iter()
            .rev()
            .take_while(|m| m.role == Role::Tool)
            .map(|m| m.tool_name.as_deref().unwrap_or(""))
            .collect();
        let ends_with_tool = !trailing_tools.is_empty();
        let last_user = msgs
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.to_lowercase())
            .unwrap_or_default();

        let matches = |step: &ScriptStep| -> bool {
            match (&step.match_text, &step.after_tool) {
                (None, None) => true,
                (Some(m), None) => !ends_with_tool && last_user.contains(&m.to_lowercase()),
                (None, Some(t)) => trailing_tools.contains(&t.as_str()),
                (Some(m), Some(t)) => {
                    trailing_tools.contains(&t.as_str()) && last_user.contains(&m.to_lowercase())
                }
            }
        };

        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        for (i, step) in self.script.steps.iter().enumerate() {
            if used[i] || !matches(step) {
                continue;
            }
            if !step.repeat {
                used[i] = true;
            }
            return step.clone();
        }
        self.script.default.clone().unwrap_or_else(|| ScriptStep {
            text: Some(NO_SCRIPTED_REPLY.to_string()),
            ..Default::default()
        })
    }
}

fn arguments_of(call: &ScriptToolCall) -> Result<Value, String> {
    match &call.arguments {
        Value::Null => Ok(Value::Object(Default::default())),
        Value::Object(_) => Ok(call.arguments.clone()),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err("arguments string is not a JSON object".to_string()),
        },
        _ => Err("arguments must be an object".to_string()),
    }
}

/// The `describeImages` lines for the images of the trailing tool results of `request`.
fn describe_images(request: &ModelRequest) -> String {
    let mut tools: Vec<&super::interface::ChatMessage> = request
        .messages
        .iter()
        .rev()
        .take_while(|m| m.role == Role::Tool)
        .collect();
    tools.reverse();
    let lines: Vec<String> = tools
        .iter()
        .flat_map(|m| {
            m.images.iter().map(|i| {
                format!(
                    "[image {}, {} base64 characters, from {}]",
                    i.mime_type,
                    i.data.len(),
                    m.tool_name.as_deref().unwrap_or_default()
                )
            })
        })
        .collect();
    if lines.is_empty() {
        "[no images]".to_string()
    } else {
        lines.join("\n")
    }
}

/// The `echoToolResults` lines of `request`.
fn echo_tool_results(request: &ModelRequest) -> String {
    let mut tools: Vec<&super::interface::ChatMessage> = request
        .messages
        .iter()
        .rev()
        .take_while(|m| m.role == Role::Tool)
        .collect();
    tools.reverse();
    tools
        .iter()
        .map(|m| {
            format!(
                "[tool {} {}] {}",
                m.tool_name.as_deref().unwrap_or_default(),
                if m.is_error { "error" } else { "ok" },
                m.content.lines().collect::<Vec<_>>().join(" / ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `echoRequest` lines of `request`.
fn echo_request(request: &ModelRequest) -> String {
    let mut lines = vec![format!(
        "[model {} effort {}]",
        request.model,
        request.effort.as_deref().unwrap_or("none")
    )];
    lines.extend(
        request
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| {
                let mut line = format!(
                    "[user] {}",
                    m.content.lines().collect::<Vec<_>>().join(" / ")
                );
                for i in &m.images {
                    line.push_str(&format!(
                        " [image {}, {} base64 characters]",
                        i.mime_type,
                        i.data.len()
                    ));
                }
                line
            }),
    );
    lines.join("\n")
}

/// Splits text into word-sized deltas (each word keeps the whitespace after it), so
/// clients see several `message.delta`s; words longer than 16 characters are cut.
pub fn split_deltas(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_ws = false;
    for ch in text.chars() {
        let ws = ch.is_whitespace();
        if !ws && (prev_ws || cur.chars().count() >= 16) {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(ch);
        prev_ws = ws;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl Provider for FakeProvider {
    fn vendor(&self) -> &str {
        "fake"
    }

    fn default_model(&self) -> &str {
        "fake"
    }

    fn stream(&self, request: ModelRequest) -> EventStream {
        self.record(&request);
        let mut step = self.pick(&request);
        if step.describe_images {
            let lines = describe_images(&request);
            step.text = Some(match step.text.take().filter(|t| !t.is_empty()) {
                Some(t) => format!("{t}\n{lines}"),
                None => lines,
            });
        }
        for (on, lines) in [
            (step.echo_tool_results, echo_tool_results(&request)),
            (
                step.echo_tools,
                format!(
                    "[tools] {}",
                    request
                        .tools
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            (
                step.echo_system,
                format!(
                    "[system] {}",
                    request
                        .system
                        .lines()
                        .filter_map(|l| l.strip_prefix("# "))
                        .collect::<Vec<_>>()
                        .join(" | ")
                ),
            ),
        ] {
            if on {
                step.text = Some(match step.text.take().filter(|t| !t.is_empty()) {
                    Some(t) => format!("{t}\n{lines}"),
                    None => lines,
                });
            }
        }
        if step.echo_request {
            let lines = echo_request(&request);
            step.text = Some(match step.text.take().filter(|t| !t.is_empty()) {
                Some(t) => format!("{t}\n{lines}"),
                None => lines,
            });
        }
        let input_chars = request_chars(&request);
        // Ids are assigned now so they follow call order even if streams are polled late.
        let calls: Vec<ToolCall> = step
            .tool_calls
            .iter()
            .map(|c| ToolCall {
                id: format!("call_{}", self.next_call.fetch_add(1, Ordering::Relaxed)),
                name: c.name.clone(),
                arguments: arguments_of(c).unwrap_or_default(),
            })
            .collect();
        Box::pin(async_stream::stream! {
            if let Some(delay) = step.delay_sec.filter(|d| *d > 0.0) {
                tokio::time::sleep(Duration::from_secs_f64(delay)).await;
            }
            if let Some(err) = &step.error {
                yield Err(ProviderError::Http { vendor: "fake".into(), status: err.status, message: err.message.clone() });
                return;
            }
            let mut output_chars = 0usize;
            if let Some(reasoning) = step.reasoning.as_deref().filter(|r| !r.is_empty()) {
                output_chars += reasoning.chars().count();
                for d in split_deltas(reasoning) {
                    yield Ok(StreamEvent::ReasoningDelta(d));
                }
            }
            if let Some(text) = step.text.as_deref().filter(|t| !t.is_empty()) {
                output_chars += text.chars().count();
                for d in split_deltas(text) {
                    yield Ok(StreamEvent::TextDelta(d));
                }
            }
            for call in &calls {
                output_chars += call.name.len() + call.arguments.to_string().len();
                yield Ok(StreamEvent::ToolCall(call.clone()));
            }
            yield Ok(StreamEvent::Usage(Usage {
                input_tokens: estimate_tokens(input_chars),
                output_tokens: estimate_tokens(output_chars),
                cached_tokens: 0,
                timings: step.timings.clone().map(|mut t| {
                    t.retain(|k, _| crate::provider::interface::TIMINGS_KEYS.contains(&k.as_str()));
                    t
                }),
            }));
            let stop_reason = step
                .stop_reason
                .clone()
                .map(|s| s.to_lowercase())
                .unwrap_or_else(|| if calls.is_empty() { "stop".into() } else { "tool_calls".into() });
            yield Ok(StreamEvent::Done { stop_reason });
        })
    }
}

/// Path of a `fake:<path>` provider spec, if `spec` is one.
pub fn fake_script_path(spec: &str) -> Option<PathBuf> {
    spec.trim()
        .strip_prefix("fake:")
        .map(|p| PathBuf::from(p.trim()))
        .filter(|p| !p.as_os_str().is_empty())
}

#[cfg(test)]
#[path = "fake_tests.rs"]
mod tests;
