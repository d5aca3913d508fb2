//! `/mcp [status|enable|disable|reconnect] [server]`: `status` (bare) lists the MCP servers
//! visible from the session's workdir with their state (read, through svc-mcp). `enable` /
//! `disable` are svc-mcp's `mcp.update{patch: {disabled}}` of the file that declares the
//! server, `reconnect` its `mcp.reload{name}` (medium_write each).

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
                    call.args.only_options(&[]).map_err(Failure::args)?;
                    let Some(server) = call.args.words.get(1) else {
                        return Err(Failure::args(format!("usage: /mcp {s} <server>")));
                    };
                    let client = cx.tools.mcp();
                    let wd = call.session.workdir();
                    let done = match s {
                        "reconnect" => client.reload(server, &wd).await.map(|_| ()),
                        _ => client.set_disabled(server, s == "disable", &wd).await,
                    };
                    match done {
                        Ok(()) => Ok(Reply::done(
                            format!("{server}: {s} done"),
                            json!({"server": server, "action": s, "ok": true}),
                        )),
                        Err(e) => {
                            let code = e.code.wire();
                            Err(Failure {
                                code,
                                stable: match code {
                                    "not_found" | "mcp_not_found" => super::codes::NOT_FOUND,
                                    "invalid_params" | "mcp_invalid" | "mcp_read_only" => {
                                        super::codes::INVALID_ARGS
                                    }
                                    _ => super::codes::EXECUTION_FAILED,
                                },
                                message: format!("/mcp {s} {server}: {}", e.message),
                            })
                        }
                    }
                }
                Some(other) => Err(Failure::args(format!("unknown /mcp subcommand {other:?}"))),
            }
        })
    }
}
