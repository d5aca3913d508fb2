//! Sessions on disk (issue 16): `session.deleteSaved` and `session.artifacts`.
//!
//! `session.deleteSaved{sessionId | workdir | all, deleteWorkspace}`:
//! * exactly one of `sessionId`, `workdir`, `all` selects what goes;
//! * one session by id: a live session that is idle is closed first; a running one (a turn
//!   running or prompts waiting) is `session_busy` and nothing is deleted; an unknown id is
//!   `not_found`;
//! * by workdir or all: every session rooted there (or everywhere), open ones included —
//!   an idle open session is closed and deleted as by id, so its chat bindings go too
//!   (issue 32 item 10: skipping them left their `gateway.bind` bindings behind); skipped
//!   are a running session (as by id, where it is `session_busy`), the sessions it was
//!   delegated from (they would take it along), and named agents' sessions (kind `agent`,
//!   deleted by `agent.delete`);
//! * each goes with its rows (session, events, turns, approvals), its checkpoints and, with
//!   `deleteWorkspace`, its workspace (`tmp/`, `artifacts/`, `audio/`, attachments);
//!   `sessions.changed{reason:"deleted"}` for each; the answer counts them;
//! * a session's subagent children (`parentSessionId`) go with it, and are not counted;
//! * svc-chat is told, so `gateway.bind` bindings targeting a deleted session are removed.
//!
//! `session.artifacts`: the files under the workspace's `artifacts/`, recursively, newest
//! first, at most [`MAX_ARTIFACTS`], with size, mtime and a MIME type guessed from the name.

use std::path::Path;

use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;

use super::Sessions;
use crate::store;
use snowpea_session_error::{Error, Result};

/// Most entries `session.artifacts` returns.
pub const MAX_ARTIFACTS: usize = 500;

impl Sessions {
    /// `session.deleteSaved` (module doc).
    pub async fn delete_saved(
        &self,
        p: pb::SessionDeleteSavedParams,
    ) -> Result<pb::SessionDeleteSavedResult> {
        let id = p
            .session_id
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let workdir = p
            .workdir
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let chosen = [id.is_some(), workdir.is_some(), p.all]
            .iter()
            .filter(|b| **b)
            .count();
        if chosen != 1 {
            return Err(Error::invalid(
                "params.sessionId",
                "give exactly one of sessionId, workdir or all",
            ));
        }
        let ids: Vec<String> = if let Some(id) = id {
            if self.registry.row(id).await?.is_none() {
                return Err(Error::NotFound(format!("no session {id:?}")));
            }
            if let Ok(live) = self.get(id) {
                let st = live.turns();
                if st.running.is_some() || st.waiting() > 0 {
                    return Err(Error::SessionBusy(format!(
                        "session {id} is running; interrupt it before deleting it"
                    )));
                }
            }
            vec![id.to_owned()]
        } else {
            let wd = workdir.map(|w| {
                std::fs::canonicalize(w)
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| w.to_owned())
            });
            if let Some(w) = &wd {
                if !Path::new(w).is_absolute() {
                    return Err(Error::invalid(
                        "params.workdir",
                        format!("must be an absolute path, got {w:?}"),
                    ));
                }
            }
            let rows = self
                .store
                .read("session.deleteSaved", |c| store::sessions::list(c, true))
                .await?;
            self.bulk_deletable(rows, wd.as_deref())
        };
        let mut deleted = 0;
        for sid in ids {
            if self.delete_with(&sid, p.delete_workspace).await? {
                deleted += 1;
            }
        }
        Ok(pb::SessionDeleteSavedResult { deleted })
    }

    /// The sessions a bulk `session.deleteSaved` (`workdir`, or `all` when `workdir` is
    /// `None`) deletes: every one rooted there, open ones included (closed first, so their
    /// chat bindings go too), except a running one (a turn running or prompts waiting), the
    /// sessions it was delegated from (deleting them would take it along), and named agents'
    /// sessions (`agent.delete` owns those).
    fn bulk_deletable(
        &self,
        rows: Vec<store::sessions::SessionRow>,
        workdir: Option<&str>,
    ) -> Vec<String> {
        let parents: std::collections::HashMap<&str, Option<&str>> = rows
            .iter()
            .map(|r| (r.id.as_str(), r.parent_session_id.as_deref()))
            .collect();
        let mut kept = std::collections::HashSet::new();
        for r in &rows {
            let running = self.get(&r.id).is_ok_and(|live| {
                let st = live.turns();
                st.running.is_some() || st.waiting() > 0
            });
            if !running {
                continue;
            }
            // The running session and every ancestor (bounded: rows may form no cycle, but
            // a broken one must not spin).
            let mut at = Some(r.id.as_str());
            let mut hops = 0;
            while let Some(id) = at {
                if !kept.insert(id.to_owned()) || hops > crate::turn::MAX_DELEGATION_CHAIN {
                    break;
                }
                hops += 1;
                at = parents.get(id).copied().flatten();
            }
        }
        rows.iter()
            .filter(|r| workdir.is_none_or(|w| w == r.workdir))
            .filter(|r| r.kind() != store::sessions::KIND_AGENT)
            .filter(|r| !kept.contains(&r.id))
            .map(|r| r.id.clone())
            .collect()
    }

    /// Closes (when live) and deletes session `id` with its rows and checkpoints, and with
    /// `workspace` its workspace folder; `sessions.changed{reason:"deleted"}`. False when
    /// there is no such session.
    /// A subagent child (`parentSessionId` = `id`) goes first, with its own children.
    pub async fn delete_with(&self, id: &str, workspace: bool) -> Result<bool> {
        Box::pin(self.delete_tree(id, workspace, 0)).await
    }

    async fn delete_tree(&self, id: &str, workspace: bool, depth: usize) -> Result<bool> {
        if depth < crate::turn::MAX_DELEGATION_CHAIN {
            let parent = id.to_owned();
            let children = self
                .store
                .read("session.deleteSaved", move |c| {
                    store::sessions::children(c, &parent)
                })
                .await?;
            for child in children {
                Box::pin(self.delete_tree(&child, workspace, depth + 1)).await?;
            }
        }
        if self.get(id).is_ok() {
            self.close(id).await?;
        }
        let Some(row) = self.registry.row(id).await? else {
            return Ok(false);
        };
        let sid = id.to_owned();
        self.log
            .write(move |c| {
                c.execute("DELETE FROM events WHERE session_id = ?1", [&sid])?;
                c.execute("DELETE FROM turns WHERE session_id = ?1", [&sid])?;
                c.execute("DELETE FROM approvals WHERE session_id = ?1", [&sid])?;
                c.execute("DELETE FROM sessions WHERE id = ?1", [&sid])?;
                Ok(())
            })
            .await?;
        if workspace && !row.workspace_dir.is_empty() {
            let ws = Path::new(&row.workspace_dir);
            // Only a folder of this home's sessions, never somewhere a row could point.
            if ws.starts_with(self.home.sessions_dir()) {
                if let Err(e) = std::fs::remove_dir_all(ws) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        tracing::warn!(session_id = %id, error = %e, "workspace not removed");
                    }
                }
            }
        }
        self.checkpoints.delete_session(id).await?;
        crate::attachments::Attachments::new(self.home.clone()).delete_session(id);
        crate::host_tools::content::ContentStore::new(self.home.root()).remove_session(id);
        self.log.publish(&pb::SessionsChangedNotification {
            session_id: id.to_owned(),
            reason: "deleted".into(),
            status: None,
            title: row.title.clone(),
            host_tools_from: row.host_tools_from.clone(),
            browser_provider: None,
        });
        self.log.flush().await?;
        // Chat bindings targeting it go too.
        crate::clients::chat::target_removed(
            &self.home,
            crate::clients::chat::Removed::Session(id.to_owned()),
        );
        tracing::info!(session_id = %id, workspace, at = %now_iso(), "session deleted");
        Ok(true)
    }

    /// `session.artifacts` (module doc); works for saved sessions too.
    pub async fn artifacts(
        &self,
        p: pb::SessionArtifactsParams,
    ) -> Result<pb::SessionArtifactsResult> {
        let row = self
            .registry
            .row(&p.session_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no session {:?}", p.session_id)))?;
        let ws = std::path::PathBuf::from(&row.workspace_dir);
        let root = ws.join("artifacts");
        let mut artifacts = tokio::task::spawn_blocking(move || list_artifacts(&root))
            .await
            .map_err(|e| Error::Internal(anyhow::anyhow!("artifacts listing: {e}")))?;
        artifacts.sort_by_key(|a| std::cmp::Reverse(a.1));
        artifacts.truncate(MAX_ARTIFACTS);
        Ok(pb::SessionArtifactsResult {
            artifacts: artifacts.into_iter().map(|(a, _)| a).collect(),
            workspace_dir: row.workspace_dir,
        })
    }
}

/// Every file under `root` (symlinks not followed) with its mtime for sorting.
fn list_artifacts(
    root: &Path,
) -> Vec<(
    pb::session_artifacts_result::Artifact,
    std::time::SystemTime,
)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            let path = e.path();
            if meta.is_dir() {
                stack.push(path);
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            let mtime = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
            let name = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            let modified_at = jiff::Timestamp::try_from(mtime)
                .map(|t| t.to_string())
                .unwrap_or_default();
            out.push((
                pb::session_artifacts_result::Artifact {
                    mime_type: mime_guess::from_path(&path).first().map(|m| m.to_string()),
                    modified_at,
                    name,
                    path: path.to_string_lossy().into_owned(),
                    size: meta.len() as i64,
                },
                mtime,
            ));
            if out.len() >= 10 * MAX_ARTIFACTS {
                return out;
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "saved_tests.rs"]
mod tests;
