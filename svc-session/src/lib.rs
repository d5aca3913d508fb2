//! svc-session: sessions, turns, the agent loop, built-in tools, approvals and providers
//! (`snowpea.session.v1`, DESIGN.md §6).
//!
//! Layout (docs/ARCHITECTURE.md "svc-session components" has the table): [`app`] composes
//! the components, each in the folder named after its JSON-RPC family and owning its state
//! and tables — e.g. [`session::Sessions`] (`session.*`, origin connection), [`turn::Turns`]
//! (prompt queue, interrupt, the agent loop), [`events::EventLog`] (seq assignment, group
//! commit, publish; [`recovery`] repairs a crash). [`rpc`] holds the gRPC trait impls that
//! delegate to them; [`clients`] the clients of other services; [`store`] the SQL;
//! [`permissions`] the mode matrix; [`error`] the one wire mapping.

pub mod agents;
pub mod app;
pub mod approval;
pub mod attachments;
pub mod backend;
pub mod checkpoints;
pub mod clients;
pub mod commands;
pub mod compaction;
pub mod events;
pub mod file;
pub mod hooks;
pub mod host_tools;
pub mod llm;
pub mod lsp;
pub mod models;
pub mod permission;
pub mod permissions;
pub mod question;
pub mod recovery;
pub mod rpc;
pub mod runs;
pub mod session;
pub mod settings;
pub mod setup;
pub mod store;
pub mod teams;
pub mod tools;
pub mod turn;
pub mod usage;
pub mod web;

pub use app::{App, AppConfig};

/// Capabilities this service really implements (`system.hello`).
pub const CAPABILITIES: &[&str] = &[
    "sessions",
    "approvals",
    "tools",
    "checkpoints",
    "providerModelsError",
    "settings",
    "setup",
    "commands",
    "llmSample",
    "webSearch",
    "sessionSetAgent",
    "setAgentGuardTurn",
    "hostTools",
    "hostToolParallel",
    "batchedFileTools",
    "toolInvokeGuard",
    "lsp",
    "sessionAttachments",
    "sessionContinue",
    // llama.cpp's timings in the usage event (issue 32 item 8; `provider/openai.rs`).
    "llmTimings",
    // approval.ask's scope rules (issue 32 item 8; `approval/ask.rs`).
    "onceOnlyScope",
    "pageActionAlways",
    "tabReadAlways",
];

#[cfg(test)]
pub(crate) mod testkit;

#[cfg(test)]
mod input_bounds_tests;
