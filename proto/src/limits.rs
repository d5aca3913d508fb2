//! The message limits of every hop (issue 24 §2), in one place: what the gateway accepts
//! from a client, what a string param may hold, and what gRPC encodes and decodes on both
//! ends of every call (gateway → service, service → service, the bus feed). Anything the
//! gateway accepts either reaches its service or is refused `invalid_params` naming the
//! field and the limit; results up to [`GRPC_RESPONSE`] travel back.
//!
//! ```text
//! client ──WS ≤ WS_MESSAGE──► gateway ──gRPC request ≤ GRPC_REQUEST──► service
//!        ◄──────────────────         ◄──gRPC response / bus ≤ GRPC_RESPONSE──
//! ```

/// Largest WebSocket message (and frame) the gateway accepts from a client, in bytes; a
/// bigger one closes the socket with 1009 and the limit.
pub const WS_MESSAGE: usize = 16 << 20;

/// Longest string in a request's params, in bytes (UTF-8). A longer one is refused by the
/// gateway's params validation as `invalid_params` "`params.text: at most 4194304 bytes`"
/// (services may cap a field lower and name it the same way). Audio bigger than this goes
/// by path, not inline `data`.
pub const STRING_PARAM: usize = 4 << 20;

/// Largest gRPC request message: the gateway refuses (`invalid_params`, naming the biggest
/// field) a request that encodes larger, every service decodes up to it, and service →
/// service clients encode up to it. Four times [`WS_MESSAGE`], so that what JSON → protobuf
/// encoding adds (tags, `Struct` numbers as doubles) fits for any ordinary request.
pub const GRPC_REQUEST: usize = 64 << 20;

/// Largest gRPC response or stream message (a result, a bus notification): services encode
/// up to it, the gateway and service → service clients decode up to it — a long
/// `session.resume`, an `audio.speak` result, a `site.get` with many entries.
pub const GRPC_RESPONSE: usize = 64 << 20;
