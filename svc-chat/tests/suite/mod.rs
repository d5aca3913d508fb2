//! svc-chat service tests.

mod service;
mod targets;
