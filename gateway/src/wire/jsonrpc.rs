//! JSON-RPC 2.0 framing (DESIGN.md §4 "JSON-RPC 2.0 exactly"): a WebSocket message is
//! one request, notification or response object, or a batch array of them. This module
//! only classifies what arrived and builds answer objects; it knows no methods.
//!
//! * malformed JSON → `-32700` with `id: null`;
//! * not an object, `jsonrpc` other than `"2.0"`, a non-string `method`, an `id` that is
//!   not a string/number/null, an empty batch → `-32600`;
//! * an object without `id` is a notification: it is never answered;
//! * an object without `method` but with `result`/`error` answers a server→client request;
//! * more than [`JSON_VALUES`] values in one message, or more than [`BATCH_MEMBERS`]
//!   members in a batch → `-32600` (issue 40: counted before any tree is built,
//!   [`super::json_budget`]).
//!
//! The two framing errors carry no `error.data`: they are JSON-RPC's own, not protocol
//! error codes.

use serde_json::{json, Map, Value};
use snowpea_proto::limits::{BATCH_MEMBERS, JSON_VALUES};

use super::json_budget;

/// JSON-RPC parse error.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC invalid request.
pub const INVALID_REQUEST: i64 = -32600;

/// A request or notification from the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The request id; `None` for a notification (no answer).
    pub id: Option<Value>,
    /// Method name.
    pub method: String,
    /// `params` as sent (`null` when absent).
    pub params: Value,
}

/// One member of what a client sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A request or notification.
    Call(Call),
    /// The client's answer to a server→client request.
    Response {
        /// The id the gateway gave the request.
        id: Value,
        /// `Ok(result)` or `Err(error object)`.
        outcome: Result<Value, Value>,
    },
    /// Not a valid request; answered with this error response.
    Invalid(Value),
}

/// What one WebSocket message held.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A single object.
    Single(Item),
    /// A non-empty batch array.
    Batch(Vec<Item>),
    /// Unparseable or an empty batch: answer with this error response.
    Rejected(Value),
}

/// Classifies one WebSocket message.
pub fn parse(bytes: &[u8]) -> Incoming {
    if let Some(over) = json_budget::over_budget(bytes, JSON_VALUES) {
        return Incoming::Rejected(framing_error(
            &over.id,
            INVALID_REQUEST,
            format!("invalid request: more than {JSON_VALUES} JSON values in one message"),
        ));
    }
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Rejected(framing_error(
                &Value::Null,
                PARSE_ERROR,
                format!("parse error: {e}"),
            ))
        }
    };
    match value {
        Value::Array(items) if items.is_empty() => Incoming::Rejected(framing_error(
            &Value::Null,
            INVALID_REQUEST,
            "invalid request: empty batch".into(),
        )),
        Value::Array(items) if items.len() > BATCH_MEMBERS => Incoming::Rejected(framing_error(
            &Value::Null,
            INVALID_REQUEST,
            format!("invalid request: a batch holds at most {BATCH_MEMBERS} members"),
        )),
        Value::Array(items) => Incoming::Batch(items.into_iter().map(classify).collect()),
        other => Incoming::Single(classify(other)),
    }
}

/// A string, null, a 64-bit integer, or another number small enough to come back exactly
/// (magnitude below 2^53). A larger non-64-bit number (`123456789012345678901234567890`,
/// `1e30`) is refused: it would be parsed as a float and echoed as a different number, and
/// the client could not match the answer to its request.
fn valid_id(id: &Value) -> bool {
    match id {
        Value::String(_) | Value::Null => true,
        Value::Number(n) => {
            n.is_i64()
                || n.is_u64()
                || n.as_f64()
                    .is_some_and(|f| f.abs() < 9_007_199_254_740_992.0)
        }
        _ => false,
    }
}

/// Classifies one batch member (or the single object).
pub fn classify(value: Value) -> Item {
    let Value::Object(mut obj) = value else {
        return invalid(&Value::Null, "a request must be a JSON object");
    };
    let id = obj.remove("id");
    if let Some(id) = &id {
        if !valid_id(id) {
            return invalid(
                &Value::Null,
                "\"id\" must be a string, a number that fits 64 bits, or null",
            );
        }
    }
    let reply_id = id.clone().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(&reply_id, "\"jsonrpc\" must be \"2.0\"");
    }
    match obj.remove("method") {
        Some(Value::String(method)) => {
            let params = obj.remove("params").unwrap_or(Value::Null);
            Item::Call(Call { id, method, params })
        }
        Some(_) => invalid(&reply_id, "\"method\" must be a string"),
        None => response(id, obj),
    }
}

fn response(id: Option<Value>, mut obj: Map<String, Value>) -> Item {
    let Some(id) = id else {
        return invalid(&Value::Null, "a request needs a \"method\"");
    };
    match (obj.remove("result"), obj.remove("error")) {
        (Some(result), None) => Item::Response {
            id,
            outcome: Ok(result),
        },
        (None, Some(error)) if error.is_object() => Item::Response {
            id,
            outcome: Err(error),
        },
        _ => invalid(&id, "a request needs a \"method\""),
    }
}

fn invalid(id: &Value, message: &str) -> Item {
    Item::Invalid(framing_error(
        id,
        INVALID_REQUEST,
        format!("invalid request: {message}"),
    ))
}

/// A framing error response (`-32700`/`-32600`), without `error.data`.
pub fn framing_error(id: &Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A success response.
pub fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response with a protocol error object (`RpcError::to_jsonrpc()`).
pub fn error(id: Value, error: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// A request the gateway sends to the client; `params_json` is already JSON text.
pub fn server_request(id: &str, method: &str, params_json: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":{},\"params\":{}}}",
        Value::from(id),
        Value::from(method),
        if params_json.is_empty() {
            "{}"
        } else {
            params_json
        }
    )
}

/// A notification the gateway sends to the client; `params_json` is already JSON text.
pub fn notification(method: &str, params_json: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":{},\"params\":{}}}",
        Value::from(method),
        if params_json.is_empty() {
            "{}"
        } else {
            params_json
        }
    )
}

/// True when `text` is one JSON value (empty counts as `{}`): what a service hands the
/// gateway as ready-made params text is checked before it goes into a frame.
pub fn is_json(text: &str) -> bool {
    text.is_empty() || serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

#[cfg(test)]
#[path = "jsonrpc_tests.rs"]
mod tests;
