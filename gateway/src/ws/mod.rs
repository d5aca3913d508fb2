//! The WebSocket side of the gateway: one task per connection reading JSON-RPC
//! messages, one writer per connection draining its bounded outbound queue, and the
//! registry of live connections.

pub mod connection;
pub mod handle;
pub mod incoming;
pub mod outbound;
pub mod registry;
