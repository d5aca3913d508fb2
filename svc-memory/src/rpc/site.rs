//! `SiteService` (`site.*`): the generated trait over [`SiteApi`]; each call reads the
//! caller's context, delegates and maps the error.

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::memory::v1 as pb;
use snowpea_proto::memory::v1::site_service_server::{SiteService, SiteServiceServer};
use tonic::{Request, Response, Status};

use crate::error::Error;
use crate::site::api::SiteApi;
use crate::App;

/// The `SiteService` implementation.
#[derive(Debug, Clone)]
pub struct SiteRpc {
    api: SiteApi,
}

impl SiteRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        SiteRpc {
            api: SiteApi::new(app),
        }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> SiteServiceServer<Self> {
        SiteServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl SiteService for SiteRpc {
    async fn put(
        &self,
        req: Request<pb::SitePutParams>,
    ) -> Result<Response<pb::SitePutResult>, Status> {
        let ctx = CallContext::of(&req);
        reply(self.api.put(&ctx, req.into_inner()).await)
    }

    async fn get(
        &self,
        req: Request<pb::SiteGetParams>,
    ) -> Result<Response<pb::SiteGetResult>, Status> {
        let ctx = CallContext::of(&req);
        reply(self.api.get(&ctx, req.into_inner()).await)
    }

    async fn list(
        &self,
        req: Request<pb::SiteListParams>,
    ) -> Result<Response<pb::SiteListResult>, Status> {
        let ctx = CallContext::of(&req);
        reply(self.api.list(&ctx, req.into_inner()).await)
    }

    async fn mark(
        &self,
        req: Request<pb::SiteMarkParams>,
    ) -> Result<Response<pb::SiteMarkResult>, Status> {
        let ctx = CallContext::of(&req);
        reply(self.api.mark(&ctx, req.into_inner()).await)
    }

    async fn mark_part(
        &self,
        req: Request<pb::SiteMarkPartParams>,
    ) -> Result<Response<pb::SiteMarkPartResult>, Status> {
        let ctx = CallContext::of(&req);
        reply(self.api.mark_part(&ctx, req.into_inner()).await)
    }

    async fn delete(
        &self,
        req: Request<pb::SiteDeleteParams>,
    ) -> Result<Response<pb::SiteDeleteResult>, Status> {
        let ctx = CallContext::of(&req);
        reply(self.api.delete(&ctx, req.into_inner()).await)
    }
}

/// The one mapping of this boundary: a result, or the protocol error of [`Error`].
fn reply<T>(r: crate::error::Result<T>) -> Result<Response<T>, Status> {
    r.map(Response::new).map_err(Error::into_status)
}
