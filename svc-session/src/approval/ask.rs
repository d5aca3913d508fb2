//! `approval.ask` (spec; issue 21): a host escalates one of its own actions through the
//! approval pipeline.
//!
//! * The approver's `approval.request` carries `tool`, `args` (the host's `detail` under
//!   `args.detail`, the site under `args.site`), `note` = `reason`, `site`, and `scopeHint`
//!   `site` when a site is known. `site` is the given one, else `detail.origin`, else the
//!   origin of `args.url`.
//! * The local-dev-server rule: `repl.navigate` with `args.reasonCode: "localDevServer"`
//!   gets `scopeHint: "project"`; a `project` answer stores a rule for the session's
//!   project and the URL's origin that only such asks match ([`Allowlist::host_rule`]).
//! * The mode matrix decides first (plan still denies write, send and config); `forceAsk`
//!   lets it only deny, never allow. Then stored rules (a `site` rule of the tool and
//!   origin, the local-dev-server rule, or the generic allowlist) may allow — never for
//!   risk `payment`, whose answer is also kept to `once`. Otherwise a person is asked.
//! * Scopes answered: `site` (stored for the tool and origin, in the global settings with
//!   the host's `hostToolsFrom`), `project` only for project-safe actions (`repl.files`, a
//!   local-dev-server navigation), `always` for a page action only for `repl.tabs`,
//!   `repl.clipboard`, `repl.read` and `repl.attach`; others are kept to `once`
//!   (capabilities `pageActionAlways`, `tabReadAlways`). With `args.onceOnly` no stored rule
//!   answers (a person is asked every time) and the scope the person picked is returned and
//!   never stored (capability `onceOnlyScope`).
//! * While `session.setAgent{guardTurn}` guards the session (or one it was delegated from,
//!   [`crate::agents::Agents::is_guarded`]) the ask has `forceAsk` semantics (the mode
//!   may only deny; no stored rule allows), the request says `guard: "agent-switch"`, and
//!   the answer comes back as `once` and is never stored.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use tokio_util::sync::CancellationToken;

use super::{Approvals, Ask, Scope};
use crate::permission::Allowlist;
use crate::permissions::{self, Verdict};
use crate::session::Session;
use crate::tools::ToolPlan;
use snowpea_session_error::{Error, Result};

/// Longest `approval.ask` `tool` name, characters (it becomes an allowlist pattern).
pub const MAX_TOOL_CHARS: usize = 128;

/// The tool and reason code of a local dev server navigation.
pub const DEV_SERVER_TOOL: &str = "repl.navigate";
/// `args.reasonCode` of a local dev server navigation.
pub const DEV_SERVER_REASON: &str = "localDevServer";
/// Page-action tools whose answers may be kept `always`.
pub const ALWAYS_PAGE_TOOLS: &[&str] = &["repl.tabs", "repl.clipboard", "repl.read", "repl.attach"];

/// `scheme://host[:port]` of a URL; `None` when it is not one.
pub fn origin_of(url: &str) -> Option<String> {
    let u = url::Url::parse(url.trim()).ok()?;
    let origin = u.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

/// What an ask is about, derived from its params.
#[derive(Debug, Clone, PartialEq)]
pub struct Escalation {
    /// `args` with `detail` and `site` merged in.
    pub args: Value,
    /// The page origin, when known.
    pub site: Option<String>,
    /// A local dev server navigation: the URL's origin.
    pub dev_server: Option<String>,
    /// `args.onceOnly`.
    pub once_only: bool,
    /// Risk `payment`.
    pub payment: bool,
}

/// Derives the [`Escalation`] of `p` (module doc).
pub fn escalation(p: &pb::ApprovalAskParams) -> Escalation {
    let mut args: Map<String, Value> = p
        .args
        .as_ref()
        .map(|s| match snowpea_proto::wkt::from_struct(s) {
            Value::Object(m) => m,
            _ => Map::new(),
        })
        .unwrap_or_default();
    let detail = p.detail.as_ref().map(snowpea_proto::wkt::from_struct);
    let site = p
        .site
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| origin_of(s).unwrap_or_else(|| s.to_owned()))
        .or_else(|| {
            detail
                .as_ref()
                .and_then(|d| d.get("origin"))
                .and_then(Value::as_str)
                .and_then(origin_of)
        })
        .or_else(|| args.get("url").and_then(Value::as_str).and_then(origin_of));
    let dev_server = (p.tool == DEV_SERVER_TOOL
        && args.get("reasonCode").and_then(Value::as_str) == Some(DEV_SERVER_REASON))
    .then(|| args.get("url").and_then(Value::as_str).and_then(origin_of))
    .flatten();
    let once_only = args.get("onceOnly").and_then(Value::as_bool) == Some(true);
    if let Some(d) = detail {
        args.insert("detail".into(), d);
    }
    if let Some(s) = &site {
        args.insert("site".into(), json!(s));
    }
    Escalation {
        args: Value::Object(args),
        site,
        dev_server,
        once_only,
        payment: p.risk.as_deref() == Some("payment"),
    }
}

/// The scope an answer is kept to (module doc).
pub fn allowed_scope(tool: &str, e: &Escalation, picked: Scope) -> Scope {
    if e.payment {
        return Scope::Once;
    }
    match picked {
        Scope::Site if e.site.is_none() => Scope::Once,
        Scope::Project if tool != "repl.files" && e.dev_server.is_none() => Scope::Once,
        Scope::Always if e.site.is_some() && !ALWAYS_PAGE_TOOLS.contains(&tool) => Scope::Once,
        s => s,
    }
}

fn answer(decision: bool, scope: Scope, by: &str) -> pb::ApprovalAskResult {
    pb::ApprovalAskResult {
        by: by.to_owned(),
        decision: if decision { "allow" } else { "deny" }.into(),
        scope: scope.as_str().into(),
    }
}

impl Approvals {
    /// `approval.ask` (module doc). Only the session's host or origin connection may ask.
    pub async fn ask(
        &self,
        ctx: &CallContext,
        p: pb::ApprovalAskParams,
    ) -> Result<pb::ApprovalAskResult> {
        let session = self.sessions.get(&p.session_id)?;
        let tag = crate::host_tools::registry::permission_tag(&p.permission).ok_or_else(|| {
            Error::invalid(
                "params.permission",
                format!(
                    "{:?} is not one of read, write, exec, network, send, config, delegate, secret",
                    p.permission
                ),
            )
        })?;
        if p.tool.trim().is_empty() {
            return Err(Error::invalid("params.tool", "must not be empty"));
        }
        if p.tool.chars().count() > MAX_TOOL_CHARS {
            return Err(Error::invalid(
                "params.tool",
                format!("must be at most {MAX_TOOL_CHARS} characters"),
            ));
        }
        if p.reason.trim().is_empty() {
            return Err(Error::invalid("params.reason", "must not be empty"));
        }
        self.check_asker(ctx, &session)?;
        let e = escalation(&p);
        let plan = ToolPlan {
            permission: tag,
            outside_workdir: vec![],
            summary: p.reason.clone(),
        };
        let mode = session.mode();
        let guarded = self.is_guarded(&session);
        let force_ask = p.force_ask || guarded;
        let verdict = match permissions::decide(mode, &plan, session.row().deny_exec) {
            Verdict::Deny => return Ok(answer(false, Scope::Once, "mode")),
            Verdict::Allow if !force_ask => return Ok(answer(true, Scope::Once, "mode")),
            _ => Verdict::Ask,
        };
        // `args.onceOnly` asks a person every time: no stored rule answers for one
        // (capability `onceOnlyScope`; upstream skips the allowlist for it too).
        if !e.payment
            && !e.once_only
            && !guarded
            && self
                .stored_rule_allows(&session, verdict, &p.tool, &e, &plan)
                .await
        {
            return Ok(answer(true, Scope::Once, "allowlist"));
        }
        let (turn_id, cancel) = {
            let turns = session.turns();
            match &turns.running {
                Some(t) => (t.turn_id.clone(), t.cancel.clone()),
                None => (String::new(), CancellationToken::new()),
            }
        };
        let risk = p
            .risk
            .clone()
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| permissions::risk(tag).to_owned());
        let scope_hint = if guarded {
            "once"
        } else if e.dev_server.is_some() {
            "project"
        } else if e.site.is_some() {
            "site"
        } else {
            "once"
        };
        let resolution = self
            .request(
                &session,
                Ask {
                    guard: guarded.then_some(crate::agents::set_agent::GUARD_AGENT_SWITCH),
                    turn_id: &turn_id,
                    tool: &p.tool,
                    args: &e.args,
                    note: p.reason.clone(),
                    risk: &risk,
                    site: e.site.clone(),
                    scope_hint,
                },
                &cancel,
            )
            .await;
        if !resolution.allow {
            return Ok(answer(false, Scope::Once, resolution.by));
        }
        if guarded {
            // A guarded turn's answers are never remembered.
            return Ok(answer(true, Scope::Once, resolution.by));
        }
        if e.once_only {
            // The host may keep the person's pick on its side; core stores nothing.
            return Ok(answer(true, resolution.scope, resolution.by));
        }
        let scope = allowed_scope(&p.tool, &e, resolution.scope);
        self.store_ask_answer(&session, &p.tool, &e, scope).await;
        Ok(answer(true, scope, resolution.by))
    }

    /// Only the session's origin connection, or a connection of its `hostToolsFrom` host,
    /// may escalate for it — for a subagent, those of a session it was delegated from too
    /// (it runs its parent's host tools, `HostTools::host_session`).
    fn check_asker(&self, ctx: &CallContext, session: &Session) -> Result<()> {
        let Some(conn) = ctx.connection_id.as_deref() else {
            return Ok(()); // In-process callers (tests, internal rpcs).
        };
        let info = self.hub.connection(conn);
        let hosts = |s: &Session| {
            s.origin().as_deref() == Some(conn)
                || s.host_tools_from().is_some_and(|h| {
                    info.as_ref().is_some_and(|c| {
                        c.client_id.as_deref() == Some(h.as_str())
                            || c.instance_id.as_deref() == Some(h.as_str())
                    })
                })
        };
        if hosts(session) || self.lineage(&session.id).iter().any(|s| hosts(s)) {
            Ok(())
        } else {
            Err(Error::Unauthorized(
                "approval.ask comes from the session's host: its origin connection or the client named by its hostToolsFrom".into(),
            ))
        }
    }

    async fn stored_rule_allows(
        &self,
        session: &Arc<Session>,
        verdict: Verdict,
        tool: &str,
        e: &Escalation,
        plan: &ToolPlan,
    ) -> bool {
        let allowlist: &Allowlist = &self.allowlist;
        if let Some(origin) = &e.dev_server {
            if allowlist
                .host_rule(session, tool, origin, Some(DEV_SERVER_REASON))
                .await
            {
                return true;
            }
        }
        if let Some(site) = &e.site {
            if allowlist.host_rule(session, tool, site, None).await {
                return true;
            }
        }
        allowlist
            .allows(session, verdict, tool, &e.args, plan)
            .await
    }

    async fn store_ask_answer(&self, session: &Session, tool: &str, e: &Escalation, scope: Scope) {
        let allowlist: &Allowlist = &self.allowlist;
        match scope {
            Scope::Once => {}
            Scope::Site => {
                if let Some(site) = &e.site {
                    allowlist
                        .store_host_rule(
                            session,
                            crate::permission::Scope::Always,
                            tool,
                            site,
                            None,
                        )
                        .await;
                }
            }
            Scope::Project if e.dev_server.is_some() => {
                let origin = e.dev_server.as_deref().unwrap_or_default();
                allowlist
                    .store_host_rule(
                        session,
                        crate::permission::Scope::Project,
                        tool,
                        origin,
                        Some(DEV_SERVER_REASON),
                    )
                    .await;
            }
            Scope::Session | Scope::Project | Scope::Always => {
                if let Some(s) = scope.allowlist() {
                    allowlist.store_answer(session, s, tool, &e.args).await;
                }
            }
        }
    }
}
