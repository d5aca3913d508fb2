//! `FileService`: `file.complete`, delegating to [`Files`](crate::file::Files).

use std::sync::Arc;

use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::file_service_server::{FileService, FileServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.FileService` server.
#[derive(Debug, Clone)]
pub struct FileRpc {
    app: Arc<App>,
}

impl FileRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        FileRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> FileServiceServer<Self> {
        FileServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl FileService for FileRpc {
    async fn complete(
        &self,
        req: Request<pb::FileCompleteParams>,
    ) -> Result<Response<pb::FileCompleteResult>, Status> {
        Ok(Response::new(
            self.app.files.complete(req.into_inner()).await?,
        ))
    }
}
