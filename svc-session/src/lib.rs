//! svc-session: sessions, turns, the agent loop, built-in tools, approvals and providers
//! (`snowpea.session.v1`, DESIGN.md §6).
//!
//! Layout: [`app`] (shared state) · [`session`] (registry, create/list/close/rename/
//! setMode/attach/resume, origin connection) · [`turn`] (prompt queue, interrupt, the
//! agent loop, history) · [`approval`] (pending approvals) · [`permissions`] (mode
//! matrix) · [`events`] (seq assignment, group commit, publish) · [`store`] (SQLite) ·
//! [`recovery`] (crash repair) · [`memory`] (svc-memory recall and tools) · [`rpc`] (gRPC services) · [`provider`] · [`tools`].

pub mod app;
pub mod approval;
pub mod clients;
pub mod error;
pub mod events;
pub mod permissions;
pub mod provider;
pub mod recovery;
pub mod rpc;
pub mod session;
pub mod store;
pub mod tools;
pub mod turn;

pub use app::{App, AppConfig};

/// Capabilities this service really implements (`system.hello`).
pub const CAPABILITIES: &[&str] = &["sessions", "approvals", "tools"];

#[cfg(test)]
pub(crate) mod testkit;
