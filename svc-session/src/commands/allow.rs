//! `/allow <pattern> [--scope=session|project|always]` (medium_write; bare shows the usage
//! and this session's allowlist, read): promotes a pattern from ask to allow —
//! `permission.allowlist.add` for this session ([`crate::permission::Allowlist::add_for`]).
//! The pattern is the words after the name: `tool:<name>` (a glob), a tool's bare name
//! (`/allow web_fetch` is `tool:web_fetch`), or a command prefix of `shell`
//! (`/allow cargo test`). The default scope is `project` (this session's workdir), as for
//! the method; a duplicate keeps its id. A match only turns an "ask" into an "allow"
//! (never a deny, never in plan mode, never for a `config`/`secret` call).

use serde_json::json;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};
use crate::permission::Scope;

/// `/allow`.
pub struct Allow;

/// The allowlist pattern of the words of `/allow` or `/allowlist add`: a built-in tool's bare
/// name becomes `tool:<name>`; anything else is taken as written.
pub(super) fn pattern_of(cx: &Commands, words: &[String]) -> std::result::Result<String, Failure> {
    let text = words.join(" ");
    let text = text.trim();
    if text.is_empty() {
        return Err(Failure::args(
            "missing pattern: give tool:<name>, a tool name, or a command prefix such as `cargo test`",
        ));
    }
    if words.len() == 1 && cx.tools.builtin().iter().any(|t| t.name() == text) {
        return Ok(format!("tool:{text}"));
    }
    Ok(text.to_owned())
}

/// The scope of `--scope` (default `project`).
pub(super) fn scope_of(call: &Call) -> std::result::Result<Scope, Failure> {
    match call.args.options.get("scope").map(String::as_str) {
        None => Ok(Scope::Project),
        Some(s) => Scope::parse(s).ok_or_else(|| {
            Failure::args(format!(
                "--scope must be session, project or always, not {s:?}"
            ))
        }),
    }
}

/// Adds the pattern of `words` in the scope of `call` and replies with its id.
pub(super) async fn add(
    cx: &Commands,
    call: &Call,
    words: &[String],
) -> std::result::Result<Reply, Failure> {
    call.args.only_options(&["scope"]).map_err(Failure::args)?;
    let scope = scope_of(call)?;
    let pattern = pattern_of(cx, words)?;
    let id = cx
        .peers
        .allowlist
        .add_for(&call.session, scope, &pattern)
        .await
        .map_err(|e| {
            let f = Failure::from_error(e);
            Failure {
                message: format!("pattern {pattern:?}: {}", f.message),
                ..f
            }
        })?;
    Ok(Reply::done(
        format!(
            "allowed {pattern:?} ({} scope) as {id}; /allowlist remove {id} undoes it",
            scope.as_str()
        ),
        json!({"patternId": id, "pattern": pattern, "scope": scope.as_str()}),
    ))
}

impl Builtin for Allow {
    fn name(&self) -> &'static str {
        "allow"
    }
    fn summary(&self) -> &'static str {
        "Always allow a tool or command prefix (permission.allowlist.add; default scope project)"
    }
    fn usage(&self) -> &'static str {
        "/allow <tool:name|tool|command prefix> [--scope=session|project|always]"
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            if call.args.words.is_empty() {
                call.args.only_options(&["scope"]).map_err(Failure::args)?;
                let listed = super::allowlist::list(cx, call).await?;
                return Ok(match listed {
                    Reply::Done { text, data } => {
                        Reply::done(format!("usage: {}\n{text}", self.usage()), data)
                    }
                    other => other,
                });
            }
            add(cx, call, &call.args.words).await
        })
    }
}
