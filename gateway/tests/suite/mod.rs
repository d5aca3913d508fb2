//! Test modules; `harness` starts things, `client` talks JSON-RPC, `fake` is the service.

pub mod client;
pub mod fake;
pub mod harness;

mod bus;
mod forwarding;
mod handshake;
mod http;
mod info;
mod jsonrpc;
mod layers;
mod lifecycle;
mod preauth;
mod sizes;
mod wide;
