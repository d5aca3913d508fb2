//! `MemoryService` (`memory.*`): the generated trait over [`MemoryApi`]; each call delegates
//! and maps the error (the shared call layer opens the span and counts the call).

use std::sync::Arc;

use snowpea_proto::memory::v1 as pb;
use snowpea_proto::memory::v1::memory_service_server::{MemoryService, MemoryServiceServer};
use tonic::{Request, Response, Status};

use crate::error::Error;
use crate::memory::MemoryApi;
use crate::App;

/// The `MemoryService` implementation.
#[derive(Debug, Clone)]
pub struct MemoryRpc {
    api: MemoryApi,
}

impl MemoryRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        MemoryRpc {
            api: MemoryApi::new(app),
        }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> MemoryServiceServer<Self> {
        MemoryServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl MemoryService for MemoryRpc {
    async fn write(
        &self,
        req: Request<pb::MemoryWriteParams>,
    ) -> Result<Response<pb::MemoryWriteResult>, Status> {
        reply(self.api.write(req.into_inner()).await)
    }

    async fn search(
        &self,
        req: Request<pb::MemorySearchParams>,
    ) -> Result<Response<pb::MemorySearchResult>, Status> {
        reply(self.api.search(req.into_inner()).await)
    }

    async fn list(
        &self,
        req: Request<pb::MemoryListParams>,
    ) -> Result<Response<pb::MemoryListResult>, Status> {
        reply(self.api.list(req.into_inner()).await)
    }

    async fn delete(
        &self,
        req: Request<pb::MemoryDeleteParams>,
    ) -> Result<Response<pb::MemoryDeleteResult>, Status> {
        reply(self.api.delete(req.into_inner()).await)
    }

    async fn ingest(
        &self,
        req: Request<pb::MemoryIngestParams>,
    ) -> Result<Response<pb::MemoryIngestResult>, Status> {
        reply(self.api.ingest(req.into_inner()).await)
    }
}

/// The one mapping of this boundary: a result, or the protocol error of [`Error`].
fn reply<T>(r: crate::error::Result<T>) -> Result<Response<T>, Status> {
    r.map(Response::new).map_err(Error::into_status)
}
