//! Bindings and the sessions / agents they target (QA of issues 19 and 22).
//!
//! * `gateway.bind{target:{session}}` / `{agent}` asks svc-session whether the target exists
//!   ([`check`], `ChannelInternalService.CheckTarget`, 2 s deadline): an unknown one is
//!   `invalid_params` on `params.target.session` / `params.target.agent`; while svc-session
//!   cannot answer the call is `unavailable` (nothing is stored).
//! * When a session is deleted (`session.deleteSaved`) or a named agent (`agent.delete`),
//!   svc-session calls `ChatInternalService.TargetRemoved` ([`removed`]): every binding
//!   targeting it is removed (as by `gateway.unbind`) with a `gateway.event{kind:"removed",
//!   payload:{reason, target}}`, and conversations of a deleted session are forgotten (their
//!   next message starts a new session).
//! * A svc-chat that was down then re-checks its session/agent bindings at start
//!   ([`recheck_at_start`]), retrying while svc-session does not answer; only a definite
//!   "missing" removes a binding.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_proto::session::v1::channel_internal_service_client::ChannelInternalServiceClient;
use snowpea_proto::session::v1::CheckTargetRequest;

use crate::chat::Chat;
use crate::error::ChatError;
use crate::store::BindingRow;

/// Deadline of one `CheckTarget` call.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long [`recheck_at_start`] keeps trying while svc-session does not answer.
pub const RECHECK_FOR: Duration = Duration::from_secs(300);

/// What a binding's target names, if a session or an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `{session: id}`.
    Session(String),
    /// `{agent: name}`.
    Agent(String),
}

impl Target {
    /// The session or agent `target` names (`None` for `new_session`).
    pub fn of(target: &Value) -> Option<Target> {
        if let Some(s) = target.get("session").and_then(Value::as_str) {
            Some(Target::Session(s.to_owned()))
        } else {
            target
                .get("agent")
                .and_then(Value::as_str)
                .map(|a| Target::Agent(a.to_owned()))
        }
    }

    /// The params field naming it.
    pub fn field(&self) -> &'static str {
        match self {
            Target::Session(_) => "target.session",
            Target::Agent(_) => "target.agent",
        }
    }
}

/// Whether `binding`'s target exists: `Ok(true)` also for a `new_session` target and for a
/// svc-session that does not implement the check; `Err` with the reason when svc-session
/// did not answer.
pub async fn check(chat: &Chat, binding: &BindingRow) -> Result<bool, String> {
    let Some(target) = Target::of(&binding.target) else {
        return Ok(true);
    };
    let (session_id, agent) = match &target {
        Target::Session(s) => (s.clone(), String::new()),
        Target::Agent(a) => (String::new(), a.clone()),
    };
    let ch = snowpea_common::client::unix_channel(chat.home.socket("session"));
    let mut client = ChannelInternalServiceClient::new(ch);
    let mut req = tonic::Request::new(CheckTargetRequest {
        session_id,
        agent,
        workdir: crate::inbound::workdir_of(chat, binding),
    });
    req.set_timeout(CHECK_TIMEOUT);
    match tokio::time::timeout(
        CHECK_TIMEOUT + Duration::from_secs(1),
        client.check_target(req),
    )
    .await
    {
        Ok(Ok(r)) => Ok(r.into_inner().found),
        Ok(Err(s)) if s.code() == tonic::Code::Unimplemented => Ok(true),
        Ok(Err(s)) => Err(format!("svc-session: {}", s.message())),
        Err(_) => Err(format!(
            "svc-session did not answer within {CHECK_TIMEOUT:?}"
        )),
    }
}

/// `gateway.bind`'s check of a new binding (module doc).
pub async fn check_new(chat: &Chat, binding: &BindingRow) -> Result<(), ChatError> {
    let Some(target) = Target::of(&binding.target) else {
        return Ok(());
    };
    match check(chat, binding).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(ChatError::invalid(
            target.field(),
            match &target {
                Target::Session(s) => format!("no session {:?}", crate::binding::clip(s)),
                Target::Agent(a) => format!(
                    "no agent {:?}: neither a named agent nor a definition visible from {}",
                    crate::binding::clip(a),
                    crate::inbound::workdir_of(chat, binding)
                ),
            },
        )),
        Err(why) => Err(ChatError::Unavailable(format!(
            "cannot check params.{}: {why}; try again",
            target.field()
        ))),
    }
}

/// Removes the bindings targeting `gone` and, for a session, forgets its conversations
/// (module doc). Returns the removed binding ids.
pub async fn removed(
    chat: &Arc<Chat>,
    gone: Target,
    reason: &str,
) -> Result<Vec<String>, ChatError> {
    let doomed: Vec<BindingRow> = chat
        .bindings()
        .into_iter()
        .filter(|b| Target::of(&b.target).as_ref() == Some(&gone))
        .collect();
    let mut ids = Vec::new();
    for b in doomed {
        let store = chat.store.clone();
        let id = b.binding_id.clone();
        let existed =
            snowpea_common::db::blocking("remove binding", move || store.delete_binding(&id))
                .await??;
        chat.removed(&b.binding_id);
        if existed {
            tracing::info!(binding = %b.binding_id, reason, "binding removed: its target is gone");
            chat.event(
                &b.binding_id,
                "removed",
                json!({
                    "reason": reason,
                    "target": crate::binding::target_label(&b.target),
                }),
            );
            ids.push(b.binding_id);
        }
    }
    if let Target::Session(session_id) = &gone {
        let store = chat.store.clone();
        let sid = session_id.clone();
        let pairs =
            snowpea_common::db::blocking("forget session", move || store.forget_session(&sid))
                .await??;
        chat.relay.detach(session_id);
        if !pairs.is_empty() {
            tracing::info!(session_id = %session_id, conversations = pairs.len(), "conversations of a deleted session forgotten");
        }
    }
    Ok(ids)
}

/// At start: re-checks every session/agent binding in the background (module doc). Each is
/// retried with a growing delay (0.5 s to 10 s) for at most [`RECHECK_FOR`] while svc-session
/// does not answer.
pub fn recheck_at_start(chat: &Arc<Chat>) {
    let weak = Arc::downgrade(chat);
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + RECHECK_FOR;
        let mut delay = Duration::from_millis(500);
        let Some(chat) = weak.upgrade() else { return };
        let mut pending: Vec<BindingRow> = chat
            .bindings()
            .into_iter()
            .filter(|b| Target::of(&b.target).is_some())
            .collect();
        drop(chat);
        while !pending.is_empty() {
            let Some(chat) = weak.upgrade() else { return };
            let mut retry = Vec::new();
            for b in pending {
                if chat.binding(&b.binding_id).is_none() {
                    continue;
                }
                match check(&chat, &b).await {
                    Ok(true) => {}
                    Ok(false) => {
                        let target = Target::of(&b.target).expect("filtered");
                        let reason = match &target {
                            Target::Session(_) => "the session no longer exists",
                            Target::Agent(_) => "the agent no longer exists",
                        };
                        if let Err(e) = removed(&chat, target, reason).await {
                            tracing::warn!(binding = %b.binding_id, error = %e, "could not remove a binding whose target is gone");
                        }
                    }
                    Err(why) => {
                        tracing::debug!(binding = %b.binding_id, %why, "binding target not checked yet");
                        retry.push(b);
                    }
                }
            }
            drop(chat);
            pending = retry;
            if pending.is_empty() || tokio::time::Instant::now() + delay > deadline {
                if !pending.is_empty() {
                    tracing::warn!(
                        bindings = pending.len(),
                        "binding targets left unchecked: svc-session did not answer"
                    );
                }
                return;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(10));
        }
    });
}
