//! `/allowlist [list [--scope=…]|add <pattern> [--scope=…]|remove <id>]`: bare or `list`
//! shows the allowlist entries that apply to this session — its own and the other live
//! sessions' of its workdir, the project's and the global ones (`permission.allowlist.list`
//! with this session's workdir; read); `add` is `/allow` (medium_write); `remove` deletes
//! an entry by id wherever it is stored (`permission.allowlist.remove`; unknown →
//! `not_found`; medium_write).

use serde_json::json;
use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/allowlist`.
pub struct Allowlist;

/// The entries that apply to `call`'s session (of `--scope` when given).
pub(super) async fn list(cx: &Commands, call: &Call) -> std::result::Result<Reply, Failure> {
    let scope = match call.args.options.get("scope") {
        Some(_) => Some(super::allow::scope_of(call)?.as_str().to_owned()),
        None => None,
    };
    let r = cx
        .peers
        .allowlist
        .list(
            &CallContext::default(),
            pb::PermissionAllowlistListParams {
                scope,
                workdir: Some(call.session.workdir().to_string_lossy().into_owned()),
                ..Default::default()
            },
        )
        .await
        .map_err(Failure::from_error)?;
    let mut text = format!("{} allowlist entries", r.patterns.len());
    for p in &r.patterns {
        text.push_str(&format!(
            "\n  {}  {:<8} {}",
            p.pattern_id, p.scope, p.pattern
        ));
    }
    let data: Vec<_> = r
        .patterns
        .iter()
        .map(|p| {
            json!({
                "patternId": p.pattern_id,
                "pattern": p.pattern,
                "scope": p.scope,
                "tool": p.tool,
                "createdAt": p.created_at,
            })
        })
        .collect();
    Ok(Reply::done(text, json!({"patterns": data})))
}

impl Builtin for Allowlist {
    fn name(&self) -> &'static str {
        "allowlist"
    }
    fn summary(&self) -> &'static str {
        "Show, add to or remove from the allowlist that applies to this session"
    }
    fn usage(&self) -> &'static str {
        "/allowlist [list|add <pattern>|remove <id>] [--scope=session|project|always]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["list", "add", "remove"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let a = &call.args;
            match a.sub() {
                None | Some("list") => {
                    a.only_options(&["scope"]).map_err(Failure::args)?;
                    if a.words.len() > 1 {
                        return Err(Failure::args(format!(
                            "/allowlist list takes no words; usage: {}",
                            self.usage()
                        )));
                    }
                    list(cx, call).await
                }
                Some("add") => super::allow::add(cx, call, &a.words[1..]).await,
                Some("remove") => {
                    a.only_options(&[]).map_err(Failure::args)?;
                    let id = match &a.words[1..] {
                        [id] => id.trim().to_owned(),
                        [] => {
                            return Err(Failure::args(
                                "usage: /allowlist remove <id> (ids are in /allowlist list)",
                            ))
                        }
                        more => {
                            return Err(Failure::args(format!(
                                "/allowlist remove takes one id, got {}",
                                more.len()
                            )))
                        }
                    };
                    cx.peers
                        .allowlist
                        .remove(
                            &CallContext::default(),
                            pb::PermissionAllowlistRemoveParams {
                                pattern_id: id.clone(),
                                workdir: Some(
                                    call.session.workdir().to_string_lossy().into_owned(),
                                ),
                                ..Default::default()
                            },
                        )
                        .await
                        .map_err(Failure::from_error)?;
                    Ok(Reply::done(
                        format!("removed allowlist entry {id}"),
                        json!({"patternId": id, "removed": true}),
                    ))
                }
                Some(other) => Err(Failure::args(format!(
                    "unknown /allowlist subcommand {other:?}: use list, add or remove"
                ))),
            }
        })
    }
}
