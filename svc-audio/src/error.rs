//! svc-audio's errors and their one mapping to protocol errors (STYLE.md "Errors"): every
//! variant names the protocol code it answers with, in [`Error::into_rpc`].

use serde_json::json;
use snowpea_proto::error::{ErrorCode, RpcError};
use tonic::Status;

/// A failed svc-audio call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A param is wrong: unknown engine, unreadable or undecodable audio, empty text:
    /// `invalid_params` naming the field.
    #[error("{field}: {message}")]
    InvalidParams {
        /// The offending field, e.g. `params.data`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The capability is off here: the direction has no pinned provider, the engine or a
    /// voice is not installed, there is no recorder or audio device: `unavailable` with
    /// `details.reason`.
    #[error("{message}")]
    Off {
        /// One line for humans, saying what to do.
        message: String,
        /// Machine-readable reason: `not_pinned`, `engine_missing`, `no_voice`,
        /// `no_recorder`, `no_device`.
        reason: &'static str,
    },
    /// No recording is running for that session: `not_found`.
    #[error("{0}")]
    NotFound(String),
    /// An engine child process failed: crashed, exited non-zero, or was killed after its
    /// timeout: `internal` with `details {engine, reason, pid?, stderr?}`.
    #[error("{message}")]
    Engine {
        /// Engine id.
        engine: String,
        /// `crashed`, `failed`, `timeout`, `spawn`.
        reason: &'static str,
        /// One line for humans.
        message: String,
        /// The child's pid, when it ran.
        pid: Option<u32>,
        /// Tail of the child's stderr.
        stderr: String,
    },
    /// Reading or writing a file failed unexpectedly: `internal`.
    #[error("{0}")]
    Internal(String),
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// `invalid_params` for `field`.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Error::InvalidParams {
            field: field.to_owned(),
            message: message.into(),
        }
    }

    /// The protocol error for this failure (the one mapping of this boundary).
    pub fn into_rpc(self) -> RpcError {
        match self {
            Error::InvalidParams { field, message } => RpcError::invalid_params(&field, message),
            Error::Off { message, reason } => RpcError::new(ErrorCode::Unavailable, message)
                .with_details(json!({ "reason": reason })),
            Error::NotFound(m) => RpcError::not_found(m),
            Error::Engine {
                engine,
                reason,
                message,
                pid,
                stderr,
            } => RpcError::internal(message).with_details(json!({
                "engine": engine,
                "reason": reason,
                "pid": pid,
                "stderr": stderr,
            })),
            Error::Internal(m) => RpcError::internal(m),
        }
    }

    /// The gRPC status carrying [`Error::into_rpc`]; internal failures are logged here,
    /// once, at the edge (client mistakes are not logged as errors).
    pub fn into_status(self) -> Status {
        match &self {
            Error::Internal(m) => tracing::error!(error = %m, "internal error"),
            Error::Engine {
                engine,
                reason,
                message,
                ..
            } => tracing::warn!(engine = %engine, reason, error = %message, "engine failed"),
            // Client mistakes and switched-off engines are not the service's failures.
            Error::InvalidParams { .. } | Error::Off { .. } | Error::NotFound(_) => {}
        }
        self.into_rpc().into_status()
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Internal(e.to_string())
    }
}
