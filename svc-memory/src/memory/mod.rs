//! [`MemoryApi`]: the logic of `memory.write`, `memory.search`, `memory.list`,
//! `memory.delete`, `memory.ingest` (spec "memory.*", issue 4 "Memory");
//! `rpc/memory.rs` only implements the generated trait over it.

use std::sync::Arc;

use snowpea_proto::memory::v1 as pb;

use crate::error::{Error, Result};
use crate::namespace::{list_scopes, Namespace};
use crate::rpc::{blocking, limit};
use crate::store::memories::{self, Memory, NewMemory};
use crate::{ingest, App};

/// Longest memory text, in bytes.
pub const MAX_TEXT: usize = 64 * 1024;
/// Most tags of one memory.
pub const MAX_TAGS: usize = 32;
/// (default, largest) `limit` of `memory.search` (the default is the setting
/// `memory.searchLimit`, [`crate::config`]).
pub const SEARCH_LIMIT: (usize, usize) = (10, 100);
/// (default, largest) `limit` of `memory.list`.
pub const LIST_LIMIT: (usize, usize) = (50, 500);

/// The `memory.*` logic over the service state; one method per JSON-RPC method.
#[derive(Debug, Clone)]
pub struct MemoryApi {
    app: Arc<App>,
}

/// Checks `memory.write`'s params and builds the row.
pub fn new_memory(p: &pb::MemoryWriteParams) -> Result<NewMemory> {
    let ns = Namespace::parse(p.namespace.as_deref(), "params.namespace")?;
    if p.text.trim().is_empty() {
        return Err(Error::invalid("params.text", "is required"));
    }
    if p.text.len() > MAX_TEXT {
        return Err(Error::invalid(
            "params.text",
            format!("at most {MAX_TEXT} bytes"),
        ));
    }
    if p.tags.len() > MAX_TAGS {
        return Err(Error::invalid(
            "params.tags",
            format!("at most {MAX_TAGS} tags"),
        ));
    }
    let mut tags: Vec<String> = Vec::with_capacity(p.tags.len());
    for (i, t) in p.tags.iter().enumerate() {
        let t = t.trim();
        if t.is_empty() || t.len() > 64 || t.chars().any(char::is_control) {
            return Err(Error::invalid(
                format!("params.tags[{i}]"),
                "a tag is 1–64 printable characters",
            ));
        }
        if !tags.iter().any(|x| x == t) {
            tags.push(t.to_owned());
        }
    }
    let now = jiff::Timestamp::now();
    Ok(NewMemory {
        id: snowpea_common::ids::new_id("mem"),
        namespace: ns.key(),
        text: p.text.clone(),
        tags,
        created_ms: now.as_millisecond(),
        created_at: format!("{now:.3}"),
        ..Default::default()
    })
}

fn hit(m: Memory) -> pb::MemoryHit {
    pb::MemoryHit {
        project: m.namespace.project_root().to_owned(),
        scope: m.namespace.scope().to_owned(),
        score: m.score,
        id: m.id,
        tags: m.tags,
        text: m.text,
    }
}

fn entry(m: Memory) -> pb::Memory {
    pb::Memory {
        created_at: m.created_at,
        project: m.namespace.project_root().to_owned(),
        scope: m.namespace.scope().to_owned(),
        id: m.id,
        tags: m.tags,
        text: m.text,
    }
}

impl MemoryApi {
    /// The logic over `app`.
    pub fn new(app: Arc<App>) -> Self {
        MemoryApi { app }
    }

    /// `memory.write`.
    pub async fn write(&self, p: pb::MemoryWriteParams) -> Result<pb::MemoryWriteResult> {
        let app = self.app.clone();
        let id = blocking("memory.write", move || {
            let row = new_memory(&p)?;
            app.store.write(|tx| memories::insert(tx, &row))?;
            Ok(row.id)
        })
        .await?;
        Ok(pb::MemoryWriteResult { id })
    }

    /// `memory.search`.
    pub async fn search(&self, p: pb::MemorySearchParams) -> Result<pb::MemorySearchResult> {
        let app = self.app.clone();
        let hits = blocking("memory.search", move || {
            let ns = Namespace::parse(p.namespace.as_deref(), "params.namespace")?;
            if p.query.trim().is_empty() {
                return Err(Error::invalid("params.query", "is required"));
            }
            let n = limit(p.limit, app.recall().search_limit, SEARCH_LIMIT.1)?;
            app.store.read(|c| memories::search(c, &[ns], &p.query, n))
        })
        .await?;
        Ok(pb::MemorySearchResult {
            hits: hits.into_iter().map(hit).collect(),
        })
    }

    /// `memory.list`.
    pub async fn list(&self, p: pb::MemoryListParams) -> Result<pb::MemoryListResult> {
        let session = match p.session_id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => Some(self.app.sessions.scope(id).await?),
            None => None,
        };
        let app = self.app.clone();
        let entries = blocking("memory.list", move || {
            let project = p
                .project
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(|r| crate::namespace::project_root(r, "params.project"))
                .transpose()?
                .or(session.as_ref().map(|s| s.project.clone()));
            let agent = session.as_ref().and_then(|s| s.agent.as_deref());
            let namespaces = list_scopes(
                p.scope.as_deref().filter(|s| !s.is_empty()),
                project.as_deref(),
                agent,
            )?;
            let n = limit(p.limit, LIST_LIMIT.0, LIST_LIMIT.1)?;
            match p.query.as_deref().filter(|q| !q.trim().is_empty()) {
                Some(q) => app.store.read(|c| memories::search(c, &namespaces, q, n)),
                None => app.store.read(|c| memories::recent(c, &namespaces, n)),
            }
        })
        .await?;
        Ok(pb::MemoryListResult {
            entries: entries.into_iter().map(entry).collect(),
        })
    }

    /// `memory.delete`.
    pub async fn delete(&self, p: pb::MemoryDeleteParams) -> Result<pb::MemoryDeleteResult> {
        let app = self.app.clone();
        let removed = blocking("memory.delete", move || {
            match p.source.as_deref().filter(|s| !s.is_empty()) {
                // An id names one page memory: only that one goes (never the whole namespace).
                Some("browser") if p.id.as_deref().is_some_and(|s| !s.is_empty()) => {
                    let id = p.id.as_deref().unwrap_or_default();
                    let deleted = app.store.write(|tx| {
                        if memories::namespace_of(tx, id)?.as_deref() == Some("browser") {
                            memories::delete_id(tx, id)
                        } else {
                            Ok(false)
                        }
                    })?;
                    if deleted {
                        Ok(1)
                    } else {
                        Err(Error::NotFound(format!("no browser memory {id}")))
                    }
                }
                Some("browser") => {
                    let f = ingest::browser_filter(p.url.as_deref(), p.before.as_deref())?;
                    ingest::forget(&app.store, &f)
                }
                Some(_) => Err(Error::invalid("params.source", "must be \"browser\"")),
                None => {
                    let id = p.id.as_deref().filter(|s| !s.is_empty()).ok_or_else(|| {
                        Error::invalid(
                            "params.id",
                            "name the memory to forget, or use source: \"browser\"",
                        )
                    })?;
                    if app.store.write(|tx| memories::delete_id(tx, id))? {
                        Ok(1)
                    } else {
                        Err(Error::NotFound(format!("no memory {id}")))
                    }
                }
            }
        })
        .await?;
        Ok(pb::MemoryDeleteResult {
            ok: true,
            removed: removed as i64,
        })
    }

    /// `memory.ingest`.
    pub async fn ingest(&self, p: pb::MemoryIngestParams) -> Result<pb::MemoryIngestResult> {
        let app = self.app.clone();
        let out = blocking("memory.ingest", move || {
            ingest::ingest(&app.store, &p.items, p.session_id.as_deref())
        })
        .await?;
        Ok(pb::MemoryIngestResult {
            added: out.added as i64,
            removed: 0,
            skipped: out.skipped as i64,
        })
    }
}
