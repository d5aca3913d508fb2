//! svc-session: sessions, turns, the agent loop, built-in tools, approvals and providers
//! (`snowpea.session.v1`, DESIGN.md §6).

pub mod provider;
pub mod tools;
