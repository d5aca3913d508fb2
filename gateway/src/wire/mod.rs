//! Layer 1, the wire basics (docs/ARCHITECTURE.md "Gateway layers"): JSON-RPC framing,
//! limits, counters, and what the gateway holds of one client connection and of all of
//! them. Nothing here knows a service, a route or a method.

pub mod connection;
pub mod counters;
pub mod json_budget;
pub mod jsonrpc;
pub mod large;
pub mod limits;
pub mod preauth;
pub mod registry;
pub mod socket;
