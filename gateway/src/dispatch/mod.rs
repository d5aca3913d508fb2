//! Layer 4, dispatch (docs/ARCHITECTURE.md "Gateway layers"): one client request or
//! notification from handshake check to answer — [`router`] validates and routes it,
//! [`system`], [`info`], [`hello`] and [`update`] answer the `system.*` methods the gateway owns
//! (typed through [`typed`]), everything else is forwarded through the route layer.

pub mod hello;
pub mod info;
pub mod router;
pub mod system;
pub mod typed;
pub mod update;
