//! Typed `system.*` params and results: the validated params decode into the generated
//! `System*Params`, and a generated `System*Result` becomes protocol JSON through the proto
//! crate's mapping ([`snowpea_proto::json::to_json`]), the same one every forwarded result
//! takes — so the gateway's own answers follow the schema like every other.

use prost::Message;
use prost_reflect::{DynamicMessage, MessageDescriptor, ReflectMessage};
use serde_json::Value;
use snowpea_proto::error::RpcError;
use snowpea_proto::json::to_json;

/// Decodes validated `params` into the generated params type.
pub fn decode<T: Message + Default>(params: &DynamicMessage) -> Result<T, RpcError> {
    params.transcode_to::<T>().map_err(|e| {
        RpcError::internal(format!(
            "{} params do not decode: {e}",
            params.descriptor().full_name()
        ))
    })
}

/// Writes `result` as protocol JSON; `desc` is the method's result descriptor.
pub fn encode<T: Message>(desc: &MessageDescriptor, result: &T) -> Result<Value, RpcError> {
    DynamicMessage::decode(desc.clone(), result.encode_to_vec().as_slice())
        .map(|m| to_json(&m))
        .map_err(|e| RpcError::internal(format!("{} does not encode: {e}", desc.full_name())))
}
