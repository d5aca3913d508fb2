//! svc-mcp's errors and their one mapping to protocol errors (STYLE.md "Errors"): every
//! variant names the protocol code it answers with, in [`Error::into_status`].

use snowpea_proto::error::{ErrorCode, RpcError};
use tonic::Status;

/// A failed svc-mcp call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The entry breaks a rule (name, command/url, argv-style args, ranges) or a config file
    /// cannot be parsed: `mcp_invalid`.
    #[error("{0}")]
    Invalid(String),
    /// `mcp.add` of a name that already exists in the target file without `force`:
    /// `mcp_exists`.
    #[error("{0}")]
    Exists(String),
    /// No server of that name is configured: `mcp_not_found`.
    #[error("{0}")]
    NotFound(String),
    /// The server is declared in a read-only scope (settings, plugin): `mcp_read_only`.
    #[error("{0}")]
    ReadOnly(String),
    /// The probe (or start) failed; the message is the server's error verbatim:
    /// `mcp_start_failed`.
    #[error("{0}")]
    StartFailed(String),
    /// Security findings without `force`; the findings are in the details: `mcp_unsafe`.
    #[error("{message}")]
    Unsafe {
        /// One line for humans.
        message: String,
        /// Every finding.
        findings: Vec<String>,
    },
    /// A param fails a rule outside the MCP entry itself (e.g. a relative workdir):
    /// `invalid_params`.
    #[error("{field}: {message}")]
    InvalidParams {
        /// The offending field.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A session, tool or other entity does not exist: `not_found`.
    #[error("{0}")]
    EntityNotFound(String),
    /// A service svc-mcp depends on (svc-session) is down: `unavailable`.
    #[error("{0}")]
    Unavailable(String),
    /// Reading or writing a file failed unexpectedly: `internal`.
    #[error("{0}")]
    Internal(String),
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The protocol error for this failure (the one mapping of this boundary).
    pub fn into_rpc(self) -> RpcError {
        match self {
            Error::Invalid(m) => RpcError::new(ErrorCode::McpInvalid, m),
            Error::Exists(m) => RpcError::new(ErrorCode::McpExists, m),
            Error::NotFound(m) => RpcError::new(ErrorCode::McpNotFound, m),
            Error::ReadOnly(m) => RpcError::new(ErrorCode::McpReadOnly, m),
            Error::StartFailed(m) => RpcError::new(ErrorCode::McpStartFailed, m),
            Error::Unsafe { message, findings } => RpcError::new(ErrorCode::McpUnsafe, message)
                .with_details(serde_json::json!({ "findings": findings })),
            Error::InvalidParams { field, message } => RpcError::invalid_params(&field, message),
            Error::EntityNotFound(m) => RpcError::not_found(m),
            Error::Unavailable(m) => RpcError::new(ErrorCode::Unavailable, m),
            Error::Internal(m) => RpcError::internal(m),
        }
    }

    /// The gRPC status carrying [`Error::into_rpc`].
    pub fn into_status(self) -> Status {
        if let Error::Internal(m) = &self {
            // Logged once, at the edge; client mistakes are not errors (STYLE.md "Errors").
            tracing::error!(error = %crate::clip::clip(m), "internal error");
        }
        self.into_rpc().into_status()
    }

    /// `invalid_params` naming `field`.
    pub fn invalid_params(field: &str, message: impl Into<String>) -> Self {
        Error::InvalidParams {
            field: field.to_owned(),
            message: message.into(),
        }
    }
}

impl From<Error> for Status {
    fn from(e: Error) -> Status {
        e.into_status()
    }
}
