//! What `snowpea cmd` prints: with `--json` exactly one object
//! `{ok, command, data, code?, message?, risk?}` on stdout; without it the command's text on
//! stdout (success) or `snowpea cmd: <CODE>: <message>` on stderr (failure).

use serde_json::{json, Value};
use snowpea_sdk::SessionEvent;

use super::{codes, exit};

/// The outcome of one `snowpea cmd`.
#[derive(Debug, Clone, PartialEq)]
pub struct Result {
    /// Success.
    pub ok: bool,
    /// The command id (`name` or `name.sub`).
    pub command: String,
    /// Structured result (`null` on failure).
    pub data: Value,
    /// Human-readable text.
    pub text: String,
    /// Stable failure code.
    pub code: Option<String>,
    /// Failure message.
    pub message: Option<String>,
    /// Risk tier of the call.
    pub risk: Option<String>,
}

impl Result {
    /// A success.
    pub fn success(command: &str, data: Value, risk: Option<String>) -> Self {
        let text = serde_json::to_string_pretty(&data).unwrap_or_default();
        Result {
            ok: true,
            command: command.to_owned(),
            data,
            text,
            code: None,
            message: None,
            risk,
        }
    }

    /// A failure.
    pub fn failure(command: &str, code: &str, message: String, risk: Option<String>) -> Self {
        Result {
            ok: false,
            command: command.to_owned(),
            data: Value::Null,
            text: String::new(),
            code: Some(code.to_owned()),
            message: Some(message),
            risk,
        }
    }

    /// The `--json` object.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"ok": self.ok, "command": self.command, "data": self.data});
        if let Some(c) = &self.code {
            v["code"] = json!(c);
        }
        if let Some(m) = &self.message {
            v["message"] = json!(m);
        }
        if let Some(r) = &self.risk {
            v["risk"] = json!(r);
        }
        v
    }
}

/// Prints `r` (see the module doc).
pub fn print(r: &Result, json: bool) {
    if json {
        println!("{}", r.to_json());
    } else if r.ok {
        println!("{}", r.text);
    } else {
        eprintln!(
            "snowpea cmd: {}: {}",
            r.code.as_deref().unwrap_or(codes::EXECUTION_FAILED),
            r.message.as_deref().unwrap_or("failed")
        );
    }
}

/// The result of a command turn from its events: the `message.done{role:"system"}` text and
/// `data` on success, the `error` event's `commandCode` and message on failure.
pub fn from_turn(
    command: &str,
    events: &[SessionEvent],
    reason: Option<&str>,
    risk: String,
) -> (Result, i32) {
    let mut text = Vec::new();
    let mut data = Value::Null;
    let mut error: Option<(String, String)> = None;
    for e in events {
        match e.kind.as_str() {
            "message.done" => {
                let role = e.payload.get("role").and_then(Value::as_str);
                if role == Some("system") || role == Some("assistant") {
                    if let Some(t) = e.payload.get("text").and_then(Value::as_str) {
                        if !t.is_empty() {
                            text.push(t.to_owned());
                        }
                    }
                }
                if let Some(d) = e.payload.get("data") {
                    data = d.clone();
                }
            }
            "error" => {
                let code = e
                    .payload
                    .get("commandCode")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| {
                        match e.payload.get("code").and_then(Value::as_str) {
                            Some("invalid_params") => codes::INVALID_ARGS,
                            Some("not_found") => codes::NOT_FOUND,
                            Some("not_implemented") => codes::NOT_CONFIGURED,
                            _ => codes::EXECUTION_FAILED,
                        }
                        .to_owned()
                    });
                let msg = e
                    .payload
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                error.get_or_insert((code, msg));
            }
            _ => {}
        }
    }
    match (reason, error) {
        (Some("complete"), None) => {
            let r = Result {
                ok: true,
                command: command.to_owned(),
                data,
                text: text.join("\n"),
                code: None,
                message: None,
                risk: Some(risk),
            };
            (r, exit::OK)
        }
        (_, Some((code, msg))) => (
            Result::failure(command, &code, msg, Some(risk)),
            exit::FAILURE,
        ),
        (reason, None) => (
            Result::failure(
                command,
                codes::EXECUTION_FAILED,
                format!("the command ended {}", reason.unwrap_or("without a reason")),
                Some(risk),
            ),
            exit::FAILURE,
        ),
    }
}
