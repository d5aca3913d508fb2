//! Chat commands svc-chat answers itself (upstream §7): `/new`, `/resume`, `/sessions`,
//! `/projects`, `/status`, `/stop`. Any other `/word` is prompted as it is (svc-session parses
//! its own slash commands). Telegram's `/cmd@BotName` form is accepted.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::chat::Chat;
use crate::inbound::{self, fail, is_retryable, SessionError};
use crate::platform::Handled;
use crate::relay::clip;
use crate::store::BindingRow;

/// The chat commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `/new`: a fresh session for this chat.
    New,
    /// `/resume <n|id>`: switch back to one of this chat's sessions.
    Resume,
    /// `/sessions`: this chat's sessions, newest first.
    Sessions,
    /// `/projects`: the workdirs of recent sessions.
    Projects,
    /// `/status`: the binding and the current session.
    Status,
    /// `/stop`: interrupt the running turn.
    Stop,
}

/// The command of `text` and its argument, when `text` is one of ours.
pub fn parse(text: &str) -> Option<(Command, &str)> {
    let text = text.trim();
    let rest = text.strip_prefix('/')?;
    let (word, arg) = match rest.find(char::is_whitespace) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    let word = word.split('@').next().unwrap_or(word);
    let cmd = match word {
        "new" => Command::New,
        "resume" => Command::Resume,
        "sessions" => Command::Sessions,
        "projects" => Command::Projects,
        "status" => Command::Status,
        "stop" => Command::Stop,
        _ => return None,
    };
    Some((cmd, arg))
}

/// Runs a command and replies in the chat.
pub async fn run(
    chat: &Arc<Chat>,
    binding: &BindingRow,
    channel: &str,
    cmd: Command,
    arg: &str,
) -> Handled {
    let Some(client) = chat.daemon.client() else {
        return Handled::Retry;
    };
    let reply = match cmd {
        Command::New => new_session(chat, binding, channel).await,
        Command::Stop => match current(chat, binding, channel).await {
            Some(sid) => match client
                .call("session.interrupt", json!({ "sessionId": sid }))
                .await
            {
                Ok(_) => Ok("Stopped.".to_owned()),
                Err(e) if is_retryable(&e) => Err(SessionError::Retry),
                Err(e) => Err(SessionError::Failed(format!("cannot stop: {e}"))),
            },
            None => Ok("No session yet: send a message to start one.".to_owned()),
        },
        Command::Status => status(chat, binding, channel).await,
        Command::Sessions => sessions(chat, binding, channel).await,
        Command::Resume => resume(chat, binding, channel, arg).await,
        Command::Projects => projects(chat).await,
    };
    match reply {
        Ok(text) => {
            chat.send_to(&binding.binding_id, channel, &text, false, &[])
                .await;
            Handled::Done
        }
        Err(SessionError::Retry) => Handled::Retry,
        Err(SessionError::Failed(m)) => {
            fail(chat, binding, channel, &m).await;
            Handled::Done
        }
    }
}

async fn current(chat: &Chat, binding: &BindingRow, channel: &str) -> Option<String> {
    let store = chat.store.clone();
    let (b, c) = (binding.binding_id.clone(), channel.to_owned());
    snowpea_common::db::blocking("conversation", move || store.conversation(&b, &c))
        .await
        .ok()?
        .ok()?
        .map(|c| c.session_id)
}

async fn history(chat: &Chat, binding: &BindingRow, channel: &str) -> Vec<(String, String)> {
    let store = chat.store.clone();
    let (b, c) = (binding.binding_id.clone(), channel.to_owned());
    snowpea_common::db::blocking("conversation sessions", move || {
        store.conversation_sessions(&b, &c)
    })
    .await
    .ok()
    .and_then(Result::ok)
    .unwrap_or_default()
}

async fn new_session(
    chat: &Arc<Chat>,
    binding: &BindingRow,
    channel: &str,
) -> Result<String, SessionError> {
    let workdir = inbound::workdir_of(chat, binding);
    let mut extra = json!({});
    if let Some(agent) = binding.target.get("agent") {
        extra["agent"] = agent.clone();
    }
    if let Some(mode) = binding.target.pointer("/new_session/mode") {
        extra["mode"] = mode.clone();
    }
    let sid = inbound::create(chat, binding, channel, &workdir, extra).await?;
    if let Some(old) = current(chat, binding, channel).await {
        chat.relay.detach(&old);
    }
    inbound::new_conversation(chat, binding, channel, &sid, &workdir).await?;
    Ok(format!("Started a new session {sid} in {workdir}."))
}

async fn status(chat: &Chat, binding: &BindingRow, channel: &str) -> Result<String, SessionError> {
    let mut out = format!(
        "Binding {} ({} → {}), {}.",
        binding.binding_id,
        binding.platform,
        crate::binding::target_label(&binding.target),
        chat.state_of(binding)
    );
    match current(chat, binding, channel).await {
        Some(sid) => {
            let state = session_row(chat, &sid)
                .await
                .and_then(|s| s.get("status").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| "unknown".into());
            out.push_str(&format!("\nSession {sid}: {state}."));
        }
        None => out.push_str("\nNo session yet: send a message to start one."),
    }
    Ok(out)
}

/// The `session.list` row of a session, when listed.
async fn session_row(chat: &Chat, session_id: &str) -> Option<Value> {
    let client = chat.daemon.client()?;
    let list = client.call("session.list", json!({})).await.ok()?;
    list.get("sessions")?
        .as_array()?
        .iter()
        .find(|s| s.get("sessionId").and_then(Value::as_str) == Some(session_id))
        .cloned()
}

async fn sessions(
    chat: &Chat,
    binding: &BindingRow,
    channel: &str,
) -> Result<String, SessionError> {
    let list = history(chat, binding, channel).await;
    if list.is_empty() {
        return Ok("No sessions yet: send a message to start one.".into());
    }
    let cur = current(chat, binding, channel).await;
    let mut out = String::from("Sessions of this chat (newest first; /resume <n>):");
    for (i, (sid, workdir)) in list.iter().take(10).enumerate() {
        let mark = if cur.as_deref() == Some(sid) {
            " (current)"
        } else {
            ""
        };
        out.push_str(&format!("\n{}. {sid} in {workdir}{mark}", i + 1));
    }
    Ok(out)
}

async fn resume(
    chat: &Arc<Chat>,
    binding: &BindingRow,
    channel: &str,
    arg: &str,
) -> Result<String, SessionError> {
    let list = history(chat, binding, channel).await;
    let picked = match arg.parse::<usize>() {
        Ok(n) if n >= 1 => list.get(n - 1).cloned(),
        _ => list.iter().find(|(sid, _)| sid == arg).cloned(),
    };
    let Some((sid, workdir)) = picked else {
        return Ok(format!(
            "No session {:?} in this chat; /sessions lists them.",
            clip(arg, 64)
        ));
    };
    let client = chat.daemon.client().ok_or(SessionError::Retry)?;
    inbound::attach_session(&client, &sid).await?;
    // Start after what the session already holds: old answers are not sent again.
    let last = match client.resume(&sid, 0).await {
        Ok(events) => events.iter().map(|e| e.seq).max().unwrap_or(0),
        Err(e) if is_retryable(&e) => return Err(SessionError::Retry),
        Err(e) => return Err(SessionError::Failed(format!("cannot resume: {e}"))),
    };
    if let Some(old) = current(chat, binding, channel).await {
        chat.relay.detach(&old);
    }
    let store = chat.store.clone();
    let (b, c, s, w) = (
        binding.binding_id.clone(),
        channel.to_owned(),
        sid.clone(),
        workdir.clone(),
    );
    snowpea_common::db::blocking("resume conversation", move || {
        store.set_conversation(&b, &c, &s, &w, last)
    })
    .await
    .map_err(|_| SessionError::Retry)?
    .map_err(|e| SessionError::Failed(format!("chat database: {e:#}")))?;
    chat.relay
        .attach(chat, &client, &binding.binding_id, channel, &sid, last);
    Ok(format!("Resumed session {sid} in {workdir}."))
}

async fn projects(chat: &Chat) -> Result<String, SessionError> {
    let client = chat.daemon.client().ok_or(SessionError::Retry)?;
    let list = match client.call("session.list", json!({})).await {
        Ok(v) => v,
        Err(e) if is_retryable(&e) => return Err(SessionError::Retry),
        Err(e) => return Err(SessionError::Failed(format!("cannot list sessions: {e}"))),
    };
    let mut seen = Vec::<String>::new();
    for s in list
        .get("sessions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(w) = s.get("workdir").and_then(Value::as_str) {
            if !seen.iter().any(|x| x == w) {
                seen.push(w.to_owned());
            }
        }
    }
    if seen.is_empty() {
        return Ok("No projects yet.".into());
    }
    let mut out = String::from("Projects of recent sessions:");
    for w in seen.iter().take(15) {
        out.push_str(&format!("\n• {w}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_our_commands_only() {
        assert_eq!(parse("/new"), Some((Command::New, "")));
        assert_eq!(parse("  /resume 2 "), Some((Command::Resume, "2")));
        assert_eq!(parse("/stop@SnowpeaBot"), Some((Command::Stop, "")));
        assert_eq!(parse("/compact"), None);
        assert_eq!(parse("new"), None);
        assert_eq!(parse("/"), None);
    }
}
