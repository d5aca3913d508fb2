//! svc-chat service tests.

mod connection;
mod service;
mod targets;
