//! Ownership of jobs with `meta` (protocol `job.schedule` `meta`, 1.23.0): only a connection
//! whose `system.hello` said clientKind `browser` with a clientId may set meta (at most 4 KB of
//! JSON); the job then belongs to that clientId: only it may update, cancel, delete or run it
//! now, and only it sees `meta`, `fingerprint` and `ownerClientId`. No agent tool can change or
//! cancel it.

use serde_json::Value;
use snowpea_common::context::CallContext;

use crate::error::JobError;
use crate::store::JobRow;

/// Largest `meta`, in bytes of JSON.
pub const MAX_META_BYTES: usize = 4096;

/// Who is acting on a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A client connection through the gateway (or grpcurl, with an empty context).
    Client(CallContext),
    /// An agent tool of a session (`schedule_*`).
    Tool {
        /// The calling session.
        session_id: String,
    },
}

impl Caller {
    /// The browser clientId of the caller, if it is a browser with one.
    fn browser_client_id(&self) -> Option<&str> {
        match self {
            Caller::Client(ctx) if ctx.client_kind.as_deref() == Some("browser") => {
                ctx.client_id.as_deref()
            }
            _ => None,
        }
    }

    /// True when the caller owns `job` (a job without meta has no owner).
    pub fn owns(&self, job: &JobRow) -> bool {
        match (&job.owner_client_id, self.browser_client_id()) {
            (Some(owner), Some(me)) => owner == me,
            _ => false,
        }
    }
}

/// Checks a new job's meta: returns (meta JSON text, owner clientId).
pub fn check_meta(
    caller: &Caller,
    meta: Option<&Value>,
) -> Result<Option<(String, String)>, JobError> {
    let Some(meta) = meta else { return Ok(None) };
    let text = meta.to_string();
    if text.len() > MAX_META_BYTES {
        return Err(JobError::Invalid {
            field: "meta",
            message: format!(
                "is {} bytes of JSON; at most {MAX_META_BYTES} are allowed",
                text.len()
            ),
        });
    }
    match caller.browser_client_id() {
        Some(owner) => Ok(Some((text, owner.to_owned()))),
        None => Err(JobError::NotOwner(
            "meta: only a browser client (system.hello clientKind 'browser' with a clientId) may set meta".into(),
        )),
    }
}

/// Refuses a change (update, cancel, delete, runNow) of an owned job by anyone but its owner.
pub fn check_may_change(caller: &Caller, job: &JobRow, what: &str) -> Result<(), JobError> {
    if job.owner_client_id.is_none() || caller.owns(job) {
        return Ok(());
    }
    Err(JobError::NotOwner(match caller {
        Caller::Tool { .. } => format!(
            "job {} belongs to a browser client; no agent tool can {what} it",
            job.job_id
        ),
        Caller::Client(_) => format!(
            "job {} belongs to another client; only its owner may {what} it",
            job.job_id
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn browser(id: &str) -> Caller {
        Caller::Client(CallContext {
            client_id: Some(id.into()),
            client_kind: Some("browser".into()),
            ..Default::default()
        })
    }

    fn owned_job() -> JobRow {
        let mut j = crate::store::tests::job("j", None);
        j.meta = Some("{}".into());
        j.owner_client_id = Some("b1".into());
        j
    }

    #[test]
    fn only_a_browser_with_a_client_id_may_set_meta() {
        let meta = serde_json::json!({"k": "v"});
        assert_eq!(
            check_meta(&browser("b1"), Some(&meta)).unwrap(),
            Some((meta.to_string(), "b1".into()))
        );
        let tui = Caller::Client(CallContext {
            client_id: Some("t".into()),
            client_kind: Some("tui".into()),
            ..Default::default()
        });
        assert!(matches!(
            check_meta(&tui, Some(&meta)),
            Err(JobError::NotOwner(_))
        ));
        let anon = Caller::Client(CallContext {
            client_kind: Some("browser".into()),
            ..Default::default()
        });
        assert!(matches!(
            check_meta(&anon, Some(&meta)),
            Err(JobError::NotOwner(_))
        ));
        assert!(matches!(
            check_meta(
                &Caller::Tool {
                    session_id: "s".into()
                },
                Some(&meta)
            ),
            Err(JobError::NotOwner(_))
        ));
        assert_eq!(check_meta(&tui, None).unwrap(), None);
    }

    #[test]
    fn meta_is_at_most_4_kb() {
        let big = serde_json::json!({ "x": "a".repeat(MAX_META_BYTES) });
        let e = check_meta(&browser("b1"), Some(&big)).unwrap_err();
        assert!(matches!(e, JobError::Invalid { field: "meta", .. }), "{e}");
    }

    #[test]
    fn only_the_owner_may_change_an_owned_job() {
        let j = owned_job();
        assert!(check_may_change(&browser("b1"), &j, "cancel").is_ok());
        assert!(check_may_change(&browser("b2"), &j, "cancel").is_err());
        assert!(check_may_change(&Caller::Client(CallContext::default()), &j, "cancel").is_err());
        let e = check_may_change(
            &Caller::Tool {
                session_id: "s".into(),
            },
            &j,
            "cancel",
        )
        .unwrap_err();
        assert!(e.to_string().contains("no agent tool"));
        let free = crate::store::tests::job("k", None);
        assert!(check_may_change(
            &Caller::Tool {
                session_id: "s".into()
            },
            &free,
            "cancel"
        )
        .is_ok());
    }
}
