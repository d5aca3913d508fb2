//! `AudioService` (`audio.*`): the generated trait over [`AudioApi`]; each call delegates and
//! maps the error (the shared call layer opens the span and counts the call).

use std::sync::Arc;

use snowpea_proto::audio::v1::audio_service_server::{AudioService, AudioServiceServer};
use snowpea_proto::audio::v1::{
    AudioCapabilitiesResult, AudioInstallParams, AudioInstallResult, AudioRecordStartParams,
    AudioRecordStartResult, AudioRecordStopParams, AudioRecordStopResult, AudioSpeakParams,
    AudioSpeakResult, AudioTranscribeParams, AudioTranscribeResult, AudioVoicesParams,
    AudioVoicesResult,
};
use tonic::{Request, Response, Status};

use crate::api::AudioApi;
use crate::error::Error;
use crate::App;

/// The `AudioService` implementation.
#[derive(Debug, Clone)]
pub struct AudioRpc {
    api: AudioApi,
}

impl AudioRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        AudioRpc {
            api: AudioApi::new(app),
        }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> AudioServiceServer<Self> {
        AudioServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl AudioService for AudioRpc {
    async fn capabilities(
        &self,
        _req: Request<()>,
    ) -> Result<Response<AudioCapabilitiesResult>, Status> {
        Ok(Response::new(self.api.capabilities().await))
    }

    async fn voices(
        &self,
        req: Request<AudioVoicesParams>,
    ) -> Result<Response<AudioVoicesResult>, Status> {
        self.api
            .voices(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn speak(
        &self,
        req: Request<AudioSpeakParams>,
    ) -> Result<Response<AudioSpeakResult>, Status> {
        self.api
            .speak(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn transcribe(
        &self,
        req: Request<AudioTranscribeParams>,
    ) -> Result<Response<AudioTranscribeResult>, Status> {
        self.api
            .transcribe(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn record_start(
        &self,
        req: Request<AudioRecordStartParams>,
    ) -> Result<Response<AudioRecordStartResult>, Status> {
        self.api
            .record_start(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn record_stop(
        &self,
        req: Request<AudioRecordStopParams>,
    ) -> Result<Response<AudioRecordStopResult>, Status> {
        self.api
            .record_stop(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn install(
        &self,
        req: Request<AudioInstallParams>,
    ) -> Result<Response<AudioInstallResult>, Status> {
        self.api
            .install(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }
}
