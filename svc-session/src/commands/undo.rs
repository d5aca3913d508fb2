//! `/undo [status]`: restores the files of the session's last turn that changed any, through
//! `checkpoint.restore` (so a restore checkpoint is recorded and `/undo` itself can be
//! undone with `checkpoint.restore` of it). `status` is a dry run (read); bare restores
//! (medium_write). Files changed since the turn are skipped unless `--force`. With no turn
//! that changed files, `status` answers "nothing to undo" (a report, not a failure; issue 39
//! item 6) and the bare command fails `NOT_FOUND`.

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/undo`.
pub struct Undo;

impl Builtin for Undo {
    fn name(&self) -> &'static str {
        "undo"
    }
    fn summary(&self) -> &'static str {
        "Restore the files the last turn changed (checkpoint.restore)"
    }
    fn usage(&self) -> &'static str {
        "/undo [status] [--force]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn bare_is_read(&self) -> bool {
        false
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let a = &call.args;
            a.only_options(&["force"]).map_err(Failure::args)?;
            let dry_run = match a.sub() {
                None => false,
                Some("status") => true,
                Some(o) => return Err(Failure::args(format!("unknown /undo subcommand {o:?}"))),
            };
            let list = cx
                .checkpoints
                .list(pb::CheckpointListParams {
                    session_id: call.session.id.clone(),
                })
                .await
                .map_err(Failure::from_error)?;
            let Some(cp) = list.checkpoints.iter().find(|c| c.kind == "turn") else {
                if dry_run {
                    return Ok(Reply::done(
                        "nothing to undo: no turn of this session changed files",
                        json!({"checkpointId": null, "dryRun": true, "restored": [], "skipped": []}),
                    ));
                }
                return Err(Failure::not_found(
                    "nothing to undo: no turn of this session changed files",
                ));
            };
            let r = cx
                .checkpoints
                .restore_in(
                    pb::CheckpointRestoreParams {
                        session_id: call.session.id.clone(),
                        id: cp.id.clone(),
                        dry_run,
                        force: a.options.contains_key("force"),
                        ..Default::default()
                    },
                    Some(&call.turn_id),
                )
                .await
                .map_err(Failure::from_error)?;
            let verb = if dry_run { "would restore" } else { "restored" };
            let mut text = format!("{verb} {} files of checkpoint {}", r.restored.len(), cp.id);
            for p in &r.restored {
                text.push_str(&format!("\n  {p}"));
            }
            for s in &r.skipped {
                text.push_str(&format!("\n  skipped {} ({})", s.path, s.reason));
            }
            let skipped: Vec<_> = r
                .skipped
                .iter()
                .map(|s| json!({"path": s.path, "reason": s.reason}))
                .collect();
            Ok(Reply::done(
                text,
                json!({"checkpointId": cp.id, "dryRun": dry_run, "restored": r.restored, "skipped": skipped, "undoCheckpointId": r.checkpoint_id}),
            ))
        })
    }
}
