//! The system prompt of a session's model calls: who the agent is, where it works and
//! what it may use.

use std::sync::Arc;

use crate::store::sessions::SessionRow;
use crate::tools::Tool;

/// Builds the system prompt for a session.
pub fn build(row: &SessionRow, tools: &[Arc<dyn Tool>]) -> String {
    let names: Vec<_> = tools.iter().map(|t| t.name()).collect();
    format!(
        "You are Snowpea, a local coding agent working for the user on their machine.\n\
         Working directory: {workdir}. Relative paths resolve there; leaving it needs the user's approval.\n\
         Session workspace: {ws} (use tmp/ for scratch files and artifacts/ for files meant for the user).\n\
         Permission mode: {mode}. Some tool calls may be refused or need approval; when a call is denied, \
         do not retry it unchanged — explain or choose another way.\n\
         Tools: {tools}.\n\
         Be concise; report what you changed.",
        workdir = row.workdir,
        ws = row.workspace_dir,
        mode = row.mode,
        tools = names.join(", "),
    )
}
