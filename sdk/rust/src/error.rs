//! Errors a client call can end with, and the JSON-RPC error object (protocol § Error codes).

use serde_json::{json, Map, Value};

/// JSON-RPC `method_not_found` (-32601): the only numeric code that means "no such method".
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC `invalid_params` (-32602).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC `internal` (-32603).
pub const INTERNAL: i64 = -32603;
/// The numeric code of every protocol error that has no more specific one (-32000).
pub const SERVER_ERROR: i64 = -32000;

/// Everything that can go wrong talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The WebSocket could not be opened, the connection closed during `system.hello`, or
    /// `daemon.json` could not be read (the daemon is not reachable).
    #[error("cannot connect to the daemon: {0}")]
    Connect(String),
    /// The daemon answered with a JSON-RPC error (including a refused `system.hello`).
    #[error("{0}")]
    Rpc(RpcError),
    /// No answer arrived within the call's timeout (or no connection came back in time).
    #[error("timed out waiting for the daemon")]
    Timeout,
    /// The connection closed before the answer arrived, or the client was closed. A call that
    /// fails this way may or may not have run on the daemon; retrying is up to the caller.
    #[error("connection to the daemon closed")]
    Closed,
    /// The daemon sent something that breaks the protocol (e.g. a result of the wrong shape).
    #[error("protocol violation: {0}")]
    Protocol(String),
}

impl Error {
    /// The protocol's string error code (`error.data.code`, e.g. `"unauthorized"`) when this is
    /// an [`Error::Rpc`] that carries one.
    pub fn code_str(&self) -> Option<&str> {
        match self {
            Error::Rpc(e) => e.data_code.as_deref(),
            Error::Connect(_) | Error::Timeout | Error::Closed | Error::Protocol(_) => None,
        }
    }

    /// The [`RpcError`] when this is an [`Error::Rpc`].
    pub fn rpc(&self) -> Option<&RpcError> {
        match self {
            Error::Rpc(e) => Some(e),
            Error::Connect(_) | Error::Timeout | Error::Closed | Error::Protocol(_) => None,
        }
    }
}

/// A JSON-RPC error object: what the daemon answers on failure, and what a server→client
/// request handler returns to refuse.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// Numeric JSON-RPC code (`error.code`), e.g. -32601, -32004, -32000.
    pub code: i64,
    /// Human-readable message (`error.message`).
    pub message: String,
    /// The protocol's string code (`error.data.code`), e.g. `"unauthorized"`.
    pub data_code: Option<String>,
    /// The whole `error.data` object as sent (it includes `code` and, when present, `details`).
    /// Boxed, so that an error stays small in every `Result` that may carry one.
    pub data: Option<Box<Value>>,
}

impl RpcError {
    /// An error with a numeric code and message and no `data`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data_code: None,
            data: None,
        }
    }

    /// An error with the protocol's numeric code for `data_code` (per the protocol's mapping:
    /// `method_not_found` -32601, `not_found`/`mcp_not_found` -32004, `invalid_params` -32602,
    /// `internal` -32603, everything else -32000) and `error.data.code` set.
    pub fn with_code(data_code: &str, message: impl Into<String>) -> Self {
        let code = match data_code {
            "method_not_found" => METHOD_NOT_FOUND,
            "not_found" | "mcp_not_found" => -32004,
            "invalid_params" => INVALID_PARAMS,
            "internal" => INTERNAL,
            _ => SERVER_ERROR,
        };
        RpcError {
            code,
            message: message.into(),
            data_code: Some(data_code.to_owned()),
            data: Some(Box::new(json!({ "code": data_code }))),
        }
    }

    /// The `method_not_found` error the client answers a server→client request with when no
    /// handler is registered for `method`.
    pub fn method_not_found(method: &str) -> Self {
        RpcError::with_code("method_not_found", format!("no handler for {method}"))
    }

    /// Parses a JSON-RPC `error` member leniently: a missing code becomes -32603, a missing
    /// message the empty string.
    pub fn from_value(error: &Value) -> Self {
        let code = error
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or(INTERNAL);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let data = error.get("data").filter(|d| !d.is_null()).cloned();
        let data_code = data
            .as_ref()
            .and_then(|d| d.get("code"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        RpcError {
            code,
            message,
            data_code,
            data: data.map(Box::new),
        }
    }

    /// The JSON-RPC `error` member for this error; `data_code` is written into `data.code`.
    pub fn to_value(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), self.code.into());
        error.insert("message".into(), self.message.clone().into());
        let mut data = match self.data.as_deref() {
            Some(Value::Object(m)) => Some(m.clone()),
            Some(other) => Some(Map::from_iter([("details".to_owned(), other.clone())])),
            None => None,
        };
        if let Some(code) = &self.data_code {
            data.get_or_insert_with(Map::new)
                .insert("code".into(), code.clone().into());
        }
        if let Some(data) = data {
            error.insert("data".into(), Value::Object(data));
        }
        Value::Object(error)
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.data_code {
            Some(code) => write!(f, "{code} ({}): {}", self.code, self.message),
            None => write!(f, "error {}: {}", self.code, self.message),
        }
    }
}

impl std::error::Error for RpcError {}
