//! [`SiteApi`]: the logic of `site.put`, `site.get`, `site.list`, `site.mark`,
//! `site.markPart`, `site.delete` (spec "site.*", issue 4 "Site memory"); `rpc/site.rs`
//! only implements the generated trait over it. Who may call what is decided in
//! [`crate::site::auth`]; entries are untrusted page-derived data and are never put in a
//! prompt.

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::memory::v1 as pb;

use crate::error::{Error, Result};
use crate::rpc::{blocking, limit};
use crate::site::{self, auth};
use crate::App;

/// The `site.*` logic over the service state; one method per JSON-RPC method.
#[derive(Debug, Clone)]
pub struct SiteApi {
    app: Arc<App>,
}

impl SiteApi {
    /// The logic over `app`.
    pub fn new(app: Arc<App>) -> Self {
        SiteApi { app }
    }

    /// `site.put`.
    pub async fn put(&self, ctx: &CallContext, p: pb::SitePutParams) -> Result<pb::SitePutResult> {
        let profile = auth::host_profile(ctx)?;
        let app = self.app.clone();
        let (created, entry_id) = blocking("site.put", move || {
            let entry = p
                .entry
                .ok_or_else(|| Error::invalid("params.entry", "is required"))?;
            site::put(&app.store, &profile, &p.origin, entry)
        })
        .await?;
        Ok(pb::SitePutResult { created, entry_id })
    }

    /// `site.get`.
    pub async fn get(&self, ctx: &CallContext, p: pb::SiteGetParams) -> Result<pb::SiteGetResult> {
        let profile = auth::host_profile(ctx)?;
        let app = self.app.clone();
        let entries = blocking("site.get", move || {
            site::get(
                &app.store,
                &profile,
                &p.origin,
                p.page_type.as_deref().filter(|s| !s.is_empty()),
                p.path.as_deref(),
            )
        })
        .await?;
        Ok(pb::SiteGetResult { entries })
    }

    /// `site.list`.
    pub async fn list(
        &self,
        ctx: &CallContext,
        p: pb::SiteListParams,
    ) -> Result<pb::SiteListResult> {
        let profile = auth::named_profile(ctx, p.host_tools_from.as_deref())?;
        let app = self.app.clone();
        let (sites, cursor) = blocking("site.list", move || {
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
        Ok(pb::SiteListResult { cursor, sites })
    }

    /// `site.mark`.
    pub async fn mark(
        &self,
        ctx: &CallContext,
        p: pb::SiteMarkParams,
    ) -> Result<pb::SiteMarkResult> {
        let profile = auth::host_profile(ctx)?;
        let app = self.app.clone();
        let entry = blocking("site.mark", move || {
            if let Some(d) = p.detail.as_deref().filter(|d| !d.is_empty()) {
                tracing::info!(entry_id = %p.entry_id, outcome = %p.outcome, detail = d, "site entry marked");
            }
            site::mark(&app.store, &profile, &p.origin, &p.entry_id, &p.outcome)
        })
        .await?;
        Ok(pb::SiteMarkResult { entry: Some(entry) })
    }

    /// `site.markPart`.
    pub async fn mark_part(
        &self,
        ctx: &CallContext,
        p: pb::SiteMarkPartParams,
    ) -> Result<pb::SiteMarkPartResult> {
        let profile = auth::host_profile(ctx)?;
        let app = self.app.clone();
        let entry = blocking("site.markPart", move || {
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
        Ok(pb::SiteMarkPartResult { entry: Some(entry) })
    }

    /// `site.delete`.
    pub async fn delete(
        &self,
        ctx: &CallContext,
        p: pb::SiteDeleteParams,
    ) -> Result<pb::SiteDeleteResult> {
        let profile = auth::named_profile(ctx, p.host_tools_from.as_deref())?;
        let app = self.app.clone();
        let deleted = blocking("site.delete", move || {
            site::delete(
                &app.store,
                &profile,
                &p.origin,
                p.entry_id.as_deref().filter(|s| !s.is_empty()),
            )
        })
        .await?;
        Ok(pb::SiteDeleteResult {
            deleted: deleted as i64,
        })
    }
}
