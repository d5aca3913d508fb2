//! svc-mcp: owns every MCP server connection and child process (issue 6), served as
//! `snowpea.mcp.v1` on a unix socket (DESIGN.md §6). A misbehaving MCP server, or a crash of
//! svc-mcp itself, never takes a session down: sessions reach MCP tools only through the
//! internal RPC and carry on without them while svc-mcp is away.
//!
//! Project `.mcp.json` entries run only once trusted ([`trust`]): a cloned repository never
//! gets code execution by being listed. An entry starts when it was written through
//! `mcp.add`/`mcp.update` exactly as it is on disk (its fingerprint is recorded under
//! `$SNOWPEA_HOME/state/`), or when the project is listed in the global settings
//! `mcp.trustedProjects`; an entry with security findings only when written with force.
//! Untrusted entries are listed in the `error` state saying why and how to trust them.
//!
//! Layout: [`config`] (`.mcp.json` scopes, discovery, atomic order-preserving writes) ·
//! [`trust`] (the trust step of project entries) ·
//! [`validate`] (rules and security findings; [`wrappers`]: what a command line really
//! runs) · [`secrets`] · [`catalog`] (presets) ·
//! [`patch`] (`mcp.update`'s patch: keep, set or clear each field) ·
//! [`host`] (one supervisor task per server, the process guard, transports) · [`probe`]
//! (`mcp.test`) · [`sessions`] (workdir resolution) · [`api`] (the logic of each gRPC service) · [`rpc`] (the generated traits over it) ·
//! [`error`] (the one mapping to protocol errors) · [`clip`] (bounded log fields).

pub mod api;
pub mod catalog;
pub mod clip;
pub mod config;
pub mod error;
pub mod host;
pub mod patch;
pub mod probe;
pub mod redact;
pub mod rpc;
pub mod secrets;
pub mod sessions;
pub mod trust;
pub mod validate;
pub mod wrappers;

/// Capabilities this service implements (`system.hello`).
pub const CAPABILITIES: &[&str] = &["mcp"];

/// Installs rustls' ring provider for the HTTP transports (reqwest is built without a
/// default provider so no aws-lc is compiled). Idempotent.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
