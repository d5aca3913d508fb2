//! gRPC services of svc-audio: [`audio`] (`AudioService`, the `audio.*` JSON-RPC methods).
//! The span of each call is opened by the shared call layer of
//! `snowpea_common::service::serve`.

pub mod audio;
