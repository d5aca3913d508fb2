//! `/help [name]` (read): the commands of this session, or one command's usage and tier.

use serde_json::json;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/help`.
pub struct Help;

impl Builtin for Help {
    fn name(&self) -> &'static str {
        "help"
    }
    fn summary(&self) -> &'static str {
        "List the slash commands, or show one command's usage and risk tier"
    }
    fn usage(&self) -> &'static str {
        "/help [command]"
    }
    fn risk(&self) -> Risk {
        Risk::Read
    }
    fn tier(&self, _args: &super::Args) -> Risk {
        Risk::Read
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let table = cx.table(Some(&call.session.workdir()));
            if let Some(name) = call.args.sub() {
                let name = name.trim_start_matches('/');
                let Some(c) = table.iter().find(|c| c.name == name) else {
                    return Err(Failure::not_found(format!("unknown command /{name}")));
                };
                let usage = c.args_schema["x-usage"].as_str().unwrap_or_default();
                return Ok(Reply::done(
                    format!("{usage}\n{} [{}; {}]", c.summary, c.risk.as_str(), c.source),
                    json!({"name": c.name, "summary": c.summary, "source": c.source, "risk": c.risk.as_str(), "argsSchema": c.args_schema}),
                ));
            }
            let mut text = String::from("Commands:\n");
            for c in &table {
                text.push_str(&format!(
                    "  /{:<16} {} [{}]\n",
                    c.name,
                    c.summary,
                    c.risk.as_str()
                ));
            }
            let list: Vec<_> = table
                .iter()
                .map(|c| json!({"name": c.name, "summary": c.summary, "source": c.source, "risk": c.risk.as_str()}))
                .collect();
            Ok(Reply::done(text.trim_end(), json!({ "commands": list })))
        })
    }
}
