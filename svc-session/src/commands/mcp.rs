//! `/mcp [status|enable|disable|reconnect] [server]`: `status` (bare) lists the MCP servers
//! visible from the session's workdir with their state (read, through svc-mcp). Enabling,
//! disabling and reconnecting a server are `mcp.update` / `mcp.reload` of svc-mcp, which
//! svc-session cannot call in this build: they answer `not_implemented` (use those methods).

use serde_json::json;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};
use crate::clients::mcp::Unreachable;

/// `/mcp`.
pub struct Mcp;

impl Builtin for Mcp {
    fn name(&self) -> &'static str {
        "mcp"
    }
    fn summary(&self) -> &'static str {
        "Show the MCP servers of this workdir and their state"
    }
    fn usage(&self) -> &'static str {
        "/mcp [status|enable <server>|disable <server>|reconnect <server>]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status", "enable", "disable", "reconnect"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            match call.args.sub() {
                None | Some("status") => {
                    let listing =
                        cx.tools
                            .mcp()
                            .list(&call.session.workdir())
                            .await
                            .map_err(|e| {
                                Failure::failed(
                                    "unavailable",
                                    match e {
                                        Unreachable::Down(m) => {
                                            format!("svc-mcp is not reachable: {m}")
                                        }
                                        Unreachable::Slow(d) => {
                                            format!(
                                                "svc-mcp did not answer within {}s",
                                                d.as_secs()
                                            )
                                        }
                                    },
                                )
                            })?;
                    let mut text = format!("{} MCP servers", listing.servers.len());
                    let mut rows = Vec::new();
                    for s in &listing.servers {
                        let tools = listing.tools.iter().filter(|t| t.server == s.name).count();
                        text.push_str(&format!("\n  {:<20} {} ({tools} tools)", s.name, s.state));
                        if let Some(e) = &s.error {
                            text.push_str(&format!(": {e}"));
                        }
                        rows.push(json!({"name": s.name, "state": s.state, "error": s.error, "tools": tools}));
                    }
                    Ok(Reply::done(text, json!({ "servers": rows })))
                }
                Some(s @ ("enable" | "disable" | "reconnect")) => {
                    Err(Failure::not_implemented(format!(
                    "/mcp {s} is not wired to svc-mcp in this build; use mcp.update / mcp.reload"
                )))
                }
                Some(other) => Err(Failure::args(format!("unknown /mcp subcommand {other:?}"))),
            }
        })
    }
}
