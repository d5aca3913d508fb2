//! svc-session's clients of the other services, one file each, named after the service
//! they call: [`memory`] (recall and the memory tools), [`mcp`] (MCP tools inside turns),
//! [`scheduler`] (the schedule tools) and [`audio`] (autoSpeak). Every call has a deadline;
//! a service being down never fails a turn.

pub mod audio;
pub mod mcp;
pub mod memory;
pub mod scheduler;
