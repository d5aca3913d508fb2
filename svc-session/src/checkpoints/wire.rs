//! Checkpoint rows as the generated protocol messages: the manifest (`Checkpoint`, the
//! `checkpoint.list` item and the `checkpoint.updated` payload), the skipped items
//! (`CheckpointSkip`) of `checkpoint.restore` and `checkpoint.restored`.

use snowpea_proto::session::v1 as pb;

use crate::store::checkpoints::CheckpointRow;

/// The manifest message of a row (the `checkpoint.list` item and the `checkpoint.updated`
/// payload share it).
pub fn manifest(row: &CheckpointRow) -> pb::Checkpoint {
    pb::Checkpoint {
        created_at: row.created_at.clone(),
        files: row
            .files
            .iter()
            .map(|f| pb::checkpoint::File {
                after_sha: f.after_sha.clone(),
                before_sha: f.before_sha.clone(),
                path: f.path.clone(),
                restorable: f.restorable,
                size: f.size,
                skipped: f.skipped.clone(),
                source: f.source.clone(),
                status: f.status.clone(),
            })
            .collect(),
        id: row.id.clone(),
        kind: row.kind.clone(),
        prompt: row.prompt.clone(),
        session_id: row.session_id.clone(),
        turn_id: row.turn_id.clone(),
        workdir: row.workdir.clone(),
    }
}

/// The `checkpoint.updated` event of a row (the whole manifest so far).
pub fn updated_event(row: &CheckpointRow) -> pb::CheckpointUpdatedEvent {
    pb::CheckpointUpdatedEvent {
        checkpoint: Some(manifest(row)),
        ..Default::default()
    }
}

/// A path a restore did not touch and why (`changed_since`, `not_restorable`,
/// `missing_blob`, `excluded`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Workdir-relative path.
    pub path: String,
    /// The reason, as the protocol spells it.
    pub reason: &'static str,
}

/// The `checkpoint.restore` result.
pub fn restore_result(
    checkpoint_id: Option<String>,
    restored: Vec<String>,
    skipped: &[Skipped],
) -> pb::CheckpointRestoreResult {
    pb::CheckpointRestoreResult {
        checkpoint_id,
        restored,
        skipped: skipped
            .iter()
            .map(|s| pb::CheckpointSkip {
                path: s.path.clone(),
                reason: s.reason.into(),
            })
            .collect(),
    }
}

/// The `checkpoint.restored` event of a restore result.
pub fn restored_event(r: &pb::CheckpointRestoreResult) -> pb::CheckpointRestoredEvent {
    pb::CheckpointRestoredEvent {
        checkpoint_id: r.checkpoint_id.clone(),
        restored: r.restored.clone(),
        skipped: r.skipped.clone(),
        ..Default::default()
    }
}
