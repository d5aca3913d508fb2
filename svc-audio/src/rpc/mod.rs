//! gRPC services of svc-audio: [`audio`] (`AudioService`, the `audio.*` JSON-RPC methods).
//! The span of each call is opened by the shared call layer of
//! `snowpea_common::service::serve`.

pub mod audio;

/// Fully qualified names of the services (for health and reflection).
pub const SERVICE_NAMES: &[&str] = &["snowpea.audio.v1.AudioService"];
