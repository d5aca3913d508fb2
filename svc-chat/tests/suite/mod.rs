//! svc-chat service tests.

mod service;
