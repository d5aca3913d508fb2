//! `session.continue` (spec 1.8.0, issue 16 "hand-back"): the system continues a chat
//! session, e.g. after a person handed a browser tab back.
//!
//! * `note` is required (whitespace collapsed, cut like a notice); `reason` defaults to
//!   `handback`.
//! * The caller rule of `session.setAgent` ([`crate::session::callers`]); scheduled (and
//!   subagent) sessions are `invalid_params` on `params.sessionId`.
//! * An `idempotencyKey` is honoured once: the same key again answers `{started: false,
//!   duplicate: true}` and changes nothing (the last [`KEYS_KEPT`] keys per session).
//! * A running turn, or a system start of this session less than [`WINDOW`] ago: the note
//!   becomes the notice `(reason) note` for the next model call; `{started: false,
//!   queued: true}`.
//! * Otherwise a turn starts whose model input is `[system] (reason) note`:
//!   `turn.started{initiator: "system", reason, prompt: null}` and no `message.user`;
//!   `{started: true, turnId}`. The note is kept in `turn.started`'s wire-only `note`
//!   field so the history of later turns has it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;

use super::{busy, TurnStart, Turns};
use crate::session::callers;
use crate::store::sessions::KIND_CHAT;
use snowpea_session_error::{Error, Result};

/// One system start per session within this window.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Idempotency keys remembered per session.
pub const KEYS_KEPT: usize = 256;
/// `reason` when the call gives none.
pub const DEFAULT_REASON: &str = "handback";

/// A session's `session.continue` memory (in the turn state, under the turn lock).
#[derive(Debug, Default)]
pub struct HandbackState {
    /// When the last system-initiated turn started.
    pub last_start: Option<Instant>,
    /// Idempotency keys seen, oldest first.
    pub keys: VecDeque<String>,
}

/// The model input of a system turn.
pub fn system_input(reason: &str, note: &str) -> String {
    format!("[system] ({reason}) {note}")
}

impl Turns {
    /// `session.continue` (module doc).
    pub async fn continue_session(
        self: &Arc<Self>,
        ctx: &CallContext,
        p: pb::SessionContinueParams,
    ) -> Result<pb::SessionContinueResult> {
        let session = self.sessions.get(&p.session_id)?;
        let note = busy::clean_notice(&p.note);
        if note.is_empty() {
            return Err(Error::invalid("params.note", "must not be empty"));
        }
        let kind = session.row().kind().to_owned();
        if kind != KIND_CHAT {
            return Err(Error::invalid(
                "params.sessionId",
                format!("a {kind} session cannot be continued; only chat sessions can"),
            ));
        }
        callers::may_drive(ctx, &session, "session.continue")?;
        let reason = Some(p.reason.trim())
            .filter(|r| !r.is_empty())
            .unwrap_or(DEFAULT_REASON)
            .to_owned();
        let key = p
            .idempotency_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty());
        let start = {
            let mut st = session.turns();
            if let Some(k) = key {
                if st.handback.keys.iter().any(|seen| seen == k) {
                    return Ok(pb::SessionContinueResult {
                        duplicate: Some(true),
                        started: false,
                        ..Default::default()
                    });
                }
                if st.handback.keys.len() == KEYS_KEPT {
                    st.handback.keys.pop_front();
                }
                st.handback.keys.push_back(k.to_owned());
            }
            let recent = st
                .handback
                .last_start
                .is_some_and(|at| at.elapsed() < WINDOW);
            if st.running.is_some() || recent {
                None
            } else {
                st.handback.last_start = Some(Instant::now());
                let turn_id = snowpea_common::ids::new_id("t");
                let cancel = st.begin(&turn_id);
                session.idle.send_replace(false);
                Some(TurnStart {
                    turn_id,
                    text: system_input(&reason, &note),
                    queued: false,
                    cancel,
                    system_reason: Some(reason.clone()),
                    attachments: Default::default(),
                    headless: false,
                })
            }
        };
        let Some(start) = start else {
            let queued = busy::push_notice(&session, format!("({reason}) {note}"));
            return Ok(pb::SessionContinueResult {
                queued: Some(queued),
                started: false,
                ..Default::default()
            });
        };
        let turn_id = start.turn_id.clone();
        self.spawn_drive(session.clone(), start);
        self.sessions.changed(&session, "prompt");
        Ok(pb::SessionContinueResult {
            started: true,
            turn_id: Some(turn_id),
            ..Default::default()
        })
    }
}
