//! `initialize` and `authenticate`.
//!
//! `initialize` negotiates ACP protocol version 1 (the only stable one; a client asking for
//! a later version gets 1, as the spec says), connects to the daemon — starting the suite if
//! it is not running — and answers the agent's capabilities: `loadSession`, prompt content
//! (images and embedded context, no audio), MCP over stdio and HTTP/SSE, `session/list`
//! and `session/close`, no auth methods (the daemon token is read from the home). A daemon
//! that cannot be reached is reported here as an ACP internal error with the reason.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    AuthenticateRequest, AuthenticateResponse, InitializeRequest, InitializeResponse,
};
use agent_client_protocol::{Responder, V1};
use serde_json::json;

use crate::state::AcpAgent;
use crate::{errors, Conn};

/// The ACP protocol version this agent speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// `initialize`: connects to the daemon (in a task, so the dispatch loop keeps running) and
/// answers [`InitializeResponse`].
pub fn initialize(
    agent: &Arc<AcpAgent>,
    _req: InitializeRequest,
    responder: Responder<InitializeResponse, V1>,
    cx: Conn,
) -> Result<(), agent_client_protocol::Error> {
    let agent = agent.clone();
    let task_cx = cx.clone();
    cx.spawn(async move {
        let answer = match agent.connect(&task_cx).await {
            Ok(_) => errors::from_wire(capabilities()),
            Err(message) => Err(agent_client_protocol::Error::new(-32603, message)),
        };
        let _ = match answer {
            Ok(response) => responder.respond(response),
            Err(e) => responder.respond_with_error(e),
        };
        Ok(())
    })
}

/// The `initialize` result as it goes on the wire.
pub fn capabilities() -> serde_json::Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": { "image": true, "audio": false, "embeddedContext": true },
            "mcpCapabilities": { "http": true, "sse": true },
            "sessionCapabilities": { "list": {}, "close": {} }
        },
        "authMethods": [],
        "agentInfo": {
            "name": "snowpea",
            "title": "Snowpea",
            "version": env!("CARGO_PKG_VERSION")
        }
    })
}

/// `authenticate`: there is nothing to authenticate (no auth methods are advertised); the
/// call succeeds so a client that calls it anyway can go on.
pub fn authenticate(
    _agent: &Arc<AcpAgent>,
    _req: AuthenticateRequest,
    responder: Responder<AuthenticateResponse, V1>,
    _cx: Conn,
) -> Result<(), agent_client_protocol::Error> {
    responder.respond(errors::from_wire(json!({}))?)
}
