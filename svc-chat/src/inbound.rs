//! An inbound chat item → what it means: a button press answers an approval/question, a chat
//! command ([`crate::commands`]) is handled here, anything else becomes `session.prompt` in the
//! conversation's session (created on first use per (binding, channel), origin surface
//! `gateway:<platform>:<channel>`). The adapter commits its cursor only when this answers
//! [`Handled::Done`], i.e. after svc-session accepted the turn; while the daemon is not
//! reachable it answers [`Handled::Retry`].
//!
//! Hostile input never crashes anything: text is already lossily decoded and stripped of
//! control characters by the adapter; text over [`MAX_TEXT_BYTES`] is refused with a reply;
//! attachments are capped by the adapter (`maxAttachmentBytes`).

use std::sync::Arc;

use base64::Engine;
use serde_json::{json, Value};
use snowpea_proto::session::v1::channel_internal_service_client::ChannelInternalServiceClient;
use snowpea_proto::session::v1::ResolveChannelRequest;

use crate::chat::Chat;
use crate::platform::{Attachment, ConnKey, Handled, Inbound, InboundKind};
use crate::relay::{clip, Press};
use crate::store::BindingRow;

/// Largest inbound text prompted, in bytes (longer messages are refused with a reply).
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// Why a conversation's session could not be found or made.
pub enum SessionError {
    /// The daemon is not reachable: try the item again later.
    Retry,
    /// It failed for good: tell the chat.
    Failed(String),
}

/// Handles one inbound item.
pub async fn handle(chat: &Chat, conn: &ConnKey, item: Inbound) -> Handled {
    let Some(chat) = chat.arc() else {
        return Handled::Retry;
    };
    let Some(binding) = chat.route(conn, &item.channel) else {
        return Handled::Done;
    };
    match item.kind {
        InboundKind::Button { data, ack } => {
            let answer = match chat.relay.press(
                &binding.binding_id,
                binding.user_id.as_deref(),
                &item.user,
                &data,
            ) {
                Press::Accepted(label) => label,
                Press::Refused => {
                    chat.event(
                        &binding.binding_id,
                        "error",
                        json!({
                            "message": "a button press from a user who may not answer was refused",
                            "channel": item.channel,
                            "userId": item.user,
                        }),
                    );
                    "Only the bound user may answer this"
                }
                Press::Unknown => "This request is no longer pending",
            };
            if let Some(out) = chat.outbound_of(&binding) {
                if let Err(e) = out.answer_button(&ack, answer).await {
                    tracing::debug!(error = %e, "acknowledging a button failed");
                }
            }
            Handled::Done
        }
        InboundKind::Message {
            text,
            attachments,
            skipped,
        } => {
            // The answer to a question waiting for text (a secret one is never echoed).
            if let Some(secret) = chat.relay.answer_text(
                &binding.binding_id,
                &item.channel,
                binding.user_id.as_deref(),
                &item.user,
                &text,
            ) {
                let shown = if secret {
                    "***".to_owned()
                } else {
                    clip(&text, 2000)
                };
                chat.event(
                    &binding.binding_id,
                    "message",
                    json!({ "direction": "in", "channel": item.channel, "userId": item.user,
                            "text": shown, "answer": true }),
                );
                chat.send_to(&binding.binding_id, &item.channel, "Answered.", false, &[])
                    .await;
                return Handled::Done;
            }
            chat.event(
                &binding.binding_id,
                "message",
                json!({
                    "direction": "in",
                    "channel": item.channel,
                    "userId": item.user,
                    "text": clip(&text, 2000),
                    "attachments": attachments.len(),
                }),
            );
            for why in &skipped {
                chat.send_to(
                    &binding.binding_id,
                    &item.channel,
                    &format!("Attachment left out: {why}"),
                    false,
                    &[],
                )
                .await;
            }
            if text.len() > MAX_TEXT_BYTES {
                chat.send_to(
                    &binding.binding_id,
                    &item.channel,
                    &format!(
                        "That message is too long ({} bytes; at most {MAX_TEXT_BYTES}).",
                        text.len()
                    ),
                    false,
                    &[],
                )
                .await;
                return Handled::Done;
            }
            if text.trim().is_empty() && attachments.is_empty() {
                return Handled::Done;
            }
            if let Some((cmd, arg)) = crate::commands::parse(&text) {
                return crate::commands::run(&chat, &binding, &item.channel, cmd, arg).await;
            }
            prompt(&chat, &binding, &item.channel, &text, &attachments).await
        }
    }
}

async fn prompt(
    chat: &Arc<Chat>,
    binding: &BindingRow,
    channel: &str,
    text: &str,
    attachments: &[Attachment],
) -> Handled {
    let Some(client) = chat.daemon.client() else {
        return Handled::Retry;
    };
    let attachments: Vec<Value> = attachments
        .iter()
        .map(|a| {
            let image = a.mime.as_deref().is_some_and(|m| m.starts_with("image/"));
            json!({
                "kind": if image { "image" } else { "file" },
                "name": a.name,
                "mimeType": a.mime,
                "size": a.bytes.len(),
                "data": base64::engine::general_purpose::STANDARD.encode(&a.bytes),
            })
        })
        .collect();
    // A session that vanished (deleted elsewhere) is replaced once.
    for attempt in 0..2 {
        let session_id = match session_for(chat, binding, channel).await {
            Ok(s) => s,
            Err(SessionError::Retry) => return Handled::Retry,
            Err(SessionError::Failed(m)) => {
                fail(chat, binding, channel, &m).await;
                return Handled::Done;
            }
        };
        let mut params = json!({ "sessionId": session_id, "text": text });
        if !attachments.is_empty() {
            params["attachments"] = json!(attachments);
        }
        match client.call("session.prompt", params).await {
            Ok(_) => return Handled::Done,
            Err(e) if is_retryable(&e) => return Handled::Retry,
            Err(e) if e.code_str() == Some("not_found") && attempt == 0 => {
                forget_conversation(chat, binding, channel, &session_id).await;
            }
            Err(e) => {
                fail(chat, binding, channel, &e.to_string()).await;
                return Handled::Done;
            }
        }
    }
    Handled::Done
}

/// Whether a daemon error means "try again later".
pub fn is_retryable(e: &snowpea_sdk::Error) -> bool {
    match e {
        snowpea_sdk::Error::Connect(_)
        | snowpea_sdk::Error::Timeout
        | snowpea_sdk::Error::Closed => true,
        snowpea_sdk::Error::Rpc(_) => e.code_str() == Some("unavailable"),
        snowpea_sdk::Error::Protocol(_) => false,
    }
}

/// Tells the chat (and `gateway.event` `error`) that something failed.
pub async fn fail(chat: &Chat, binding: &BindingRow, channel: &str, message: &str) {
    chat.event(
        &binding.binding_id,
        "error",
        json!({ "channel": channel, "message": clip(message, 500) }),
    );
    chat.send_to(
        &binding.binding_id,
        channel,
        &format!("⚠ {}", clip(message, 500)),
        false,
        &[],
    )
    .await;
}

async fn forget_conversation(chat: &Chat, binding: &BindingRow, channel: &str, session_id: &str) {
    chat.relay.detach(session_id);
    let store = chat.store.clone();
    let (b, c) = (binding.binding_id.clone(), channel.to_owned());
    let _ = snowpea_common::db::blocking("forget conversation", move || {
        store.delete_conversation(&b, &c)
    })
    .await;
}

/// The origin surface of a conversation.
pub fn surface(binding: &BindingRow, channel: &str) -> String {
    format!("gateway:{}:{channel}", binding.platform)
}

/// The workdir of a conversation's new sessions: the target's, else
/// `settings.gateway.<platform>.workdir`, else the user's home directory.
pub fn workdir_of(chat: &Chat, binding: &BindingRow) -> String {
    if let Some(w) = binding
        .target
        .pointer("/new_session/workdir")
        .and_then(Value::as_str)
    {
        return w.to_owned();
    }
    let settings =
        snowpea_common::settings::load_file(&chat.home.settings_path()).unwrap_or(Value::Null);
    settings
        .pointer(&format!("/gateway/{}/workdir", binding.platform))
        .and_then(Value::as_str)
        .filter(|w| std::path::Path::new(w).is_absolute())
        .map(str::to_owned)
        .or_else(|| std::env::var("HOME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| chat.home.root().display().to_string())
}

/// The conversation's current session, made on first use from the binding's target.
pub async fn session_for(
    chat: &Arc<Chat>,
    binding: &BindingRow,
    channel: &str,
) -> Result<String, SessionError> {
    let client = chat.daemon.client().ok_or(SessionError::Retry)?;
    let store = chat.store.clone();
    let (b, c) = (binding.binding_id.clone(), channel.to_owned());
    let existing = snowpea_common::db::blocking("conversation", move || store.conversation(&b, &c))
        .await
        .map_err(|_| SessionError::Retry)?
        .map_err(|e| SessionError::Failed(format!("chat database: {e:#}")))?;
    if let Some(conv) = existing {
        chat.relay.attach(
            chat,
            &client,
            &binding.binding_id,
            channel,
            &conv.session_id,
            conv.last_seq,
        );
        return Ok(conv.session_id);
    }
    let workdir = workdir_of(chat, binding);
    let session_id = if let Some(agent) = binding.target.get("agent").and_then(Value::as_str) {
        match resolve_channel(chat, binding, channel, &workdir).await {
            Some(sid) => {
                attach_session(&client, &sid).await?;
                sid
            }
            None => create(chat, binding, channel, &workdir, json!({ "agent": agent })).await?,
        }
    } else if let Some(sid) = binding.target.get("session").and_then(Value::as_str) {
        attach_session(&client, sid).await?;
        sid.to_owned()
    } else {
        let mut extra = json!({});
        if let Some(mode) = binding.target.pointer("/new_session/mode") {
            extra["mode"] = mode.clone();
        }
        create(chat, binding, channel, &workdir, extra).await?
    };
    new_conversation(chat, binding, channel, &session_id, &workdir).await?;
    Ok(session_id)
}

/// Records `session_id` as the conversation's session and starts relaying it.
pub async fn new_conversation(
    chat: &Arc<Chat>,
    binding: &BindingRow,
    channel: &str,
    session_id: &str,
    workdir: &str,
) -> Result<(), SessionError> {
    let client = chat.daemon.client().ok_or(SessionError::Retry)?;
    let store = chat.store.clone();
    let (b, c, s, w) = (
        binding.binding_id.clone(),
        channel.to_owned(),
        session_id.to_owned(),
        workdir.to_owned(),
    );
    snowpea_common::db::blocking("set conversation", move || {
        store.set_conversation(&b, &c, &s, &w, 0)
    })
    .await
    .map_err(|_| SessionError::Retry)?
    .map_err(|e| SessionError::Failed(format!("chat database: {e:#}")))?;
    chat.relay
        .attach(chat, &client, &binding.binding_id, channel, session_id, 0);
    Ok(())
}

/// `session.create` for a conversation (`extra`: agent / mode).
pub async fn create(
    chat: &Chat,
    binding: &BindingRow,
    channel: &str,
    workdir: &str,
    extra: Value,
) -> Result<String, SessionError> {
    let client = chat.daemon.client().ok_or(SessionError::Retry)?;
    let mut params = json!({ "workdir": workdir, "originSurface": surface(binding, channel) });
    if let Value::Object(m) = extra {
        for (k, v) in m {
            params[k] = v;
        }
    }
    match client.call("session.create", params).await {
        Ok(v) => v
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| SessionError::Failed("session.create answered no sessionId".into())),
        Err(e) if is_retryable(&e) => Err(SessionError::Retry),
        Err(e) => Err(SessionError::Failed(format!("cannot start a session: {e}"))),
    }
}

/// `session.attach`: svc-chat's connection becomes the session's origin (its approvals come
/// to the chat).
pub async fn attach_session(
    client: &snowpea_sdk::Client,
    session_id: &str,
) -> Result<(), SessionError> {
    match client
        .call("session.attach", json!({ "sessionId": session_id }))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_retryable(&e) => Err(SessionError::Retry),
        Err(e) => Err(SessionError::Failed(format!(
            "cannot use session {}: {e}",
            clip(session_id, 64)
        ))),
    }
}

/// Asks svc-session which session a channel bound with `agent.bindChannel` talks to
/// (`ChannelInternalService.ResolveChannel`, 2 s deadline). `None` when svc-session does not
/// implement it yet (UNIMPLEMENTED), binds no agent to the channel, or is down: the binding's
/// own session is used.
pub async fn resolve_channel(
    chat: &Chat,
    binding: &BindingRow,
    channel: &str,
    workdir: &str,
) -> Option<String> {
    let ch = snowpea_common::client::unix_channel(chat.home.socket("session"));
    let mut client = ChannelInternalServiceClient::new(ch);
    let mut req = tonic::Request::new(ResolveChannelRequest {
        platform: binding.platform.clone(),
        channel: channel.to_owned(),
        workdir: workdir.to_owned(),
        origin_surface: surface(binding, channel),
        agent: binding
            .target
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    });
    req.set_timeout(std::time::Duration::from_secs(2));
    match tokio::time::timeout(
        std::time::Duration::from_secs(3),
        client.resolve_channel(req),
    )
    .await
    {
        Ok(Ok(r)) => Some(r.into_inner().session_id).filter(|s| !s.is_empty()),
        Ok(Err(s)) if s.code() == tonic::Code::Unimplemented => None,
        Ok(Err(s)) => {
            tracing::debug!(error = %s.message(), "ResolveChannel failed; using the binding's session");
            None
        }
        Err(_) => None,
    }
}
