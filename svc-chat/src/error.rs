//! Errors of svc-chat's handlers and their one mapping to protocol errors (STYLE.md "Errors").

use snowpea_proto::error::{ErrorCode, RpcError};

/// Why a `gateway.*` call failed.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// A params field is wrong (`field` is written as in the params, e.g. `target.agent`).
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: String,
        /// Why.
        message: String,
    },
    /// No binding with this id.
    #[error("no binding {0}")]
    NotFound(String),
    /// A service svc-chat must ask (svc-session) did not answer; nothing was changed.
    #[error("{0}")]
    Unavailable(String),
    /// The database failed.
    #[error("chat database: {0:#}")]
    Store(#[from] anyhow::Error),
    /// The store did not answer in time or its work panicked.
    #[error(transparent)]
    Blocking(#[from] snowpea_common::db::DbError),
}

impl ChatError {
    /// An [`ChatError::Invalid`] for `field`.
    pub fn invalid(field: &str, message: impl Into<String>) -> ChatError {
        ChatError::Invalid {
            field: field.to_owned(),
            message: message.into(),
        }
    }

    /// The protocol error for this failure. The only place svc-chat errors become wire errors.
    pub fn into_rpc(self) -> RpcError {
        match self {
            ChatError::Invalid { field, message } => {
                RpcError::invalid_params(&format!("params.{field}"), message)
            }
            ChatError::NotFound(id) => {
                let shown = crate::binding::clip(&id);
                RpcError::not_found(format!("no binding {shown}"))
                    .with_details(serde_json::json!({ "bindingId": shown }))
            }
            ChatError::Unavailable(message) => RpcError::new(ErrorCode::Unavailable, message),
            ChatError::Store(e) => {
                tracing::error!(error = %format!("{e:#}"), "chat database error");
                RpcError::internal(format!("chat database: {e:#}"))
            }
            ChatError::Blocking(e @ snowpea_common::db::DbError::Timeout { .. }) => {
                tracing::warn!(error = %e, "chat database slow");
                RpcError::new(ErrorCode::Unavailable, e.to_string())
            }
            ChatError::Blocking(e @ snowpea_common::db::DbError::Panicked { .. }) => {
                tracing::error!(error = %e, "chat work panicked");
                RpcError::internal(e.to_string())
            }
        }
    }
}

impl From<ChatError> for tonic::Status {
    fn from(e: ChatError) -> tonic::Status {
        e.into_rpc().into_status()
    }
}
