//! gRPC services of svc-scheduler: [`job`] (the protocol's `job.*` methods) and [`internal`]
//! (agent tools and the manual test clock; no JSON-RPC names).

pub mod internal;
pub mod job;
