//! `/memory search <query>` (read; bare lists the usage): searches the memories of this
//! session's project through the `search_memory` tool. `forget <id>` needs a delete call
//! svc-session does not have in this build and answers `not_implemented` (use
//! `memory.delete`).

use serde_json::json;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/memory`.
pub struct Memory;

impl Builtin for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn summary(&self) -> &'static str {
        "Search this project's memories"
    }
    fn usage(&self) -> &'static str {
        "/memory [search <query> [--limit=N]|forget <id>]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["search", "forget"]
    }
    fn risk(&self) -> Risk {
        Risk::HighRisk
    }
    fn tier(&self, args: &super::Args) -> Risk {
        match args.sub() {
            Some("forget") => Risk::HighRisk,
            _ => Risk::Read,
        }
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let a = &call.args;
            match a.sub() {
                None => Ok(Reply::done(self.usage(), json!({"usage": self.usage()}))),
                Some("search") => {
                    a.only_options(&["limit"]).map_err(Failure::args)?;
                    let q = a.rest();
                    if q.trim().is_empty() {
                        return Err(Failure::args("usage: /memory search <query>"));
                    }
                    let mut args = json!({"query": q});
                    if let Some(l) = a.options.get("limit") {
                        let n: u64 = l
                            .parse()
                            .map_err(|_| Failure::args("--limit must be a positive integer"))?;
                        args["limit"] = json!(n);
                    }
                    let out = cx.run_tool(&call.session, "search_memory", args).await?;
                    Ok(Reply::done(out.content, out.meta))
                }
                Some("forget") => Err(Failure::not_implemented(
                    "/memory forget is not wired to svc-memory in this build; use memory.delete",
                )),
                Some(other) => Err(Failure::args(format!(
                    "unknown /memory subcommand {other:?}"
                ))),
            }
        })
    }
}
