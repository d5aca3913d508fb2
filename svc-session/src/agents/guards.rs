//! The delegation guards (issue 19 "Guards"; upstream-behaviour §4):
//!
//! * `duplicate_task` — the same (agent, task) delegated twice by one parent session is
//!   refused while the first is queued, running or finished well (a failed or interrupted
//!   one may be retried). Tasks compare with whitespace collapsed and case folded.
//! * `file_owned_by_sibling` — the first child of a parent that writes a file owns it; a
//!   sibling's write to it is refused (the tool call fails with that code; nothing runs).
//! * depth — a child of a root session has depth 1; spawning beyond `agents.maxDepth`
//!   (default [`DEFAULT_MAX_DEPTH`]) is refused, so delegation cannot recurse forever.

use std::path::PathBuf;

use serde_json::Value;

use super::Agents;
use crate::session::Session;
use snowpea_session_error::{Error, Result};

/// `agents.maxDepth` when nothing sets it.
pub const DEFAULT_MAX_DEPTH: usize = 2;

/// A task as the duplicate guard compares it.
pub fn normalize_task(task: &str) -> String {
    task.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// `agents.maxDepth` of `settings`.
pub fn max_depth(settings: &Value) -> usize {
    snowpea_common::settings::get(settings, "agents.maxDepth")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_MAX_DEPTH, |n| n as usize)
}

impl Agents {
    /// Delegation depth of `session`: 0 for a root, its run's depth for a child (from the
    /// live runs, else from its parent chain).
    pub fn depth_of(&self, session: &Session) -> usize {
        if let Some(run) = self.run_of_child(&session.id) {
            return run.depth;
        }
        let mut depth = 0;
        let mut parent = session.row().parent_session_id;
        while let Some(p) = parent {
            depth += 1;
            if depth > 64 {
                break;
            }
            parent = self
                .sessions
                .get(&p)
                .ok()
                .and_then(|s| s.row().parent_session_id);
        }
        depth
    }

    /// Refuses a spawn under `parent` beyond the depth limit, or (when `unique`) a
    /// duplicate of a delegation of the same parent (module doc). Returns the child's depth.
    pub(crate) fn check_spawn(
        &self,
        parent: &Session,
        name: &str,
        task: &str,
        unique: bool,
    ) -> Result<usize> {
        let settings = self.settings_of(&parent.workdir());
        let depth = self.depth_of(parent) + 1;
        let max = max_depth(&settings);
        if depth > max {
            return Err(Error::Refused {
                field: "params.sessionId".into(),
                reason: "max_depth",
                message: format!(
                    "session {} is already {} level(s) deep in delegation; agents.maxDepth is {max}, \
                     so it may not delegate further",
                    parent.id,
                    depth - 1
                ),
            });
        }
        if !unique {
            return Ok(depth);
        }
        let wanted = normalize_task(task);
        let st = self.lock();
        if let Some(first) = st.runs.values().find(|r| {
            r.parent_session_id == parent.id
                && r.name == name
                && normalize_task(&r.task) == wanted
                && !matches!(r.status().as_str(), "error" | "interrupted")
        }) {
            return Err(Error::Refused {
                field: "params.task".into(),
                reason: "duplicate_task",
                message: format!(
                    "duplicate_task: {} already delegated this task{} as {} (status {})",
                    parent.id,
                    if name.is_empty() {
                        String::new()
                    } else {
                        format!(" to {name}")
                    },
                    first.agent_id,
                    first.status()
                ),
            });
        }
        Ok(depth)
    }

    /// Before a child session writes `files`: the first child of a parent to write a file
    /// owns it; `Err(message)` when a sibling owns one of them (`file_owned_by_sibling`).
    /// Sessions that are not children are never refused.
    pub fn claim_writes(&self, session: &Session, files: &[PathBuf]) -> Result<(), String> {
        let Some(run) = self.run_of_child(&session.id) else {
            return Ok(());
        };
        let mut st = self.lock();
        for f in files {
            if let Some(owner) = st.owners.get(&(run.parent_session_id.clone(), f.clone())) {
                if *owner != run.agent_id {
                    return Err(format!(
                        "file_owned_by_sibling: {} is owned by sibling subagent {owner} of the same \
                         parent session; this subagent may not write it",
                        f.display()
                    ));
                }
            }
        }
        for f in files {
            st.owners
                .entry((run.parent_session_id.clone(), f.clone()))
                .or_insert_with(|| run.agent_id.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_compare_without_case_or_spacing() {
        assert_eq!(normalize_task("  Fix  the\nBug "), "fix the bug");
        assert_eq!(max_depth(&serde_json::json!({})), DEFAULT_MAX_DEPTH);
        assert_eq!(
            max_depth(&serde_json::json!({"agents": {"maxDepth": 5}})),
            5
        );
    }
}
