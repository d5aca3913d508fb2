//! A session whose host is not connected (issue 21; spec `sessionTemplate.hostWaitSec`):
//! a scheduled run with `hostToolsFrom` waits up to the job's `hostWaitSec` for a
//! connection of that host with tools, then runs without its tools and tells the model so.
//! svc-scheduler already holds the occurrence (`waiting_for_host`) until the host is
//! there; this covers the host leaving between that check and the turn, and turns the run
//! queues later. A chat session does not wait: its host is the person's own client.

use std::sync::Arc;
use std::time::Duration;

use snowpea_common::bus::ConnectionEvent;
use tokio_util::sync::CancellationToken;

use super::HostTools;
use crate::session::Session;

/// Longest wait accepted (7 days, svc-scheduler's own limit of `hostWaitSec`).
pub const MAX_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);

impl HostTools {
    /// Records how long turns of `session_id` wait for their host (a scheduled run's
    /// `hostWaitSec`).
    pub fn set_host_wait(&self, session_id: &str, wait: Duration) {
        self.waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session_id.to_owned(), wait.min(MAX_WAIT));
    }

    fn host_wait(&self, session_id: &str) -> Option<Duration> {
        self.waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session_id)
            .copied()
    }

    /// Before a turn's first model call: `None` when the session has no `hostToolsFrom` or
    /// its host is connected (after waiting for it as the module doc says); else the note
    /// for the model saying its host tools are missing.
    pub async fn wait_for_host(
        self: &Arc<Self>,
        session: &Session,
        cancel: &CancellationToken,
    ) -> Option<String> {
        let host = session.host_tools_from()?;
        if self.hosts.host_of(&self.hub, session).is_some() {
            return None;
        }
        if let Some(wait) = self.host_wait(&session.id).filter(|w| !w.is_zero()) {
            tracing::info!(session_id = %session.id, host = %host, wait_sec = wait.as_secs(), "waiting for the session's host");
            let mut events = self.hub.connection_events();
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                if self.hosts.host_of(&self.hub, session).is_some() {
                    return None;
                }
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep_until(deadline) => break,
                    // A connection opening (its tools come with tool.register right after).
                    ev = events.recv() => {
                        if let Ok(ConnectionEvent::Opened(_)) | Err(_) = ev {
                            // Re-check below, then wait for tool.register a moment.
                        }
                    }
                    _ = self.registered.notified() => {}
                }
            }
            if self.hosts.host_of(&self.hub, session).is_some() {
                return None;
            }
        }
        Some(format!(
            "[system] The host tools of {host} are not available in this run: that client is not connected. Work without them and say so where they were needed."
        ))
    }
}
