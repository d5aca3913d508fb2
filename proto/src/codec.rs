//! A tonic codec for [`DynamicMessage`]s, so the gateway can call any rpc of any service
//! by its descriptor without per-method code (DESIGN.md §4 "generic router"), and
//! [`EncodedCodec`], which sends a request encoded once (every retry reuses its bytes).

use prost::Message;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

/// Encodes dynamic request messages and decodes responses as `output` messages.
#[derive(Debug, Clone)]
pub struct DynamicCodec {
    output: MessageDescriptor,
}

impl DynamicCodec {
    /// A codec whose decoder builds messages of type `output` (the rpc's result).
    pub fn new(output: MessageDescriptor) -> Self {
        DynamicCodec { output }
    }
}

/// Encoder half of [`DynamicCodec`].
#[derive(Debug)]
pub struct DynamicEncoder;

/// Decoder half of [`DynamicCodec`].
#[derive(Debug)]
pub struct DynamicDecoder(MessageDescriptor);

impl Codec for DynamicCodec {
    type Encode = DynamicMessage;
    type Decode = DynamicMessage;
    type Encoder = DynamicEncoder;
    type Decoder = DynamicDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        DynamicEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        DynamicDecoder(self.output.clone())
    }
}

impl Encoder for DynamicEncoder {
    type Item = DynamicMessage;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encode: {e}")))
    }
}

impl Decoder for DynamicDecoder {
    type Item = DynamicMessage;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        DynamicMessage::decode(self.0.clone(), src)
            .map(Some)
            .map_err(|e| Status::internal(format!("decode: {e}")))
    }
}

/// Sends a request already encoded as protobuf bytes ([`crate::json::encode_request`]) and
/// decodes responses as `output` messages: a retried call copies nothing but a refcount.
#[derive(Debug, Clone)]
pub struct EncodedCodec {
    output: MessageDescriptor,
}

impl EncodedCodec {
    /// A codec whose decoder builds messages of type `output` (the rpc's result).
    pub fn new(output: MessageDescriptor) -> Self {
        EncodedCodec { output }
    }
}

/// Encoder half of [`EncodedCodec`]: writes the bytes as they are.
#[derive(Debug)]
pub struct BytesEncoder;

impl Codec for EncodedCodec {
    type Encode = bytes::Bytes;
    type Decode = DynamicMessage;
    type Encoder = BytesEncoder;
    type Decoder = DynamicDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        BytesEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        DynamicDecoder(self.output.clone())
    }
}

impl Encoder for BytesEncoder {
    type Item = bytes::Bytes;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        use bytes::BufMut as _;
        dst.put_slice(&item);
        Ok(())
    }
}
