//! `snowpea_session_history{sessionId, afterSeq?}` → `session.resume {sessionId, afterSeq}`:
//! a session's transcript as text ([`crate::transcript`]), one line per prompt, answer, tool
//! call and result, each starting with its `[seq]`.
//!
//! Structured: `{sessionId, lastSeq, transcript}`; `lastSeq` is the `afterSeq` that reads
//! only what comes next.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use snowpea_sdk::SessionEvent;

use super::{definition as def, native, ToolError, ToolOutput};
use crate::args::Args;
use crate::server::State;

/// The tool's name.
pub const NAME: &str = "snowpea_session_history";

/// The tool's definition.
pub fn definition() -> Value {
    def(
        NAME,
        "Read a Snowpea session's transcript",
        "Read the transcript of a Snowpea session as text: the user's prompts, the agent's \
         answers, the tools it ran with their results, files it changed and how each turn \
         ended. Each line starts with the event's [seq]; pass the last seq you read as \
         afterSeq to read only what came after it.",
        json!({
            "type": "object",
            "properties": {
                "sessionId": {
                    "type": "string",
                    "description": "The session to read (from snowpea_sessions or snowpea_prompt)."
                },
                "afterSeq": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Only events after this seq. Default 0 (the whole session)."
                }
            },
            "required": ["sessionId"],
            "additionalProperties": false
        }),
        true,
    )
}

/// The events of a session after `after_seq` (`session.resume`).
pub async fn events(
    client: &snowpea_sdk::Client,
    session_id: &str,
    after_seq: u64,
) -> Result<Vec<SessionEvent>, snowpea_sdk::Error> {
    let result = client
        .call(
            "session.resume",
            json!({ "sessionId": session_id, "afterSeq": after_seq }),
        )
        .await?;
    Ok(result
        .get("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(SessionEvent::from_value)
        .collect())
}

/// Runs the tool.
pub async fn call(state: &Arc<State>, args: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let args = Args::new(args, &["sessionId", "afterSeq"])?;
    let session_id = args.str("sessionId")?;
    let after_seq = args.opt_u64("afterSeq")?.unwrap_or(0);
    let client = state.reader().await.map_err(ToolError::Daemon)?;
    let events = events(&client, session_id, after_seq)
        .await
        .map_err(native("session.resume"))?;
    let last_seq = events.last().map_or(after_seq, |e| e.seq);
    let transcript = crate::transcript::render(&events);
    let text = if transcript.is_empty() {
        format!("No events after seq {after_seq}.")
    } else {
        transcript.clone()
    };
    Ok(ToolOutput::ok(
        text,
        json!({ "sessionId": session_id, "lastSeq": last_seq, "transcript": transcript }),
    ))
}
