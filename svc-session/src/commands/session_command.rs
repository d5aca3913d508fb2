//! `/session-command [list] [--risk=<tier>]` (read): every command of this session with its
//! risk tier, whether a headless call needs `--yes`, its read forms and usage — what
//! `snowpea cmd session-command list` and the `session_command_list` tool show.

use serde_json::{json, Value};

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/session-command`.
pub struct SessionCommand;

/// The rows of the listing, optionally only one tier.
pub fn rows(cx: &Commands, workdir: Option<&std::path::Path>, risk: Option<&str>) -> Vec<Value> {
    cx.table(workdir)
        .into_iter()
        .filter(|c| risk.is_none_or(|r| r == c.risk.as_str()))
        .map(|c| {
            json!({
                "name": c.name,
                "summary": c.summary,
                "source": c.source,
                "risk": c.risk.as_str(),
                "needsConfirm": c.risk.needs_confirm(),
                "readForms": c.args_schema.get("x-readForms").cloned().unwrap_or(json!([])),
                "usage": c.args_schema.get("x-usage").cloned().unwrap_or(Value::Null),
                "available": c.args_schema.get("x-available").and_then(Value::as_bool).unwrap_or(true),
            })
        })
        .collect()
}

impl Builtin for SessionCommand {
    fn name(&self) -> &'static str {
        "session-command"
    }
    fn summary(&self) -> &'static str {
        "List every command with its risk tier and whether it needs confirmation"
    }
    fn usage(&self) -> &'static str {
        "/session-command [list] [--risk=read|low_write|medium_write|high_risk]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["list"]
    }
    fn risk(&self) -> Risk {
        Risk::Read
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let a = &call.args;
            a.only_options(&["risk"]).map_err(Failure::args)?;
            if let Some(s) = a.sub().filter(|s| *s != "list") {
                return Err(Failure::args(format!("unknown subcommand {s:?}; use list")));
            }
            let risk = a.options.get("risk").map(String::as_str);
            if let Some(r) = risk {
                if !["read", "low_write", "medium_write", "high_risk"].contains(&r) {
                    return Err(Failure::args(format!(
                        "--risk must be read, low_write, medium_write or high_risk, not {r:?}"
                    )));
                }
            }
            let rows = rows(cx, Some(&call.session.workdir()), risk);
            let mut text = String::new();
            for r in &rows {
                text.push_str(&format!(
                    "\n  {:<16} {:<13} {}",
                    r["name"].as_str().unwrap_or_default(),
                    r["risk"].as_str().unwrap_or_default(),
                    if r["needsConfirm"].as_bool() == Some(true) {
                        "needs --yes"
                    } else {
                        ""
                    }
                ));
            }
            Ok(Reply::done(
                format!("{} commands{text}", rows.len()),
                json!({ "commands": rows }),
            ))
        })
    }
}
