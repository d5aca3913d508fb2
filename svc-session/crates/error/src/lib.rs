//! Errors of the session service and their one mapping to the wire (STYLE.md "Errors"):
//! every [`Error`] variant becomes a protocol [`RpcError`] in [`Error::into_rpc`], which
//! the gRPC layer turns into a tonic `Status`.

use snowpea_common::db::DbError;
use snowpea_proto::error::{ErrorCode, RpcError};

/// What went wrong in a session-service call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller sent a bad parameter; `field` names it (e.g. `params.workdir`).
    #[error("{field}: {message}")]
    InvalidParams {
        /// Dotted path of the offending field.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The session or approval request does not exist (or is no longer pending).
    #[error("{0}")]
    NotFound(String),
    /// The caller may not do this (e.g. `approval.respond` from a connection that is not
    /// the session's origin).
    #[error("{0}")]
    Unauthorized(String),
    /// The session is running a turn and the call needs it idle (`session_busy`).
    #[error("{0}")]
    SessionBusy(String),
    /// The session's mode does not allow what was asked (`mode_denied`).
    #[error("{0}")]
    ModeDenied(String),
    /// The tool exists but is not active in this session (`tool_inactive`).
    #[error("{0}")]
    ToolInactive(String),
    /// A service or resource this call needs did not answer in time, e.g. the database
    /// (`unavailable`; the caller may retry).
    #[error("{0}")]
    Unavailable(String),
    /// The vendor does not offer the asked login method (`login_unsupported`).
    #[error("{0}")]
    LoginUnsupported(String),
    /// Nothing could answer, with facts for the client (`unavailable` with `details`, e.g.
    /// `web.search`'s `details.reason`).
    #[error("{message}")]
    UnavailableWith {
        /// One line for humans.
        message: String,
        /// `error.data.details` (a JSON object).
        details: serde_json::Value,
    },
    /// A model's answer did not have the shape asked for (`invalid_output`, e.g. an
    /// `llm.sample` answer failing its `schema`); `details` says what failed.
    #[error("{message}")]
    InvalidOutput {
        /// One line for humans.
        message: String,
        /// `error.data.details` (a JSON object).
        details: serde_json::Value,
    },
    /// A request a guard refuses (`invalid_params` naming `field`, with `details.reason`,
    /// e.g. `duplicate_task`, `max_depth`; issue 19).
    #[error("{field}: {message}")]
    Refused {
        /// Dotted path of the field the refusal is about.
        field: String,
        /// Stable reason (`details.reason`).
        reason: &'static str,
        /// What was refused and why.
        message: String,
    },
    /// A failure inside the service (database, file system); logged once at the edge.
    #[error("internal error: {0:#}")]
    Internal(#[from] anyhow::Error),
}

/// Result alias of the service.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// `invalid_params` naming `field`.
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Self {
        Error::InvalidParams {
            field: field.to_owned(),
            message: message.to_string(),
        }
    }

    /// The protocol error of this failure (the single mapping of this boundary).
    pub fn into_rpc(self) -> RpcError {
        match self {
            Error::InvalidParams { field, message } => RpcError::invalid_params(&field, message),
            Error::NotFound(message) => RpcError::not_found(message),
            Error::Unauthorized(message) => RpcError::unauthorized(message),
            Error::SessionBusy(message) => RpcError::new(ErrorCode::SessionBusy, message),
            Error::ModeDenied(message) => RpcError::new(ErrorCode::ModeDenied, message),
            Error::ToolInactive(message) => RpcError::new(ErrorCode::ToolInactive, message),
            Error::Unavailable(message) => RpcError::new(ErrorCode::Unavailable, message),
            Error::LoginUnsupported(message) => RpcError::new(ErrorCode::LoginUnsupported, message),
            Error::UnavailableWith { message, details } => {
                RpcError::new(ErrorCode::Unavailable, message).with_details(details)
            }
            Error::InvalidOutput { message, details } => {
                RpcError::new(ErrorCode::InvalidOutput, message).with_details(details)
            }
            Error::Refused {
                field,
                reason,
                message,
            } => RpcError::new(ErrorCode::InvalidParams, format!("{field}: {message}"))
                .with_details(serde_json::json!({ "field": field, "reason": reason })),
            Error::Internal(e) => {
                tracing::error!(error = %format!("{e:#}"), "internal error");
                RpcError::internal(format!("{e:#}"))
            }
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> tonic::Status {
        e.into_rpc().into_status()
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Internal(e.into())
    }
}

impl From<DbError> for Error {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Timeout { .. } => Error::Unavailable(e.to_string()),
            DbError::Panicked { .. } => Error::Internal(anyhow::Error::new(e)),
        }
    }
}
