//! Crash recovery (DESIGN.md §6): before serving, close what a crash left open.
//!
//! * A turn with `turn.started` but no `turn.done` gets a synthetic
//!   `turn.done{turnId, reason:"interrupted", synthetic:true}`.
//! * A prompt still queued gets `turn.dequeued{reason:"dropped"}` and the same synthetic
//!   `turn.done`.
//! * Approvals still pending are resolved as denied by `interrupted`
//!   (`approval.resolved` is published for any gateway already listening).
//!
//! Everything is committed before [`App::open`](crate::app::App::open) returns.

use serde_json::{json, Value};
use snowpea_common::time::now_iso;

use crate::app::App;
use crate::store;

impl App {
    pub(crate) async fn recover(&self) -> anyhow::Result<()> {
        let open = self.store.read(store::turns::open)?;
        for turn in &open {
            let host = self.host_tools_from_of(&turn.session_id);
            if turn.state == "queued" {
                self.log.emit(
                    &turn.session_id,
                    "turn.dequeued",
                    json!({ "turnId": turn.turn_id, "reason": "dropped", "queued": 0 }),
                    host.clone(),
                );
            }
            self.log.emit(
                &turn.session_id,
                "turn.done",
                json!({ "turnId": turn.turn_id, "reason": "interrupted", "synthetic": true }),
                host,
            );
            tracing::warn!(session_id = %turn.session_id, turn_id = %turn.turn_id, state = %turn.state, "closed a turn a crash left open");
        }
        let pending = self.store.read(store::approvals::pending)?;
        for (request_id, _session_id) in pending {
            let rid = request_id.clone();
            self.log.write_later(move |c| {
                store::approvals::resolve(c, &rid, "deny", "interrupted", &now_iso())
            });
            self.log.notify(
                "approval.resolved",
                json!({ "requestId": request_id, "decision": "deny", "by": "interrupted" }),
            );
        }
        self.log.flush().await
    }

    fn host_tools_from_of(&self, session_id: &str) -> Option<String> {
        match self.session(session_id) {
            Ok(s) => s.host_tools_from(),
            Err(_) => self
                .store
                .read(|c| store::sessions::get(c, session_id))
                .ok()
                .flatten()
                .and_then(|r| r.host_tools_from),
        }
    }
}

/// The payload of a synthetic `turn.done` (for tests and tools that look for it).
pub fn synthetic_turn_done(turn_id: &str) -> Value {
    json!({ "turnId": turn_id, "reason": "interrupted", "synthetic": true })
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
