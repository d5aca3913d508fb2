//! Protocol errors (spec "Error codes") and their transport across gRPC.
//!
//! A service answers a failed call with a tonic [`Status`] built by
//! [`RpcError::into_status`]: the Snowpea string code travels in the `snowpea-code`
//! metadata key and extra facts (JSON) in `snowpea-details-bin`; the gRPC code is the
//! closest standard one so grpcurl users see something sensible. The gateway turns a
//! `Status` back into an [`RpcError`] with [`RpcError::from_status`] — the one mapping
//! function of that boundary — and then into a JSON-RPC error object.

use serde_json::Value as Json;
use tonic::metadata::{BinaryMetadataValue, MetadataValue};
use tonic::{Code, Status};

pub use crate::rpc::v1::ErrorCode;

const CODE_KEY: &str = "snowpea-code";
const DETAILS_KEY: &str = "snowpea-details-bin";

/// The `wire` and `jsonrpc_code` options of every `ErrorCode` value, read once from the
/// embedded descriptor (`proto/snowpea/rpc/v1/errors.proto` is their only source), indexed
/// by the enum number.
fn options_table() -> &'static [(String, i32)] {
    static TABLE: std::sync::LazyLock<Vec<(String, i32)>> = std::sync::LazyLock::new(|| {
        let schema = crate::schema::schema();
        let pool = crate::descriptor_pool();
        let codes = pool
            .get_enum_by_name("snowpea.rpc.v1.ErrorCode")
            .expect("snowpea.rpc.v1.ErrorCode in the descriptor");
        let mut table = vec![(String::new(), 0); ErrorCode::Unavailable as usize + 1];
        for value in codes.values() {
            let n = value.number() as usize;
            if n >= table.len() {
                continue;
            }
            // The schema holds each code's options, found by the value's `wire`.
            let wire = crate::schema::enum_wire_of(&value).unwrap_or_default();
            if let Some(spec) = schema.error_code(&wire) {
                table[n] = (spec.wire.clone(), spec.jsonrpc_code);
            }
        }
        // ERROR_CODE_UNSPECIFIED carries no options: it travels as `internal`.
        table[ErrorCode::Unspecified as usize] = table[ErrorCode::Internal as usize].clone();
        table
    });
    &TABLE
}

impl ErrorCode {
    /// The protocol's string code, e.g. `not_found` (option `wire` in `errors.proto`;
    /// `ERROR_CODE_UNSPECIFIED` is `internal`).
    pub fn wire(self) -> &'static str {
        &options_table()[self as usize].0
    }

    /// The numeric JSON-RPC `error.code` (option `jsonrpc_code` in `errors.proto`: -32601
    /// only for method_not_found, -32004 for a missing entity, -32602 invalid params,
    /// -32603 internal, -32000 everything else).
    pub fn jsonrpc_code(self) -> i32 {
        options_table()[self as usize].1
    }

    /// Parses a wire string; `None` for an unknown code.
    pub fn from_wire(s: &str) -> Option<ErrorCode> {
        (1..=ErrorCode::Unavailable as i32)
            .filter_map(|n| ErrorCode::try_from(n).ok())
            .find(|c| c.wire() == s)
    }

    /// The gRPC status code used when this error crosses a service boundary.
    pub fn grpc_code(self) -> Code {
        match self {
            ErrorCode::NotFound | ErrorCode::McpNotFound => Code::NotFound,
            ErrorCode::InvalidParams | ErrorCode::McpInvalid => Code::InvalidArgument,
            ErrorCode::Unauthorized => Code::PermissionDenied,
            ErrorCode::Unavailable => Code::Unavailable,
            ErrorCode::NotImplemented | ErrorCode::MethodNotFound => Code::Unimplemented,
            ErrorCode::Internal | ErrorCode::Unspecified => Code::Internal,
            ErrorCode::McpExists => Code::AlreadyExists,
            ErrorCode::ApprovalTimeout => Code::DeadlineExceeded,
            _ => Code::FailedPrecondition,
        }
    }
}

/// A protocol error: string code, message and optional details (`error.data.details`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct RpcError {
    /// The protocol error code.
    pub code: ErrorCode,
    /// Human-readable message.
    pub message: String,
    /// Extra facts, sent as `error.data.details`.
    pub details: Option<Json>,
}

/// Longest error message a status carries, in bytes (see [`RpcError::into_status`]).
pub const MAX_STATUS_MESSAGE: usize = 2048;
/// Largest error `details` a status carries, as JSON bytes (see [`RpcError::into_status`]).
pub const MAX_STATUS_DETAILS: usize = 4096;

/// `s` cut to at most `max` bytes on a character boundary, saying how much was left out.
fn clip(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let cut = s.len() - end;
    s.truncate(end);
    s.push_str(&format!("… ({cut} more bytes)"));
    s
}

/// Message of [`RpcError::not_implemented_yet`].
const NOT_IMPLEMENTED_YET: &str = "not implemented yet";

impl RpcError {
    /// An error with a code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            details: None,
        }
    }
    /// Adds `error.data.details`.
    pub fn with_details(mut self, details: Json) -> Self {
        self.details = Some(details);
        self
    }
    /// `invalid_params` naming a field.
    pub fn invalid_params(field: &str, message: impl std::fmt::Display) -> Self {
        RpcError::new(ErrorCode::InvalidParams, format!("{field}: {message}"))
            .with_details(serde_json::json!({ "field": field }))
    }
    /// `not_found` for an entity.
    pub fn not_found(message: impl Into<String>) -> Self {
        RpcError::new(ErrorCode::NotFound, message)
    }
    /// `internal`.
    pub fn internal(message: impl Into<String>) -> Self {
        RpcError::new(ErrorCode::Internal, message)
    }
    /// `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        RpcError::new(ErrorCode::Unauthorized, message)
    }

    /// `not_implemented` for a method the schema declares and this build does not implement
    /// (not in [`crate::implemented::IMPLEMENTED`]): message "not implemented yet", no
    /// details — the same error a service's plain gRPC `UNIMPLEMENTED` maps to.
    pub fn not_implemented_yet() -> Self {
        RpcError::new(ErrorCode::NotImplemented, NOT_IMPLEMENTED_YET)
    }

    /// Encodes the error as a gRPC status for the service→gateway hop.
    ///
    /// The message and details travel in HTTP/2 trailers, whose total size the peer caps
    /// (16 KiB by default; a larger one breaks the whole connection, failing every other
    /// call on it). So the message is cut to [`MAX_STATUS_MESSAGE`] bytes and details over
    /// [`MAX_STATUS_DETAILS`] bytes keep only their `field` — an error that quotes a huge
    /// client value still arrives, and nothing else on the connection is hurt.
    pub fn into_status(self) -> Status {
        let mut status = Status::new(
            self.code.grpc_code(),
            clip(self.message, MAX_STATUS_MESSAGE),
        );
        status
            .metadata_mut()
            .insert(CODE_KEY, MetadataValue::from_static(self.code.wire()));
        if let Some(mut details) = self.details {
            let too_big =
                serde_json::to_vec(&details).map_or(true, |b| b.len() > MAX_STATUS_DETAILS);
            if too_big {
                let field = details
                    .get("field")
                    .and_then(Json::as_str)
                    .map(|f| clip(f.to_owned(), 512));
                details = serde_json::json!({ "field": field, "truncated": true });
            }
            if let Ok(bytes) = serde_json::to_vec(&details) {
                status
                    .metadata_mut()
                    .insert_bin(DETAILS_KEY, BinaryMetadataValue::from_bytes(&bytes));
            }
        }
        status
    }

    /// Decodes a status from a service. A status without a Snowpea code is mapped from
    /// its gRPC code: `Unimplemented` → `not_implemented` (a schema'd method the service
    /// does not implement yet), `Unavailable` → `unavailable`, `InvalidArgument` →
    /// `invalid_params`, `NotFound` → `not_found`, `PermissionDenied`/`Unauthenticated` →
    /// `unauthorized`, `DeadlineExceeded` and `Unknown` (a transport error: the service
    /// died mid-call) → `unavailable`, everything else `internal`.
    pub fn from_status(status: &Status) -> Self {
        let code = status
            .metadata()
            .get(CODE_KEY)
            .and_then(|v| v.to_str().ok())
            .and_then(ErrorCode::from_wire)
            .unwrap_or(match status.code() {
                Code::Unimplemented => ErrorCode::NotImplemented,
                // `Unknown` without a Snowpea code is tonic's "transport error": the service
                // died with the call in flight (every status a service sends carries a code).
                Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
                    ErrorCode::Unavailable
                }
                // A message over the gRPC size limit: the client sent (or asked for) too much.
                Code::InvalidArgument | Code::ResourceExhausted => ErrorCode::InvalidParams,
                Code::NotFound => ErrorCode::NotFound,
                Code::PermissionDenied | Code::Unauthenticated => ErrorCode::Unauthorized,
                _ => ErrorCode::Internal,
            });
        let details = status
            .metadata()
            .get_bin(DETAILS_KEY)
            .and_then(|v| v.to_bytes().ok())
            .and_then(|b| serde_json::from_slice(&b).ok());
        let message =
            if status.code() == Code::Unimplemented && status.metadata().get(CODE_KEY).is_none() {
                NOT_IMPLEMENTED_YET.to_owned()
            } else {
                status.message().to_owned()
            };
        RpcError {
            code,
            message,
            details,
        }
    }

    /// The JSON-RPC error object: `{code, message, data: {code, details?}}`.
    pub fn to_jsonrpc(&self) -> Json {
        let mut data = serde_json::json!({ "code": self.code.wire() });
        if let Some(d) = &self.details {
            data["details"] = d.clone();
        }
        serde_json::json!({
            "code": self.code.jsonrpc_code(),
            "message": self.message,
            "data": data,
        })
    }
}

impl From<RpcError> for Status {
    fn from(e: RpcError) -> Status {
        e.into_status()
    }
}

impl From<crate::json::ParamError> for RpcError {
    fn from(e: crate::json::ParamError) -> Self {
        RpcError::new(ErrorCode::InvalidParams, e.message)
            .with_details(serde_json::json!({ "field": e.field }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trip_keeps_code_and_details() {
        let e = RpcError::not_found("no session s1")
            .with_details(serde_json::json!({"sessionId": "s1"}));
        let back = RpcError::from_status(&e.clone().into_status());
        assert_eq!(back, e);
        assert_eq!(back.to_jsonrpc()["code"], -32004);
    }

    #[test]
    fn huge_messages_and_details_are_clipped_to_fit_trailers() {
        let huge = "é".repeat(100_000);
        let e = RpcError::invalid_params("params.name", format!("bad name {huge}"))
            .with_details(serde_json::json!({"field": "params.name", "value": huge}));
        let status = e.into_status();
        assert!(
            status.message().len() <= MAX_STATUS_MESSAGE + 32,
            "{}",
            status.message().len()
        );
        assert!(status.message().ends_with("more bytes)"));
        let back = RpcError::from_status(&status);
        assert_eq!(back.code, ErrorCode::InvalidParams);
        assert_eq!(
            back.details,
            Some(serde_json::json!({"field": "params.name", "truncated": true}))
        );
        let small = RpcError::not_found("no session s1");
        assert_eq!(RpcError::from_status(&small.clone().into_status()), small);
    }

    #[test]
    fn plain_unimplemented_status_is_not_implemented() {
        let e = RpcError::from_status(&Status::unimplemented("Not yet implemented"));
        assert_eq!(e.code, ErrorCode::NotImplemented);
        assert_eq!(e.to_jsonrpc()["code"], -32000);
        assert_eq!(e.to_jsonrpc()["data"]["code"], "not_implemented");
    }

    #[test]
    fn a_service_dying_mid_call_is_unavailable() {
        // What tonic hands the caller when the server's connection drops mid-call.
        let e = RpcError::from_status(&Status::unknown("transport error"));
        assert_eq!(e.code, ErrorCode::Unavailable);
    }

    #[test]
    fn every_wire_code_parses_back() {
        for n in 1..=ErrorCode::Unavailable as i32 {
            let c = ErrorCode::try_from(n).unwrap();
            assert_eq!(ErrorCode::from_wire(c.wire()), Some(c));
        }
    }

    #[test]
    fn every_code_has_its_options_from_the_descriptor() {
        for n in 1..=ErrorCode::Unavailable as i32 {
            let c = ErrorCode::try_from(n).unwrap();
            assert!(!c.wire().is_empty(), "{c:?} has a wire option");
            assert!(c.jsonrpc_code() < 0, "{c:?} has a jsonrpc_code option");
        }
        assert_eq!(ErrorCode::NotFound.wire(), "not_found");
        assert_eq!(ErrorCode::NotFound.jsonrpc_code(), -32004);
        assert_eq!(ErrorCode::MethodNotFound.jsonrpc_code(), -32601);
        assert_eq!(ErrorCode::Unspecified.wire(), "internal");
        assert_eq!(ErrorCode::Unspecified.jsonrpc_code(), -32603);
    }

    #[test]
    fn wire_names_match_the_descriptor_options() {
        let schema = crate::schema::schema();
        for spec in &schema.error_codes {
            let c = ErrorCode::from_wire(&spec.wire).expect("declared code known");
            assert_eq!(c.jsonrpc_code(), spec.jsonrpc_code, "{}", spec.wire);
        }
        assert_eq!(schema.error_codes.len(), ErrorCode::Unavailable as usize);
    }
}
