//! `/memory search <query>` (read; bare lists the usage): searches the memories of this
//! session's project through the `search_memory` tool. `/memory forget <id>` (high_risk)
//! forgets one stored memory through svc-memory's `memory.delete` (the ids are the ones
//! `/memory search` and `memory.list` report); an id svc-memory does not hold is
//! `not_found`, svc-memory being down `unavailable`.

use serde_json::json;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};
use crate::clients::memory::MemoryError;

/// `/memory`.
pub struct Memory;

/// Longest memory id `/memory forget` takes, in bytes.
pub const MAX_ID_BYTES: usize = 200;

impl Builtin for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn summary(&self) -> &'static str {
        "Search this project's memories, or forget one"
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
                Some("forget") => {
                    a.only_options(&[]).map_err(Failure::args)?;
                    let id = a.rest();
                    let id = id.trim();
                    if id.is_empty() || id.contains(char::is_whitespace) {
                        return Err(Failure::args("usage: /memory forget <id> (one memory id)"));
                    }
                    if id.len() > MAX_ID_BYTES {
                        return Err(Failure::args(format!(
                            "a memory id is at most {MAX_ID_BYTES} bytes"
                        )));
                    }
                    match cx.peers.memory.delete(id).await {
                        Ok(()) => Ok(Reply::done(
                            format!("forgot memory {id}"),
                            json!({"id": id, "forgotten": true}),
                        )),
                        Err(MemoryError::Refused(e)) if e.code.wire() == "not_found" => {
                            Err(Failure::not_found(format!("no memory {id}")))
                        }
                        Err(MemoryError::Refused(e)) if e.code.wire() == "invalid_params" => {
                            Err(Failure::args(e.message))
                        }
                        Err(e) => Err(Failure::failed("unavailable", e.to_string())),
                    }
                }
                Some(other) => Err(Failure::args(format!(
                    "unknown /memory subcommand {other:?}"
                ))),
            }
        })
    }
}
