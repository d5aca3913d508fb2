//! Native SDK errors → ACP JSON-RPC errors, in one place (STYLE.md "Errors").
//!
//! | native | ACP error |
//! |---|---|
//! | `invalid_params` (-32602) | -32602 invalid params, the daemon's message |
//! | `not_found` / `mcp_not_found` (-32004) | -32002 resource not found, the daemon's message |
//! | `method_not_found` (-32601) | -32601 method not found |
//! | any other daemon error | -32603 internal error, message `<code>: <message>` |
//! | connect / closed / timeout | -32603 internal error, "the Snowpea daemon is unreachable: …" |
//!
//! The native `data.code` travels in the ACP error's `data` as `{"snowpeaCode": …}`.

use agent_client_protocol::Error as AcpError;
use serde_json::json;
use snowpea_sdk::Error as NativeError;

/// ACP's "resource not found" code (the schema's `-32002`).
pub const RESOURCE_NOT_FOUND: i32 = -32002;

/// The ACP error for a failed native call of `method`.
pub fn from_native(method: &str, error: &NativeError) -> AcpError {
    match error {
        NativeError::Rpc(rpc) => {
            let code = rpc.data_code.clone().unwrap_or_default();
            let base = match code.as_str() {
                "invalid_params" => AcpError::new(-32602, rpc.message.clone()),
                "not_found" | "mcp_not_found" => {
                    AcpError::new(RESOURCE_NOT_FOUND, rpc.message.clone())
                }
                "method_not_found" => AcpError::new(-32601, format!("{method}: {}", rpc.message)),
                _ => AcpError::new(-32603, format!("{method}: {code}: {}", rpc.message)),
            };
            base.data(json!({ "snowpeaCode": code }))
        }
        NativeError::Connect(_)
        | NativeError::Timeout
        | NativeError::Closed
        | NativeError::Protocol(_) => AcpError::new(
            -32603,
            format!("the Snowpea daemon is unreachable ({method}): {error}"),
        ),
    }
}

/// An ACP invalid-params error with a message.
pub fn invalid_params(message: impl Into<String>) -> AcpError {
    AcpError::new(-32602, message.into())
}

/// The error of a session method called before `initialize` connected to the daemon.
pub fn not_initialized() -> AcpError {
    AcpError::new(
        -32603,
        "call initialize first: it connects to the Snowpea daemon",
    )
}

/// The error for an ACP `sessionId` this process has not opened (`session/new` or
/// `session/load` first).
pub fn unknown_session(id: &str) -> AcpError {
    AcpError::new(
        RESOURCE_NOT_FOUND,
        format!("session {id} is not open here; use session/new or session/load first"),
    )
}

/// Builds an ACP schema value from its JSON wire shape; a shape the schema rejects is an
/// internal error (a bug here, never the client's input).
pub fn from_wire<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, AcpError> {
    serde_json::from_value(value)
        .map_err(|e| AcpError::new(-32603, format!("internal: building an ACP message: {e}")))
}
