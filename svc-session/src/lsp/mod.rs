//! Language servers (`lsp.catalog`, `lsp.status`, the `lsp.diagnostics` event and the
//! `lsp_*` tools; protocol 1.25.0, issue 23, upstream-behaviour §9). LSP always runs on the
//! daemon host: sessions whose tools run over ssh or in a container get none.
//!
//! * [`catalog`]: the built-in table, `lsp.servers` / `lsp.disabled` / `lsp.enabled`;
//! * [`client`]: one server over stdio (`lsp-server` framing, `lsp-types` shapes);
//! * [`manager`]: the [`Lsp`] component, one server per (server, root), lazy start, idle
//!   stop, restart once then `broken`, diagnostics after edits;
//! * [`tools`]: `lsp_definition`, `lsp_references`, `lsp_hover`, `lsp_symbols`,
//!   `lsp_diagnostics`, `lsp_rename_preview`, `lsp_workspace_symbols`.

pub mod catalog;
pub mod client;
pub mod manager;
pub mod tools;

pub use manager::{Lsp, LspTimes, Report};

#[cfg(test)]
#[path = "lsp_tests.rs"]
mod tests;
