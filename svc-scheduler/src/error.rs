//! Errors of the scheduler's handlers and their one mapping to protocol errors (STYLE.md
//! "Errors").

use snowpea_proto::error::{ErrorCode, RpcError};

use crate::spec::SpecError;

/// Why a `job.*` call failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// A schedule spec could not be read or would never fire (`field` is `spec` or `schedule`).
    #[error("{field}: {source}")]
    Spec {
        /// The params field holding the spec.
        field: &'static str,
        /// Why.
        source: SpecError,
    },
    /// Another params field is wrong.
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Why.
        message: String,
    },
    /// The job was cancelled (`job.cancel`); it runs again only after `job.update{enabled:true}`.
    #[error("job {0} is cancelled; job.update with enabled: true resumes it")]
    Cancelled(String),
    /// No job with this id.
    #[error("no job {0}")]
    NotFound(String),
    /// The job has meta and the caller is not its owning browser client, or the caller may not
    /// set meta.
    #[error("{0}")]
    NotOwner(String),
    /// A manual-clock rpc on a scheduler running the real clock.
    #[error("the scheduler runs the real clock (start it with SNOWPEA_SCHEDULER_CLOCK=manual)")]
    RealClock,
    /// The database failed.
    #[error("scheduler database: {0:#}")]
    Store(#[from] anyhow::Error),
    /// The store did not answer in time (`unavailable`) or its work panicked (`internal`);
    /// see `snowpea_common::db::blocking`.
    #[error(transparent)]
    Blocking(#[from] snowpea_common::db::DbError),
    /// svc-session could not be reached for a call that needs it.
    #[error("svc-session: {0}")]
    SessionUnavailable(String),
}

impl JobError {
    /// The protocol error for this failure. The only place scheduler errors become wire errors.
    pub fn into_rpc(self) -> RpcError {
        match self {
            // Field names are written as in the params (`spec`, `sessionTemplate.x`); on the wire
            // they are paths like every schema error's (`params.spec`).
            JobError::Spec { field, source } => {
                RpcError::invalid_params(&format!("params.{field}"), source)
            }
            JobError::Invalid { field, message } => {
                RpcError::invalid_params(&format!("params.{field}"), message)
            }
            JobError::Cancelled(id) => {
                let message = JobError::Cancelled(id).to_string();
                RpcError::invalid_params("params.jobId", message)
            }
            JobError::NotFound(id) => {
                // The id is the caller's: repeat at most its first characters.
                let shown = crate::spec::clip(&id);
                RpcError::not_found(format!("no job {shown}"))
                    .with_details(serde_json::json!({ "jobId": shown }))
            }
            JobError::NotOwner(m) => RpcError::unauthorized(m),
            JobError::RealClock => RpcError::new(ErrorCode::InvalidParams, self.to_string()),
            JobError::Store(e) => {
                // An internal error is logged once, here at the edge.
                tracing::error!(error = %format!("{e:#}"), "scheduler database error");
                RpcError::internal(format!("scheduler database: {e:#}"))
            }
            JobError::Blocking(e @ snowpea_common::db::DbError::Timeout { .. }) => {
                tracing::warn!(error = %e, "scheduler database slow");
                RpcError::new(ErrorCode::Unavailable, e.to_string())
            }
            JobError::Blocking(e @ snowpea_common::db::DbError::Panicked { .. }) => {
                tracing::error!(error = %e, "scheduler work panicked");
                RpcError::internal(e.to_string())
            }
            JobError::SessionUnavailable(m) => {
                RpcError::new(ErrorCode::Unavailable, format!("svc-session: {m}"))
            }
        }
    }
}

impl From<JobError> for tonic::Status {
    fn from(e: JobError) -> tonic::Status {
        e.into_rpc().into_status()
    }
}
