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

use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;

use crate::events::EventLog;
use crate::session::Registry;
use crate::store::{self, Store};
use snowpea_session_error::Result;

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
            log.event(
                &turn.session_id,
                host.clone(),
                &pb::TurnDequeuedEvent {
                    turn_id: turn.turn_id.clone(),
                    reason: "dropped".into(),
                    queued: 0,
                    ..Default::default()
                },
                &[],
            );
        }
        log.event(
            &turn.session_id,
            host,
            &synthetic_turn_done(&turn.turn_id),
            &[],
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
        log.publish(&pb::ApprovalResolvedNotification {
            request_id,
            decision: "deny".into(),
            by: "interrupted".into(),
        });
    }
    Ok(log.flush().await?)
}

/// The synthetic `turn.done` that closes the turn `turn_id` a crash left open.
pub fn synthetic_turn_done(turn_id: &str) -> pb::TurnDoneEvent {
    pb::TurnDoneEvent {
        turn_id: turn_id.to_owned(),
        reason: "interrupted".into(),
        synthetic: true,
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
