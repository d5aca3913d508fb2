//! Delegation mode (spec `session.create` / `session.resume` `delegation`, `mode.changed`
//! `delegation`): while it is in force the session's model leads a team — it hands the work
//! to subagents (`delegate_task`) and reviews and integrates what they return instead of
//! doing it itself ([`delegation_prompt`], added to the system prompt of its turns).
//!
//! In force: the session's pin (`/team on|off`, stored on the row), else the setting
//! `agents.delegateByDefault` (default false) of the session's workdir. Switching it emits
//! `mode.changed{mode, delegation}` and `sessions.changed{reason:"delegation"}`.

use serde_json::Value;
use snowpea_proto::session::v1 as pb;

use super::{Session, Sessions};
use snowpea_session_error::Result;

/// The setting a session without a pin follows.
pub const DELEGATE_BY_DEFAULT_SETTING: &str = "agents.delegateByDefault";

/// `agents.delegateByDefault` of `settings` (false when absent or not a boolean).
pub fn by_default(settings: &Value) -> bool {
    snowpea_common::settings::get(settings, DELEGATE_BY_DEFAULT_SETTING)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The system prompt layer of a turn in delegation mode.
pub fn delegation_prompt() -> &'static str {
    "\n\n# Delegation mode\nDelegation mode is on: you lead a team. Hand the work itself \
     (edits, commands, research) to subagents with `delegate_task`, one clear task each — \
     independent tasks may run at once — then review what they report, check it, and \
     integrate it into one answer. Do small reads yourself only to plan or to verify."
}

impl Sessions {
    /// Whether delegation mode is in force for `session` (module doc).
    pub fn delegation(&self, session: &Session) -> bool {
        if let Some(pin) = session.row().delegation {
            return pin;
        }
        let settings =
            snowpea_common::settings::load_effective(&self.home, Some(&session.workdir()))
                .unwrap_or_default();
        by_default(&settings)
    }

    /// `/team on|off`: pins delegation mode on session `id`; emits `mode.changed{mode,
    /// delegation}` and `sessions.changed{reason:"delegation"}`. Returns what is now in
    /// force.
    pub async fn set_delegation(&self, id: &str, on: bool) -> Result<bool> {
        let session = self.get(id)?;
        session.update(|r| r.delegation = Some(on));
        self.save(&session);
        self.log
            .event_to_committed(
                &session,
                &pb::ModeChangedEvent {
                    mode: session.mode().as_str().to_owned(),
                    delegation: Some(on),
                    ..Default::default()
                },
            )
            .await?;
        self.changed(&session, "delegation");
        Ok(on)
    }
}
