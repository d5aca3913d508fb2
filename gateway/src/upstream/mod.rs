//! Layer 2, upstream (docs/ARCHITECTURE.md "Gateway layers"): the services of the suite
//! as the gateway sees them — one cached gRPC channel each, the small `ServiceBus` calls,
//! the presence stream that tells every service which connections are live, and one
//! `Subscribe` loop per service that turns its bus stream into [`subscribe::UpstreamEvent`]s
//! on a channel. Knows no connection, route or method; takes only what it needs.

pub mod bus;
pub mod presence;
pub mod services;
pub mod subscribe;
