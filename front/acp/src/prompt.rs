//! `session/prompt` → `session.prompt`, and `session/cancel` → `session.interrupt`.
//!
//! Content blocks become the native prompt:
//! * `text` → the prompt text (a leading `/` runs a slash command, as natively);
//! * `resource_link` with a `file://` URI → an `@<path>` reference appended to the text;
//!   other URIs → a `[name](uri)` line;
//! * `resource` (embedded) → an attachment: text resources `{kind: text, name, text}`,
//!   blobs `{kind: file, name, data, mimeType}`;
//! * `image` → an attachment `{kind: image, data, mimeType}`;
//! * `audio` → invalid params (not advertised).
//!
//! The answer waits for the turn's `turn.done` (seen by the session's forwarder, so every
//! update of the turn is sent first) and maps its reason ([`crate::stop_reason`]).

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, EmbeddedResourceResource, PromptRequest, PromptResponse,
};
use agent_client_protocol::{Error as AcpError, Responder, V1};
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::state::{lock, AcpAgent};
use crate::stop_reason::{outcome, Outcome};
use crate::{errors, Conn};

/// Longest a prompt waits for its turn to end (a turn has its own, shorter, timeout in the
/// daemon; this only keeps the wait bounded).
pub const TURN_WAIT: Duration = Duration::from_secs(6 * 3600);

/// How long a cancelled prompt waits for `turn.done` before answering `cancelled` anyway.
pub const CANCEL_GRACE: Duration = Duration::from_secs(15);

/// Most content blocks in one prompt.
pub const MAX_BLOCKS: usize = 256;

/// The native `session.prompt` params (`text`, `attachments`) for ACP content blocks.
pub fn native_prompt(blocks: &[ContentBlock]) -> Result<(String, Vec<Value>), AcpError> {
    if blocks.len() > MAX_BLOCKS {
        return Err(errors::invalid_params(format!(
            "a prompt has at most {MAX_BLOCKS} content blocks"
        )));
    }
    let mut text = String::new();
    let mut attachments = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&t.text);
            }
            ContentBlock::ResourceLink(link) => match link.uri.strip_prefix("file://") {
                Some(path) => text.push_str(&format!(" @{path}")),
                None => text.push_str(&format!("\n[{}]({})", link.name, link.uri)),
            },
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(r) => attachments.push(json!({
                    "kind": "text",
                    "name": name_of(&r.uri),
                    "path": r.uri.strip_prefix("file://"),
                    "text": r.text,
                    "mimeType": r.mime_type,
                })),
                EmbeddedResourceResource::BlobResourceContents(r) => attachments.push(json!({
                    "kind": "file",
                    "name": name_of(&r.uri),
                    "data": r.blob,
                    "mimeType": r.mime_type,
                })),
                _ => return Err(errors::invalid_params("unsupported embedded resource")),
            },
            ContentBlock::Image(image) => attachments.push(json!({
                "kind": "image",
                "data": image.data,
                "mimeType": image.mime_type,
                "name": image.uri.as_deref().map(name_of),
            })),
            ContentBlock::Audio(_) => {
                return Err(errors::invalid_params(
                    "audio prompts are not supported (promptCapabilities.audio is false)",
                ))
            }
            _ => return Err(errors::invalid_params("unsupported content block")),
        }
    }
    if text.trim().is_empty() && attachments.is_empty() {
        return Err(errors::invalid_params("the prompt is empty"));
    }
    Ok((text, attachments))
}

fn name_of(uri: &str) -> String {
    uri.rsplit('/').next().unwrap_or(uri).to_owned()
}

/// `session/prompt`: sends the prompt and answers when its turn ends.
pub fn prompt(
    agent: &Arc<AcpAgent>,
    req: PromptRequest,
    responder: Responder<PromptResponse, V1>,
    cx: Conn,
) -> Result<(), AcpError> {
    let agent = agent.clone();
    cx.spawn(async move {
        let answer = run_prompt(&agent, req).await;
        let _ = match answer {
            Ok(response) => responder.respond(response),
            Err(e) => responder.respond_with_error(e),
        };
        Ok(())
    })
}

async fn run_prompt(agent: &Arc<AcpAgent>, req: PromptRequest) -> Result<PromptResponse, AcpError> {
    let client = agent.client()?;
    let session_id = req.session_id.to_string();
    let link = agent.session(&session_id)?;
    let (text, attachments) = native_prompt(&req.prompt)?;
    let mut turns = link.turns.subscribe();
    let mut cancel = link.cancel.subscribe();
    cancel.mark_unchanged();
    lock(&link.own_prompts).push_back(text.clone());
    let mut params = json!({ "sessionId": session_id, "text": text });
    if !attachments.is_empty() {
        params["attachments"] = Value::Array(attachments);
    }
    let result = client.call("session.prompt", params).await;
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            let mut own = lock(&link.own_prompts);
            if let Some(i) = own.iter().position(|t| *t == text) {
                own.remove(i);
            }
            return Err(errors::from_native("session.prompt", &e));
        }
    };
    let turn_id = result
        .get("turnId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let deadline = tokio::time::Instant::now() + TURN_WAIT;
    let mut cancelled = false;
    loop {
        let wait_until = if cancelled {
            deadline.min(tokio::time::Instant::now() + CANCEL_GRACE)
        } else {
            deadline
        };
        tokio::select! {
            end = turns.recv() => match end {
                Ok(end) if end.turn_id == turn_id => {
                    return match outcome(&end, cancelled) {
                        Outcome::Stop(reason) => errors::from_wire(json!({ "stopReason": reason })),
                        Outcome::Error(message) => Err(AcpError::new(-32603, message)),
                    };
                }
                Ok(_) | Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => {
                    return Err(AcpError::new(-32603, "the session was closed during the turn"));
                }
            },
            changed = cancel.changed(), if !cancelled => {
                if changed.is_err() {
                    return Err(AcpError::new(-32603, "the session was closed during the turn"));
                }
                cancelled = true;
            }
            _ = tokio::time::sleep_until(wait_until) => {
                if cancelled {
                    return errors::from_wire(json!({ "stopReason": "cancelled" }));
                }
                return Err(AcpError::new(-32603, "the turn did not end in time"));
            }
        }
    }
}

/// `session/cancel`: bumps the session's cancel epoch (pending permission requests answer
/// cancelled, the pending prompt will answer `cancelled`) and sends `session.interrupt`.
pub fn cancel(
    agent: &Arc<AcpAgent>,
    notification: CancelNotification,
    cx: Conn,
) -> Result<(), AcpError> {
    let Some(link) = agent.find(&notification.session_id.to_string()) else {
        return Ok(());
    };
    link.cancel.send_modify(|epoch| *epoch += 1);
    let Ok(client) = agent.client() else {
        return Ok(());
    };
    cx.spawn(async move {
        if let Err(error) = client
            .call("session.interrupt", json!({ "sessionId": link.id }))
            .await
        {
            tracing::warn!(%error, "session.interrupt failed");
        }
        Ok(())
    })
}
