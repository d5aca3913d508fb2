//! Pending approvals (issue 2 "Permissions"; spec `approval.request`, `approval.respond`,
//! `approval.list`, `approval.pending`, `approval.resolved`).
//!
//! When the mode matrix says "ask", the turn creates a pending request (`ap_…`), persists
//! it, broadcasts `approval.pending`, and sends `approval.request` to the session's origin
//! connection. The first of these resolves it:
//! * the answer to that request (`{decision, scope?, reason?}`);
//! * `approval.respond` by the rule it shares with `question.respond`
//!   ([`crate::session::callers::may_answer`], issue 32 item 10): the origin connection of
//!   the session or of one it was delegated from (`approval.list{sessionId}` of that session
//!   lists a delegated child's approvals, issue 19); for a browser-owned session only its
//!   host besides; otherwise any connected surface (the spec's "shared queue"), a browser
//!   profile only for its own cards and those without a host; `unauthorized` for the others;
//! * the timeout `approvals.timeoutSec` (default 300) → denied, `approval_timeout`;
//! * the turn being interrupted or the session closed → denied by `interrupted`.
//!
//! If the origin connection is gone the request stays pending (and listed) and is sent
//! again when the origin is re-bound. `approval.resolved` follows every resolution.
//!
//! Before asking, the turn consults the [`Allowlist`] this component holds (issue 17); an
//! allow with scope `session`/`project`/`always` is stored there (see
//! [`crate::turn`]'s `tool_call.rs` and [`crate::permission`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_common::bus::RequestError;
use snowpea_common::context::CallContext;
use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::typed::ServerRequest;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;

use crate::events::EventLog;
use crate::permission::Allowlist;
use crate::session::ask_origin::{ask_origin, AskOptions, Ended, Reply};
use crate::session::turn_guards::TurnGuards;
use crate::session::{Registry, Session};
use crate::store;
use snowpea_session_error::{Error, Result};

pub mod ask;

/// Default of the `approvals.timeoutSec` setting.
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

/// How long an approval decision applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// This call only.
    Once,
    /// Calls like this one for the rest of the session (a `session` allowlist entry).
    Session,
    /// Calls like this one in this project (a `project` allowlist entry).
    Project,
    /// Calls like this one everywhere (an `always` allowlist entry).
    Always,
    /// A host's action on this page origin (`approval.ask`; stored as a site rule).
    Site,
}

impl Scope {
    /// The allowlist scope an allow with this scope is stored in (`None` for `once`).
    pub fn allowlist(self) -> Option<crate::permission::Scope> {
        match self {
            Scope::Once => None,
            Scope::Session => Some(crate::permission::Scope::Session),
            Scope::Project => Some(crate::permission::Scope::Project),
            Scope::Always => Some(crate::permission::Scope::Always),
            Scope::Site => None,
        }
    }

    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Once => "once",
            Scope::Session => "session",
            Scope::Project => "project",
            Scope::Always => "always",
            Scope::Site => "site",
        }
    }
}

/// How a request was resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// True = run the tool.
    pub allow: bool,
    /// How long it applies (meaningful for an allow).
    pub scope: Scope,
    /// Who decided: `user`, `timeout` or `interrupted`.
    pub by: &'static str,
    /// The person's reason for a refusal, quoted back to the model.
    pub reason: Option<String>,
}

impl Resolution {
    fn denied(by: &'static str) -> Self {
        Resolution {
            allow: false,
            scope: Scope::Once,
            by,
            reason: None,
        }
    }

    /// Parses an answer `{decision, scope?, reason?}` (from `approval.request` or
    /// `approval.respond`). Anything but `allow` denies; `session`/`project`/`always` are
    /// stored in the allowlist ([`crate::permission`]); `site` only by `approval.ask`
    /// ([`ask`]; a model's call keeps it to `once`); anything else is `once`.
    pub fn from_answer(decision: &str, scope: &str, reason: Option<String>) -> Self {
        Resolution {
            allow: decision == "allow",
            scope: match scope {
                "session" => Scope::Session,
                "project" => Scope::Project,
                "always" => Scope::Always,
                "site" => Scope::Site,
                _ => Scope::Once,
            },
            by: "user",
            reason: reason.filter(|r| !r.trim().is_empty()),
        }
    }
}

struct Pending {
    session_id: String,
    /// The request as `approval.list` reports it (`args` as its JSON text, exactly).
    request: pb::ApprovalRequest,
    answer: oneshot::Sender<Resolution>,
}

/// The `approval.*` component: the pending requests of the process and the `approvals`
/// table.
pub struct Approvals {
    home: Home,
    log: EventLog,
    hub: Arc<BusHub>,
    sessions: Registry,
    allowlist: Arc<Allowlist>,
    pending: Mutex<HashMap<String, Pending>>,
    /// The `session.setAgent{guardTurn}` guards (set by the agents component).
    guards: Arc<TurnGuards>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals").finish_non_exhaustive()
    }
}

impl Approvals {
    /// The component: settings of `home`, writes through `log`, requests over `hub`,
    /// sessions looked up in `sessions`; `allowlist` is consulted before asking and keeps
    /// the answers given for longer than one call; `guards` force an ask.
    pub fn new(
        home: Home,
        log: EventLog,
        hub: Arc<BusHub>,
        sessions: Registry,
        allowlist: Arc<Allowlist>,
        guards: Arc<TurnGuards>,
    ) -> Self {
        Approvals {
            home,
            log,
            hub,
            sessions,
            allowlist,
            pending: Mutex::new(HashMap::new()),
            guards,
        }
    }

    /// True while `session.setAgent{guardTurn}` guards `session` or one it was delegated
    /// from ([`TurnGuards::is_guarded`]).
    pub(crate) fn is_guarded(&self, session: &Session) -> bool {
        self.guards.is_guarded(session)
    }

    /// The allowlist (`permission.allowlist.*`) consulted before asking.
    pub fn allowlist(&self) -> &Allowlist {
        &self.allowlist
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The live session `id` and the sessions it was delegated from, nearest first.
    fn lineage(&self, id: &str) -> Vec<Arc<Session>> {
        crate::session::callers::lineage(&self.sessions, id)
    }

    /// How many requests are pending (for one session, or all).
    pub fn count(&self, session_id: Option<&str>) -> usize {
        self.lock()
            .values()
            .filter(|p| session_id.is_none_or(|s| p.session_id == s))
            .count()
    }
}

/// What to ask about: one planned tool call.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    /// The turn that is blocked.
    pub turn_id: &'a str,
    /// Tool name.
    pub tool: &'a str,
    /// Its arguments.
    pub args: &'a Value,
    /// One line for the person (`ToolPlan::summary`, plus any outside-workdir paths).
    pub note: String,
    /// Risk hint.
    pub risk: &'a str,
    /// Why it is asked whatever the mode (`agent-switch` in a turn `session.setAgent
    /// {guardTurn}` guards).
    pub guard: Option<&'static str>,
    /// The page origin a `site` answer would be stored for (`approval.ask`).
    pub site: Option<String>,
    /// The scope the approver should preselect (`once` for a model's call).
    pub scope_hint: &'a str,
}

impl Approvals {
    /// Publishes `sessions.changed` for `session` (its status counts the pending approvals).
    fn changed(&self, session: &Session, reason: &str) {
        session.set_pending_approvals(self.count(Some(&session.id)));
        crate::session::notify_changed(&self.log, session, reason);
    }

    /// How long an approval of `session` may wait: the session's own timeout (a scheduled
    /// run's `approval_timeout_sec`), else `approvals.timeoutSec` from the settings of its
    /// workdir (default 300 s); at most 7 days.
    fn approval_timeout(&self, session: &Session) -> Duration {
        if let Some(secs) = session.row().approval_timeout_sec.filter(|s| *s > 0) {
            return Duration::from_secs((secs as u64).min(7 * 24 * 3600));
        }
        let settings =
            snowpea_common::settings::load_effective(&self.home, Some(&session.workdir()))
                .unwrap_or_else(|_| json!({}));
        let secs = snowpea_common::settings::get(&settings, "approvals.timeoutSec")
            .and_then(Value::as_f64)
            .filter(|s| *s > 0.0 && s.is_finite())
            .unwrap_or(DEFAULT_TIMEOUT_SECS as f64);
        Duration::from_secs_f64(secs.min(7.0 * 24.0 * 3600.0))
    }

    /// Asks for approval of one call and waits for the resolution (see the module doc).
    pub(crate) async fn request(
        &self,
        session: &Arc<Session>,
        ask: Ask<'_>,
        cancel: &CancellationToken,
    ) -> Resolution {
        let timeout = self.approval_timeout(session);
        let request_id = snowpea_common::ids::new_id("ap");
        let timeout_sec = timeout.as_secs_f64().ceil() as i64;
        let request = pb::ApprovalRequest {
            session_id: session.id.clone(),
            request_id: request_id.clone(),
            tool: ask.tool.to_owned(),
            note: ask.note.clone(),
            risk: ask.risk.to_owned(),
            scope_hint: ask.scope_hint.to_owned(),
            site: ask.site.clone(),
            timeout_sec,
            // Free-form JSON as its text: `approval.request`, `approval.pending` and
            // `approval.list` write it exactly as the tool call gave it.
            args: ask.args.to_string(),
            guard: ask.guard.map(str::to_owned),
        };
        let (answer, mut answered) = oneshot::channel();
        {
            let (sid, tid, rid, text) = (
                session.id.clone(),
                ask.turn_id.to_owned(),
                request_id.clone(),
                request.to_request_params(&[]).to_string(),
            );
            self.log.write_later(move |c| {
                store::approvals::insert(c, &rid, &sid, &tid, &text, &now_iso())
            });
        }
        self.lock().insert(
            request_id.clone(),
            Pending {
                session_id: session.id.clone(),
                request: request.clone(),
                answer,
            },
        );
        self.log.publish(&pb::ApprovalPendingNotification {
            host_tools_from: session.host_tools_from(),
            request: Some(request.clone()),
        });
        self.changed(session, "approval");
        // The events before this ask (the tool.call it is about) reach clients first.
        if let Err(e) = self.log.flush().await {
            tracing::warn!(error = %e, "event log flush before approval.request failed");
        }

        // The origin may be gone: the request then stays pending until a new origin, a
        // client's approval.respond, the timeout or an interrupt.
        let options = AskOptions {
            deadline: Instant::now() + timeout,
            grace: Duration::ZERO,
            require_live: false,
        };
        let ended = ask_origin(
            &self.hub,
            session.origin.subscribe(),
            &request,
            options,
            &mut answered,
            cancel,
            |outcome| match outcome {
                Ok(v) => {
                    let decision = v.get("decision").and_then(Value::as_str).unwrap_or("deny");
                    let scope = v.get("scope").and_then(Value::as_str).unwrap_or("once");
                    let reason = v.get("reason").and_then(Value::as_str).map(str::to_owned);
                    Reply::Resolve(Resolution::from_answer(decision, scope, reason))
                }
                Err(RequestError::Timeout(_)) => Reply::Resolve(Resolution::denied("timeout")),
                Err(e) => {
                    tracing::info!(request_id = %request_id, error = %e, "approval.request not answered; waiting for approval.respond or a new origin");
                    Reply::WaitForNewOrigin
                }
            },
        )
        .await;
        let resolution = match ended {
            Ended::Resolved(r) => r,
            Ended::TimedOut => Resolution::denied("timeout"),
            Ended::Interrupted => Resolution::denied("interrupted"),
        };
        // If approval.respond took the entry meanwhile, its answer wins.
        let resolution = if self.lock().remove(&request_id).is_some() {
            resolution
        } else {
            answered.try_recv().unwrap_or(resolution)
        };
        let decision = if resolution.allow { "allow" } else { "deny" };
        {
            let (rid, by) = (request_id.clone(), resolution.by);
            self.log
                .write_later(move |c| store::approvals::resolve(c, &rid, decision, by, &now_iso()));
        }
        self.log.publish(&pb::ApprovalResolvedNotification {
            request_id: request_id.clone(),
            decision: decision.to_owned(),
            by: resolution.by.to_owned(),
        });
        self.changed(session, "approval");
        resolution
    }

    /// `approval.respond`: only the session's origin connection may answer.
    pub fn respond(&self, ctx: &CallContext, p: pb::ApprovalRespondParams) -> Result<()> {
        if p.decision != "allow" && p.decision != "deny" {
            return Err(Error::invalid("params.decision", "must be allow or deny"));
        }
        let mut pending = self.lock();
        let Some(entry) = pending.get(&p.request_id) else {
            return Err(Error::NotFound(format!(
                "no pending approval {:?}",
                p.request_id
            )));
        };
        crate::session::callers::may_answer(
            ctx,
            &self.sessions,
            &entry.session_id,
            "approval.respond",
        )?;
        let entry = pending.remove(&p.request_id).expect("checked above");
        let reason = Some(p.reason).filter(|r| !r.is_empty());
        let _ = entry
            .answer
            .send(Resolution::from_answer(&p.decision, &p.scope, reason));
        Ok(())
    }

    /// `approval.list`: the pending requests (of one session, or all), oldest first.
    pub async fn list(&self, session_id: Option<&str>) -> Result<pb::ApprovalListResult> {
        if let Some(id) = session_id {
            if self.sessions.row(id).await?.is_none() {
                return Err(Error::NotFound(format!("no session {id:?}")));
            }
        }
        let pending: Vec<(String, pb::ApprovalRequest)> = self
            .lock()
            .values()
            .map(|p| (p.session_id.clone(), p.request.clone()))
            .collect();
        // A session's list includes the pending approvals of the children delegated from it.
        let mut requests: Vec<pb::ApprovalRequest> = pending
            .into_iter()
            .filter(|(sid, _)| {
                session_id.is_none_or(|s| self.lineage(sid).iter().any(|l| l.id == s))
            })
            .map(|(_, r)| r)
            .collect();
        requests.sort_by(|a, b| a.request_id.cmp(&b.request_id));
        Ok(pb::ApprovalListResult { requests })
    }
}

#[cfg(test)]
#[path = "approval_tests.rs"]
mod tests;
