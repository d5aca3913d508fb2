//! `session/set_mode` ↔ `session.setMode`, and the modes advertised as `availableModes`:
//! the daemon's permission modes `plan`, `accept` and `auto` (ACP mode id = native mode).
//! A change by any client arrives as the native `mode.changed` event and is sent as
//! `current_mode_update` ([`crate::updates`]).

use std::sync::Arc;

use agent_client_protocol::v1::schema::{SetSessionModeRequest, SetSessionModeResponse};
use agent_client_protocol::{Error as AcpError, Responder, V1};
use serde_json::{json, Value};

use crate::state::AcpAgent;
use crate::{errors, Conn};

/// The native permission modes, with their ACP names and descriptions.
pub const MODES: [(&str, &str, &str); 3] = [
    (
        "plan",
        "Plan",
        "Read and plan only: tools that change files or run commands are refused",
    ),
    (
        "accept",
        "Accept edits",
        "File edits run; commands and other risky tools ask first",
    ),
    (
        "auto",
        "Auto",
        "Tools run without asking (the daemon's guards still apply)",
    ),
];

/// The ACP `SessionModeState` wire JSON for a current mode.
pub fn mode_state(current: &str) -> Value {
    let available: Vec<Value> = MODES
        .iter()
        .map(
            |(id, name, description)| json!({ "id": id, "name": name, "description": description }),
        )
        .collect();
    json!({ "currentModeId": current, "availableModes": available })
}

/// `session/set_mode`: `session.setMode {sessionId, mode}`; an unknown mode id is invalid
/// params (checked here, before the call).
pub fn set_mode(
    agent: &Arc<AcpAgent>,
    req: SetSessionModeRequest,
    responder: Responder<SetSessionModeResponse, V1>,
    cx: Conn,
) -> Result<(), AcpError> {
    let agent = agent.clone();
    cx.spawn(async move {
        let answer = async {
            let mode = req.mode_id.to_string();
            if !MODES.iter().any(|(id, _, _)| *id == mode) {
                return Err(errors::invalid_params(format!(
                    "unknown mode {mode:?}; the modes are plan, accept and auto"
                )));
            }
            let client = agent.client()?;
            let session_id = req.session_id.to_string();
            agent.session(&session_id)?;
            client
                .call(
                    "session.setMode",
                    json!({ "sessionId": session_id, "mode": mode }),
                )
                .await
                .map_err(|e| errors::from_native("session.setMode", &e))?;
            errors::from_wire::<SetSessionModeResponse>(json!({}))
        }
        .await;
        let _ = match answer {
            Ok(response) => responder.respond(response),
            Err(e) => responder.respond_with_error(e),
        };
        Ok(())
    })
}
