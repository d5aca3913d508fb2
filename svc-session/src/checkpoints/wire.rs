//! Checkpoint rows as the generated protocol messages: the `checkpoint.list` item and the
//! `checkpoint.updated` payload (the same manifest shape), the skipped items of
//! `checkpoint.restore` and `checkpoint.restored`.

use snowpea_proto::session::v1 as pb;

use crate::store::checkpoints::CheckpointRow;

/// Defines `fn $name(&CheckpointRow) -> $ty`, the manifest message `$ty` (with file
/// messages `$file`) of a row; the list item and the event payload share the shape.
macro_rules! manifest_fn {
    ($name:ident, $ty:path, $file:path) => {
        fn $name(row: &CheckpointRow) -> $ty {
            type M = $ty;
            type F = $file;
            M {
                created_at: row.created_at.clone(),
                files: row
                    .files
                    .iter()
                    .map(|f| F {
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
    };
}

manifest_fn!(
    list_manifest,
    pb::checkpoint_list_result::Checkpoint,
    pb::checkpoint_list_result::checkpoint::File
);
manifest_fn!(
    event_manifest,
    pb::checkpoint_updated_event::Checkpoint,
    pb::checkpoint_updated_event::checkpoint::File
);

/// The `checkpoint.list` item of a row.
pub fn list_item(row: &CheckpointRow) -> pb::checkpoint_list_result::Checkpoint {
    list_manifest(row)
}

/// The `checkpoint.updated` event of a row (the whole manifest so far).
pub fn updated_event(row: &CheckpointRow) -> pb::CheckpointUpdatedEvent {
    pb::CheckpointUpdatedEvent {
        checkpoint: Some(event_manifest(row)),
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
            .map(|s| pb::checkpoint_restore_result::SkippedItem {
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
        skipped: r
            .skipped
            .iter()
            .map(|s| pb::checkpoint_restored_event::SkippedItem {
                path: s.path.clone(),
                reason: s.reason.clone(),
            })
            .collect(),
        ..Default::default()
    }
}
