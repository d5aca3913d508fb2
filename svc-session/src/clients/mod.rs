//! svc-session's clients of the other services, one file each, named after the service
//! they call: [`memory`] (recall and the memory tools), [`mcp`] (MCP tools inside turns),
//! [`scheduler`] (the schedule tools), [`audio`] (autoSpeak) and [`chat`] (deleted binding
//! targets). Every call has a deadline;
//! a service being down never fails a turn.

pub mod audio;
pub mod chat;
pub mod mcp;
pub mod memory;
pub mod scheduler;
