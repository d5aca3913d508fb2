//! `SiteService`: `site.put`, `site.get`, `site.list`, `site.mark`, `site.markPart`,
//! `site.delete` (spec "site.*", issue 4 "Site memory"). Who may call what is decided in
//! [`crate::site::auth`]; entries are untrusted page-derived data and are never put in a
//! prompt.

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::memory::v1 as pb;
use snowpea_proto::memory::v1::site_service_server::{SiteService, SiteServiceServer};
use tonic::{Request, Response, Status};

use super::{blocking, limit, span};
use crate::error::Error;
use crate::site::{self, auth};
use crate::App;

/// The `snowpea.memory.v1.SiteService` server.
#[derive(Debug, Clone)]
pub struct SiteRpc {
    app: Arc<App>,
}

impl SiteRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        SiteRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> SiteServiceServer<Self> {
        SiteServiceServer::new(self)
    }
}

#[tonic::async_trait]
impl SiteService for SiteRpc {
    async fn put(
        &self,
        req: Request<pb::SitePutParams>,
    ) -> Result<Response<pb::SitePutResult>, Status> {
        let ctx = CallContext::of(&req);
        let span = span("site.put", &ctx);
        let profile = auth::host_profile(&ctx).map_err(Error::into_status)?;
        let app = self.app.clone();
        let p = req.into_inner();
        let (created, entry_id) = blocking(span, move || {
            let entry = p
                .entry
                .ok_or_else(|| Error::invalid("params.entry", "is required"))?;
            site::put(&app.store, &profile, &p.origin, entry)
        })
        .await?;
        Ok(Response::new(pb::SitePutResult { created, entry_id }))
    }

    async fn get(
        &self,
        req: Request<pb::SiteGetParams>,
    ) -> Result<Response<pb::SiteGetResult>, Status> {
        let ctx = CallContext::of(&req);
        let span = span("site.get", &ctx);
        let profile = auth::host_profile(&ctx).map_err(Error::into_status)?;
        let app = self.app.clone();
        let p = req.into_inner();
        let entries = blocking(span, move || {
            site::get(
                &app.store,
                &profile,
                &p.origin,
                p.page_type.as_deref().filter(|s| !s.is_empty()),
                p.path.as_deref(),
            )
        })
        .await?;
        Ok(Response::new(pb::SiteGetResult { entries }))
    }

    async fn list(
        &self,
        req: Request<pb::SiteListParams>,
    ) -> Result<Response<pb::SiteListResult>, Status> {
        let ctx = CallContext::of(&req);
        let span = span("site.list", &ctx);
        let p = req.into_inner();
        let profile =
            auth::named_profile(&ctx, p.host_tools_from.as_deref()).map_err(Error::into_status)?;
        let app = self.app.clone();
        let (sites, cursor) = blocking(span, move || {
            let n = limit(p.limit, site::LIST_PAGE.0, site::LIST_PAGE.1)?;
            site::list(
                &app.store,
                &profile,
                p.origin.as_deref().filter(|s| !s.is_empty()),
                p.cursor.as_deref(),
                n,
            )
        })
        .await?;
        Ok(Response::new(pb::SiteListResult { cursor, sites }))
    }

    async fn mark(
        &self,
        req: Request<pb::SiteMarkParams>,
    ) -> Result<Response<pb::SiteMarkResult>, Status> {
        let ctx = CallContext::of(&req);
        let span = span("site.mark", &ctx);
        let profile = auth::host_profile(&ctx).map_err(Error::into_status)?;
        let app = self.app.clone();
        let p = req.into_inner();
        let entry = blocking(span, move || {
            if let Some(d) = p.detail.as_deref().filter(|d| !d.is_empty()) {
                tracing::info!(entry_id = %p.entry_id, outcome = %p.outcome, detail = d, "site entry marked");
            }
            site::mark(&app.store, &profile, &p.origin, &p.entry_id, &p.outcome)
        })
        .await?;
        Ok(Response::new(pb::SiteMarkResult { entry: Some(entry) }))
    }

    async fn mark_part(
        &self,
        req: Request<pb::SiteMarkPartParams>,
    ) -> Result<Response<pb::SiteMarkPartResult>, Status> {
        let ctx = CallContext::of(&req);
        let span = span("site.markPart", &ctx);
        let profile = auth::host_profile(&ctx).map_err(Error::into_status)?;
        let app = self.app.clone();
        let p = req.into_inner();
        let entry = blocking(span, move || {
            site::mark_part(
                &app.store,
                &profile,
                &p.origin,
                &p.entry_id,
                &p.part,
                &p.name,
                &p.outcome,
            )
        })
        .await?;
        Ok(Response::new(pb::SiteMarkPartResult { entry: Some(entry) }))
    }

    async fn delete(
        &self,
        req: Request<pb::SiteDeleteParams>,
    ) -> Result<Response<pb::SiteDeleteResult>, Status> {
        let ctx = CallContext::of(&req);
        let span = span("site.delete", &ctx);
        let p = req.into_inner();
        let profile =
            auth::named_profile(&ctx, p.host_tools_from.as_deref()).map_err(Error::into_status)?;
        let app = self.app.clone();
        let deleted = blocking(span, move || {
            site::delete(
                &app.store,
                &profile,
                &p.origin,
                p.entry_id.as_deref().filter(|s| !s.is_empty()),
            )
        })
        .await?;
        Ok(Response::new(pb::SiteDeleteResult {
            deleted: deleted as i64,
        }))
    }
}
