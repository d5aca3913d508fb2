//! Throwaway probes for `mcp.test` and `mcp.add{test:true}` (issue 6): a fresh connection
//! (its own child process for stdio), `initialize` + `tools/list` within the entry's start
//! timeout, then the connection is closed and the child reaped. Nothing is hosted or written.

use std::time::Instant;

use crate::config::ServerEntry;
use crate::host::connect::{self, SpawnContext};

/// A tool the probe found.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeTool {
    /// Tool name.
    pub name: String,
    /// Its description.
    pub description: String,
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeReport {
    /// True when the server answered tools/list.
    pub ok: bool,
    /// The tools, after the entry's include/exclude filters.
    pub tools: Vec<ProbeTool>,
    /// The spawn or protocol error, verbatim.
    pub error: Option<String>,
    /// How long the probe took.
    pub elapsed_ms: i64,
}

/// Probes `entry`.
pub async fn probe(entry: &ServerEntry, ctx: &SpawnContext) -> ProbeReport {
    let started = Instant::now();
    let outcome = connect::connect(entry, ctx).await;
    let elapsed_ms = started.elapsed().as_millis() as i64;
    match outcome {
        Ok(conn) => {
            let tools = conn
                .tools
                .iter()
                .filter(|t| entry.tool_allowed(&t.name))
                .map(|t| ProbeTool {
                    name: t.name.to_string(),
                    description: t.description.as_deref().unwrap_or_default().to_owned(),
                })
                .collect();
            connect::shutdown(conn).await;
            ProbeReport {
                ok: true,
                tools,
                error: None,
                elapsed_ms,
            }
        }
        Err(e) => ProbeReport {
            ok: false,
            tools: Vec::new(),
            error: Some(e.0),
            elapsed_ms,
        },
    }
}
