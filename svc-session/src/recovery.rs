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

use crate::error::Result;
use crate::events::EventLog;
use crate::session::Registry;
use crate::store::{self, Store};

/// Closes what a crash left open (see the module doc) and waits for the commit.
pub(crate) async fn recover(store: &Store, log: &EventLog, sessions: &Registry) -> Result<()> {
    let open = store.read("recovery.turns", store::turns::open).await?;
    for turn in &open {
        let host = sessions
            .row(&turn.session_id)
            .await
            .ok()
            .flatten()
            .and_then(|r| r.host_tools_from);
        if turn.state == "queued" {
            log.emit(
                &turn.session_id,
                "turn.dequeued",
                json!({ "turnId": turn.turn_id, "reason": "dropped", "queued": 0 }),
                host.clone(),
            );
        }
        log.emit(
            &turn.session_id,
            "turn.done",
            json!({ "turnId": turn.turn_id, "reason": "interrupted", "synthetic": true }),
            host,
        );
        tracing::warn!(session_id = %turn.session_id, turn_id = %turn.turn_id, state = %turn.state, "closed a turn a crash left open");
    }
    let pending = store
        .read("recovery.approvals", store::approvals::pending)
        .await?;
    for (request_id, _session_id) in pending {
        let rid = request_id.clone();
        log.write_later(move |c| {
            store::approvals::resolve(c, &rid, "deny", "interrupted", &now_iso())
        });
        log.notify(
            "approval.resolved",
            json!({ "requestId": request_id, "decision": "deny", "by": "interrupted" }),
        );
    }
    Ok(log.flush().await?)
}

/// The payload of a synthetic `turn.done` (for tests and tools that look for it).
pub fn synthetic_turn_done(turn_id: &str) -> Value {
    json!({ "turnId": turn_id, "reason": "interrupted", "synthetic": true })
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
