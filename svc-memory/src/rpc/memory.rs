//! `MemoryService`: `memory.write`, `memory.search`, `memory.list`, `memory.delete`,
//! `memory.ingest` (spec "memory.*", issue 4 "Memory").

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::memory::v1 as pb;
use snowpea_proto::memory::v1::memory_service_server::{MemoryService, MemoryServiceServer};
use tonic::{Request, Response, Status};

use super::{blocking, limit, span};
use crate::error::{Error, Result};
use crate::namespace::{list_scopes, Namespace};
use crate::store::memories::{self, Memory, NewMemory};
use crate::{ingest, App};

/// Longest memory text, in bytes.
pub const MAX_TEXT: usize = 64 * 1024;
/// Most tags of one memory.
pub const MAX_TAGS: usize = 32;
/// (default, largest) `limit` of `memory.search`.
pub const SEARCH_LIMIT: (usize, usize) = (10, 100);
/// (default, largest) `limit` of `memory.list`.
pub const LIST_LIMIT: (usize, usize) = (50, 500);

/// The `snowpea.memory.v1.MemoryService` server.
#[derive(Debug, Clone)]
pub struct MemoryRpc {
    app: Arc<App>,
}

impl MemoryRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        MemoryRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> MemoryServiceServer<Self> {
        MemoryServiceServer::new(self)
    }
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

fn hit(m: Memory) -> pb::memory_search_result::Hit {
    pb::memory_search_result::Hit {
        project: m.namespace.project_root().to_owned(),
        scope: m.namespace.scope().to_owned(),
        score: m.score,
        id: m.id,
        tags: m.tags,
        text: m.text,
    }
}

fn entry(m: Memory) -> pb::memory_list_result::Entry {
    pb::memory_list_result::Entry {
        created_at: m.created_at,
        project: m.namespace.project_root().to_owned(),
        scope: m.namespace.scope().to_owned(),
        id: m.id,
        tags: m.tags,
        text: m.text,
    }
}

#[tonic::async_trait]
impl MemoryService for MemoryRpc {
    async fn write(
        &self,
        req: Request<pb::MemoryWriteParams>,
    ) -> Result<Response<pb::MemoryWriteResult>, Status> {
        let span = span("memory.write", &CallContext::of(&req));
        let app = self.app.clone();
        let p = req.into_inner();
        let id = blocking(span, move || {
            let row = new_memory(&p)?;
            app.store.write(|tx| memories::insert(tx, &row))?;
            Ok(row.id)
        })
        .await?;
        Ok(Response::new(pb::MemoryWriteResult { id }))
    }

    async fn search(
        &self,
        req: Request<pb::MemorySearchParams>,
    ) -> Result<Response<pb::MemorySearchResult>, Status> {
        let span = span("memory.search", &CallContext::of(&req));
        let app = self.app.clone();
        let p = req.into_inner();
        let hits = blocking(span, move || {
            let ns = Namespace::parse(p.namespace.as_deref(), "params.namespace")?;
            if p.query.trim().is_empty() {
                return Err(Error::invalid("params.query", "is required"));
            }
            let n = limit(p.limit, SEARCH_LIMIT.0, SEARCH_LIMIT.1)?;
            app.store.read(|c| memories::search(c, &[ns], &p.query, n))
        })
        .await?;
        Ok(Response::new(pb::MemorySearchResult {
            hits: hits.into_iter().map(hit).collect(),
        }))
    }

    async fn list(
        &self,
        req: Request<pb::MemoryListParams>,
    ) -> Result<Response<pb::MemoryListResult>, Status> {
        let ctx = CallContext::of(&req);
        let span = span("memory.list", &ctx);
        let p = req.into_inner();
        let session = match p.session_id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => Some(
                self.app
                    .sessions
                    .scope(id)
                    .await
                    .map_err(Error::into_status)?,
            ),
            None => None,
        };
        let app = self.app.clone();
        let entries = blocking(span, move || {
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
        Ok(Response::new(pb::MemoryListResult {
            entries: entries.into_iter().map(entry).collect(),
        }))
    }

    async fn delete(
        &self,
        req: Request<pb::MemoryDeleteParams>,
    ) -> Result<Response<pb::MemoryDeleteResult>, Status> {
        let span = span("memory.delete", &CallContext::of(&req));
        let app = self.app.clone();
        let p = req.into_inner();
        let removed = blocking(span, move || {
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
        Ok(Response::new(pb::MemoryDeleteResult {
            ok: true,
            removed: removed as i64,
        }))
    }

    async fn ingest(
        &self,
        req: Request<pb::MemoryIngestParams>,
    ) -> Result<Response<pb::MemoryIngestResult>, Status> {
        let span = span("memory.ingest", &CallContext::of(&req));
        let app = self.app.clone();
        let p = req.into_inner();
        let out = blocking(span, move || {
            ingest::ingest(&app.store, &p.items, p.session_id.as_deref())
        })
        .await?;
        Ok(Response::new(pb::MemoryIngestResult {
            added: out.added as i64,
            removed: 0,
            skipped: out.skipped as i64,
        }))
    }
}
