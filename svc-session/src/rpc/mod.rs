//! gRPC implementations of the `snowpea.session.v1` services this process serves, one
//! file per service, named after its JSON-RPC family (`session.*` → [`session`],
//! `question.*` → [`question`], …; docs/ARCHITECTURE.md "svc-session components" has the
//! table). Each file only delegates to its component. Methods not implemented here answer
//! the generated default
//! (`UNIMPLEMENTED` → `not_implemented` at the gateway). Spans, timing and outcome
//! codes come from the shared call layer in `snowpea_common::calls` (installed by `serve`).

pub mod agent;
pub mod approval;
pub mod backend;
pub mod channel_internal;
pub mod checkpoint;
pub mod command;
pub mod file;
pub mod internal;
pub mod llm;
pub mod lsp;
pub mod permission;
pub mod provider;
pub mod question;
pub mod session;
pub mod settings;
pub mod setup;
pub mod skill;
pub mod team;
pub mod tool;
pub mod usage;
pub mod web;
