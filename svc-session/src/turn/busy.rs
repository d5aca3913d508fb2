//! A session that is busy (issue 16 "Busy sessions"): what happens to a prompt that
//! arrives while a turn runs, `session.steer` and `session.notice`.
//!
//! * Every busy prompt is announced with `turn.queued{turnId, position, queued}`.
//! * **steer** (`whenBusy: "steer"`, or the `agent.busy` setting, default `steer`): it waits
//!   in [`super::TurnState::steers`] and is folded into the running turn before its next
//!   model call as `message.user{steered: true}` followed by `turn.dequeued{reason:
//!   "steered"}`; it never gets a `turn.started`. Its turn id gets a `turn.done` right after
//!   the turn it joined (same reason), so every turn id still ends exactly once. A model
//!   answer without tool calls while steers wait does not end the turn: they are folded and
//!   the model is called again. One that arrives after the turn's last check runs as the
//!   next queued turn. Once folded it is also one of the person's `steers` in later
//!   `tool.invoke.userTurn`s ([`crate::host_tools::HostTools::remember_steer`]).
//! * **queue**: it runs after the running turn, with `turn.dequeued{reason:"started"}` and
//!   `turn.started{queued: true}`.
//! * `session.interrupt` drops every waiting prompt (`turn.dequeued{reason:"dropped"}` +
//!   `turn.done{reason:"interrupted"}` each): the person stopped the work.
//! * `session.notice`: a `[system]` line for the model's next call; whitespace collapsed, at
//!   most [`NOTICE_MAX_CHARS`] characters (longer is cut), at most [`NOTICE_MAX_PENDING`]
//!   waiting (a further one is dropped and answered `ok: false`). It never starts a turn;
//!   the lines reach the model as one user message `[system] …` (one line each) and are
//!   not stored in the history.

use std::sync::Arc;

use serde_json::Value;
use snowpea_common::context::CallContext;
use snowpea_proto::limits::PROMPTS_WAITING;
use snowpea_proto::session::v1 as pb;

use super::{QueuedTurn, TurnStart, Turns};
use crate::attachments::Prepared;
use crate::session::Session;
use snowpea_session_error::{Error, Result};
use snowpea_session_llm::provider::ChatMessage;

/// The setting choosing what a busy prompt does (`steer` or `queue`).
pub const BUSY_SETTING: &str = "agent.busy";
/// Longest notice, in characters (longer text is cut).
pub const NOTICE_MAX_CHARS: usize = 2000;
/// Most notices waiting for a model call; a further one is dropped.
pub const NOTICE_MAX_PENDING: usize = 20;

/// What a prompt that arrives while a turn runs does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenBusy {
    /// Fold it into the running turn before its next model call.
    Steer,
    /// Run it as its own turn after the running one.
    Queue,
}

impl WhenBusy {
    /// `whenBusy` of a call: `None` when absent, `invalid_params` naming `field` when not
    /// `queue`/`steer`.
    pub fn parse(field: &str, v: Option<&str>) -> Result<Option<WhenBusy>> {
        match v.map(str::trim) {
            None | Some("") => Ok(None),
            Some("steer") => Ok(Some(WhenBusy::Steer)),
            Some("queue") => Ok(Some(WhenBusy::Queue)),
            Some(other) => Err(Error::invalid(
                field,
                format!("must be queue or steer, not {other:?}"),
            )),
        }
    }

    /// The `agent.busy` setting (`steer` when unset or not understood).
    pub fn from_settings(settings: &Value) -> WhenBusy {
        match snowpea_common::settings::get(settings, BUSY_SETTING).and_then(Value::as_str) {
            Some("queue") => WhenBusy::Queue,
            _ => WhenBusy::Steer,
        }
    }
}

/// `session_busy` when [`PROMPTS_WAITING`] prompts already wait behind `session`'s running
/// turn (checked before a prompt stores anything, so a refusal loses nothing).
pub(crate) fn room_to_wait(session: &Session) -> Result<()> {
    let waiting = session.turns().waiting();
    if waiting >= PROMPTS_WAITING {
        return Err(Error::SessionBusy(format!(
            "{waiting} prompts already wait behind the running turn (at most {PROMPTS_WAITING}); wait for turn.dequeued or interrupt the turn"
        )));
    }
    Ok(())
}

/// A notice as the model gets it: whitespace collapsed, cut to [`NOTICE_MAX_CHARS`].
pub fn clean_notice(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed.chars().take(NOTICE_MAX_CHARS).collect()
}

/// The user message carrying waiting notices: `[system] <text>` per line.
pub fn notice_message(notices: &[String]) -> ChatMessage {
    let lines: Vec<String> = notices.iter().map(|n| format!("[system] {n}")).collect();
    ChatMessage::user(lines.join("\n"))
}

impl Turns {
    /// Starts `turn_id` now when no turn runs (returns true), else makes it wait as
    /// `when_busy` says, announced with `turn.queued` (emitted under the turn lock, so it is
    /// ordered before the prompt's `turn.dequeued`).
    pub(crate) fn submit(
        self: &Arc<Self>,
        session: &Arc<Session>,
        turn_id: &str,
        text: &str,
        when_busy: WhenBusy,
        attachments: Arc<Prepared>,
        headless: bool,
    ) -> bool {
        let start = {
            let mut st = session.turns();
            if st.running.is_none() {
                let cancel = st.begin(turn_id);
                session.idle.send_replace(false);
                Some(TurnStart {
                    turn_id: turn_id.to_owned(),
                    text: text.to_owned(),
                    queued: false,
                    cancel,
                    system_reason: None,
                    attachments,
                    headless,
                })
            } else {
                let waiting = QueuedTurn {
                    turn_id: turn_id.to_owned(),
                    text: text.to_owned(),
                    attachments,
                    headless,
                };
                let list = match when_busy {
                    WhenBusy::Steer => &mut st.steers,
                    WhenBusy::Queue => &mut st.queue,
                };
                list.push_back(waiting);
                let position = list.len();
                let queued = st.waiting();
                self.event(
                    session,
                    &pb::TurnQueuedEvent {
                        turn_id: turn_id.to_owned(),
                        position: position as i64,
                        queued: queued as i64,
                        ..Default::default()
                    },
                );
                None
            }
        };
        match start {
            Some(start) => {
                self.spawn_drive(session.clone(), start);
                true
            }
            None => false,
        }
    }

    /// Before a model call of turn `t`: the waiting notices (one `[system]` user message)
    /// and steered prompts (`message.user{steered}` + `turn.dequeued{steered}` each) join
    /// `messages`. Returns true when a prompt was steered in.
    pub(crate) fn fold_waiting(
        &self,
        session: &Session,
        t: &TurnStart,
        messages: &mut Vec<ChatMessage>,
    ) -> bool {
        let unattended = session.is_unattended();
        let mut st = session.turns();
        let notices = std::mem::take(&mut st.notices);
        if !notices.is_empty() {
            messages.push(notice_message(&notices));
        }
        let mut steered = false;
        while let Some(q) = st.steers.pop_front() {
            let input = self.user_message(session, &t.turn_id, &q.text, None, true, &q.attachments);
            let left = st.waiting();
            self.event(
                session,
                &pb::TurnDequeuedEvent {
                    turn_id: q.turn_id.clone(),
                    reason: "steered".into(),
                    queued: left as i64,
                    ..Default::default()
                },
            );
            if let (Some(h), false) = (self.host_tools.as_ref(), unattended) {
                // The person's words typed during the turn: `tool.invoke.userTurn.steers`.
                h.remember_steer(&session.id, &t.turn_id, &q.turn_id, &q.text);
            }
            if let Some(r) = st.running.as_mut() {
                r.steered.push(q.turn_id);
            }
            messages.push(input);
            steered = true;
        }
        steered
    }

    /// True when prompts wait to be steered into the running turn.
    pub(crate) fn has_steers(&self, session: &Session) -> bool {
        !session.turns().steers.is_empty()
    }

    /// `session.steer`: into the running turn at its next tool round (like a prompt with
    /// `whenBusy: "steer"`); on an idle session it starts a turn like `session.prompt`.
    pub async fn steer(
        self: &Arc<Self>,
        ctx: &CallContext,
        p: pb::SessionSteerParams,
    ) -> Result<pb::SessionSteerResult> {
        let session = self.sessions.get(&p.session_id)?;
        if p.text.trim().is_empty() {
            return Err(Error::invalid("params.text", "must not be empty"));
        }
        room_to_wait(&session)?;
        self.sessions.rebind_on_prompt(
            &session,
            ctx.connection_id.as_deref(),
            ctx.client_id.as_deref(),
        );
        self.sessions.mark_active_by_client(&session, ctx);
        let turn_id = snowpea_common::ids::new_id("t");
        // A slash command is its own turn: queued, never folded into the running one.
        let when_busy = if crate::commands::parse_slash(&p.text).is_some() {
            WhenBusy::Queue
        } else {
            WhenBusy::Steer
        };
        let started = self.submit(
            &session,
            &turn_id,
            &p.text,
            when_busy,
            Default::default(),
            false,
        );
        self.sessions.changed(&session, "prompt");
        Ok(pb::SessionSteerResult { ok: true, started })
    }

    /// `session.notice`: queues a `[system]` line for the model's next call (module doc).
    /// `ok: false` when [`NOTICE_MAX_PENDING`] notices already wait and this one is dropped.
    pub fn notice(&self, p: pb::SessionNoticeParams) -> Result<snowpea_proto::rpc::v1::OkResult> {
        let session = self.sessions.get(&p.session_id)?;
        let text = clean_notice(&p.text);
        if text.is_empty() {
            return Err(Error::invalid("params.text", "must not be empty"));
        }
        Ok(snowpea_proto::rpc::v1::OkResult {
            ok: push_notice(&session, text),
        })
    }
}

/// Adds a notice unless [`NOTICE_MAX_PENDING`] already wait (then false, and it is dropped).
pub(crate) fn push_notice(session: &Session, text: String) -> bool {
    let mut st = session.turns();
    if st.notices.len() >= NOTICE_MAX_PENDING {
        tracing::warn!(session_id = %session.id, "notice dropped: {NOTICE_MAX_PENDING} already wait");
        return false;
    }
    st.notices.push(text);
    true
}
