//! Layer 5, the WebSocket side (docs/ARCHITECTURE.md "Gateway layers"): one task per
//! connection reading JSON-RPC messages ([`lifecycle`], [`incoming`]) and one writer per
//! connection draining its bounded outbound queue ([`outbound`]).

pub mod incoming;
pub mod lifecycle;
pub mod outbound;
