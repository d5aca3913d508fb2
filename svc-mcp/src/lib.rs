//! svc-mcp: owns every MCP server connection and child process (issue 6), served as
//! `snowpea.mcp.v1` on a unix socket (DESIGN.md §6). A misbehaving MCP server, or a crash of
//! svc-mcp itself, never takes a session down: sessions reach MCP tools only through the
//! internal RPC and carry on without them while svc-mcp is away.
//!
//! Layout: [`config`] (`.mcp.json` scopes, discovery, atomic order-preserving writes) ·
//! [`validate`] (rules and security findings) · [`secrets`] · [`catalog`] (presets) ·
//! [`host`] (one supervisor task per server, the process guard, transports) · [`probe`]
//! (`mcp.test`) · [`sessions`] (workdir resolution) · [`rpc`] (the gRPC services) ·
//! [`error`] (the one mapping to protocol errors).

pub mod catalog;
pub mod config;
pub mod error;
pub mod host;
pub mod probe;
pub mod rpc;
pub mod secrets;
pub mod sessions;
pub mod validate;

/// Capabilities this service implements (`system.hello`).
pub const CAPABILITIES: &[&str] = &["mcp"];

/// Installs rustls' ring provider for the HTTP transports (reqwest is built without a
/// default provider so no aws-lc is compiled). Idempotent.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
