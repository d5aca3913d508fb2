//! svc-session: sessions, turns, the agent loop, built-in tools, approvals and providers
//! (`snowpea.session.v1`, DESIGN.md §6).
//!
//! Layout (docs/ARCHITECTURE.md "svc-session components"): [`app`] composes the
//! components, each owning its state and tables — [`session::Sessions`] (`session.*`,
//! origin connection), [`turn::Turns`] (prompt queue, interrupt, the agent loop),
//! [`events::EventLog`] (seq assignment, group commit, publish; [`recovery`] repairs a
//! crash), [`approval::Approvals`], [`tools::Tools`], [`provider::Providers`], [`models::Models`]
//! (model routing and effort),
//! [`checkpoints::Checkpoints`] (per-turn workdir checkpoints), [`runs::Runs`] (svc-scheduler's unattended runs). [`rpc`] holds the gRPC trait impls
//! that delegate to them; [`clients`] the clients of other services; [`store`] the SQL;
//! [`permissions`] the mode matrix; [`error`] the one wire mapping.

pub mod app;
pub mod approval;
pub mod attachments;
pub mod checkpoints;
pub mod clients;
pub mod compaction;
pub mod error;
pub mod events;
pub mod models;
pub mod permissions;
pub mod provider;
pub mod recovery;
pub mod rpc;
pub mod runs;
pub mod session;
pub mod store;
pub mod tools;
pub mod turn;

pub use app::{App, AppConfig};

/// Capabilities this service really implements (`system.hello`).
pub const CAPABILITIES: &[&str] = &["sessions", "approvals", "tools", "checkpoints"];

#[cfg(test)]
pub(crate) mod testkit;
