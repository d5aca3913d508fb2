//! How many children of one parent session run at once (issue 19 "Concurrency per parent"):
//! `session.create{maxConcurrent}`, else the project's (or global) `agents.max_concurrent`
//! setting, else [`DEFAULT_MAX_CONCURRENT`]. One semaphore per parent; tokio's semaphore
//! hands permits out first come, first served, so queued children start in spawn order.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Semaphore;

use super::Agents;
use crate::session::Session;

/// `agents.max_concurrent` when nothing sets it.
pub const DEFAULT_MAX_CONCURRENT: usize = 3;
/// Largest limit honoured (as `session.create{maxConcurrent}` allows).
pub const MAX_LIMIT: usize = crate::session::MAX_CONCURRENT as usize;

/// The limit of `parent`: its `maxConcurrent`, else the setting, else the default.
pub fn limit(parent: &Session, settings: &Value) -> usize {
    if let Some(n) = parent.row().max_concurrent.filter(|n| *n > 0) {
        return (n as usize).min(MAX_LIMIT);
    }
    snowpea_common::settings::get(settings, "agents.max_concurrent")
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
        .map_or(DEFAULT_MAX_CONCURRENT, |n| (n as usize).min(MAX_LIMIT))
}

impl Agents {
    /// The slots of `parent` (created on first use with [`limit`]).
    pub(crate) fn slots(&self, parent: &Session) -> Arc<Semaphore> {
        if let Some(s) = self.lock().slots.get(&parent.id) {
            return s.clone();
        }
        let n = limit(parent, &self.settings_of(&parent.workdir()));
        self.lock()
            .slots
            .entry(parent.id.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(n)))
            .clone()
    }
}
