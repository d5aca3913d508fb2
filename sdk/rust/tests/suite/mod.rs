//! Test modules; `fake_server` is the shared harness.

mod calls;
mod fake_server;
mod handshake;
mod host_tools;
mod lifecycle;
mod reconnect;
mod requests;
