//! Sessions' use of svc-memory (issue 4 "Sessions use it"): a [`MemoryClient`] over the
//! memory socket with a short deadline on every call, recall of the top matches for a
//! user message from the session's project, agent and global namespaces (count from the
//! setting `memory.top_k`, default 8), and the agent tools `save_memory` / `search_memory`
//! ([`crate::tools::memory`]). svc-memory being down never fails a turn: recall is skipped with a logged
//! warning and the tools answer with a clear error.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use snowpea_proto::error::RpcError;
use snowpea_proto::memory::v1::memory_service_client::MemoryServiceClient;
use snowpea_proto::memory::v1::MemoryHit;
use snowpea_proto::memory::v1::{MemoryDeleteParams, MemorySearchParams, MemoryWriteParams};
use tonic::transport::Channel;

/// Deadline of one call to svc-memory.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Recall count when the setting `memory.top_k` is absent.
pub const DEFAULT_TOP_K: usize = 8;

/// Why a call to svc-memory failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MemoryError {
    /// svc-memory is down, restarting, or did not answer within [`CALL_TIMEOUT`].
    #[error("the memory service is unavailable ({0}); try again shortly")]
    Unavailable(String),
    /// svc-memory answered with a protocol error (e.g. `invalid_params`).
    #[error("the memory service refused the call: {}", .0.message)]
    Refused(RpcError),
}

/// A lazily connecting client of svc-memory (reconnects after a restart).
#[derive(Debug, Clone)]
pub struct MemoryClient {
    channel: Channel,
    timeout: Duration,
}

/// The namespaces a session recalls from: its project, its agent (if any), global.
pub fn session_namespaces(project_root: &str, agent: Option<&str>) -> Vec<String> {
    let mut v = vec![format!("project:{project_root}")];
    if let Some(a) = agent.filter(|a| !a.is_empty()) {
        v.push(format!("agent:{a}"));
    }
    v.push("default".to_owned());
    v
}

/// `memory.top_k` from the effective settings (default [`DEFAULT_TOP_K`]; 0 disables
/// recall, and so does `memory.enabled: false`).
pub fn top_k(settings: &Value) -> usize {
    if snowpea_common::settings::get(settings, "memory.enabled") == Some(&Value::Bool(false)) {
        return 0;
    }
    snowpea_common::settings::get(settings, "memory.top_k")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_TOP_K, |n| n.min(100) as usize)
}

/// The recalled memories as a block for the system prompt; `None` when there are none.
pub fn recall_block(memories: &[String]) -> Option<String> {
    if memories.is_empty() {
        return None;
    }
    let mut s = String::from(
        "\n\nRelevant memories (saved earlier by the user or by you; they may be outdated):\n",
    );
    for m in memories {
        s.push_str("- ");
        s.push_str(&m.replace('\n', " "));
        s.push('\n');
    }
    Some(s)
}

impl MemoryClient {
    /// A client of the svc-memory socket (`$SNOWPEA_HOME/run/memory.sock`). Must be called
    /// inside a tokio runtime (the channel connects lazily on it).
    pub fn new(socket: PathBuf) -> Self {
        MemoryClient {
            channel: snowpea_common::client::unix_channel(socket),
            timeout: CALL_TIMEOUT,
        }
    }

    /// The same client with another per-call deadline.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn deadline<T>(
        &self,
        f: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, MemoryError> {
        match tokio::time::timeout(self.timeout, f).await {
            Err(_) => Err(MemoryError::Unavailable(format!(
                "no answer within {:?}",
                self.timeout
            ))),
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => {
                let e = RpcError::from_status(&s);
                if e.code == snowpea_proto::error::ErrorCode::Unavailable {
                    Err(MemoryError::Unavailable(s.message().to_owned()))
                } else {
                    Err(MemoryError::Refused(e))
                }
            }
        }
    }

    /// `memory.write` into `namespace`; returns the new id.
    pub async fn write(
        &self,
        namespace: &str,
        text: &str,
        tags: Vec<String>,
    ) -> Result<String, MemoryError> {
        let mut c = MemoryServiceClient::new(self.channel.clone())
            .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST);
        let p = MemoryWriteParams {
            namespace: Some(namespace.to_owned()),
            tags,
            text: text.to_owned(),
        };
        Ok(self.deadline(c.write(p)).await?.id)
    }

    /// `memory.delete{id}`: forgets one stored memory. A memory svc-memory does not hold is
    /// [`MemoryError::Refused`] with `not_found`.
    pub async fn delete(&self, id: &str) -> Result<(), MemoryError> {
        let mut c = MemoryServiceClient::new(self.channel.clone())
            .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST);
        let p = MemoryDeleteParams {
            id: Some(id.to_owned()),
            ..Default::default()
        };
        self.deadline(c.delete(p)).await.map(|_| ())
    }

    /// `memory.search` in one namespace.
    pub async fn search(
        &self,
        namespace: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        let mut c = MemoryServiceClient::new(self.channel.clone())
            .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST);
        let p = MemorySearchParams {
            limit: limit as i64,
            namespace: Some(namespace.to_owned()),
            query: query.to_owned(),
        };
        Ok(self.deadline(c.search(p)).await?.hits)
    }

    /// Searches each of `namespaces` (concurrently) and merges the hits best first,
    /// dropping repeated texts; at most `limit`. Fails only when every namespace failed.
    pub async fn search_many(
        &self,
        namespaces: &[String],
        query: &str,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        let results =
            futures::future::join_all(namespaces.iter().map(|ns| self.search(ns, query, limit)))
                .await;
        let mut hits = Vec::new();
        let mut last_err = None;
        for r in results {
            match r {
                Ok(h) => hits.extend(h),
                Err(e) => last_err = Some(e),
            }
        }
        if hits.is_empty() {
            if let Some(e) = last_err {
                return Err(e);
            }
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut seen = std::collections::HashSet::new();
        hits.retain(|h| seen.insert(h.text.clone()));
        hits.truncate(limit);
        Ok(hits)
    }

    /// Recall before a turn: the texts of the `top_k` best memories for `query` from the
    /// session's project, agent and global namespaces. Never fails: when svc-memory is down
    /// the turn runs without recall and a warning is logged.
    pub async fn recall(
        &self,
        project_root: &str,
        agent: Option<&str>,
        query: &str,
        top_k: usize,
    ) -> Vec<String> {
        if top_k == 0 || query.trim().is_empty() {
            return Vec::new();
        }
        match self
            .search_many(&session_namespaces(project_root, agent), query, top_k)
            .await
        {
            Ok(hits) => hits.into_iter().map(|h| h.text).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "memory recall skipped");
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
