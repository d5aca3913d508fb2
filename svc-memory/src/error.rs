//! The service's error type and its one mapping to the wire (STYLE.md "Errors"): every
//! variant maps to exactly one protocol code in [`Error::into_status`].

use snowpea_proto::error::{ErrorCode, RpcError};
use tonic::Status;

/// Why a memory or site-memory call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A param broke a rule of the spec; `field` is its path, e.g.
    /// `params.entry.actions[2].locators[0].value`.
    #[error("{field}: {message}")]
    InvalidParams {
        /// Path of the offending field.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The memory, site entry, flow, recipe or session named by the call does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The caller is not one the spec allows for this method (site memory).
    #[error("{0}")]
    Unauthorized(String),
    /// A service this call needs (svc-session, to resolve a `sessionId`) is down.
    #[error("{0}")]
    Unavailable(String),
    /// SQLite failed (disk full, corruption, …).
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
    /// The database did not answer in time (`unavailable`) or its work panicked
    /// (`internal`), see `snowpea_common::db::blocking`.
    #[error(transparent)]
    Blocking(#[from] snowpea_common::db::DbError),
    /// A bug: something this service wrote could not be read back.
    #[error("{0}")]
    Internal(String),
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// `invalid_params` naming `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidParams {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The protocol error of this failure (the single mapping of this boundary).
    /// Internal failures are logged here, once; client mistakes are not logged as errors.
    pub fn into_rpc(self) -> RpcError {
        match self {
            Error::InvalidParams { field, message } => RpcError::invalid_params(&field, message),
            Error::NotFound(m) => RpcError::not_found(m),
            Error::Unauthorized(m) => RpcError::unauthorized(m),
            Error::Unavailable(m) => RpcError::new(ErrorCode::Unavailable, m),
            Error::Db(e) => {
                tracing::error!(error = %e, "database failure");
                RpcError::internal(format!("database: {e}"))
            }
            Error::Blocking(e @ snowpea_common::db::DbError::Timeout { .. }) => {
                tracing::warn!(error = %e, "database slow");
                RpcError::new(ErrorCode::Unavailable, e.to_string())
            }
            Error::Blocking(e @ snowpea_common::db::DbError::Panicked { .. }) => {
                tracing::error!(error = %e, "database work panicked");
                RpcError::internal(e.to_string())
            }
            Error::Internal(m) => {
                tracing::error!(error = %m, "internal failure");
                RpcError::internal(m)
            }
        }
    }

    /// The gRPC status carrying [`Error::into_rpc`].
    pub fn into_status(self) -> Status {
        self.into_rpc().into_status()
    }
}
