//! Integration tests of snowpea-sdk against a fake JSON-RPC WebSocket daemon
//! (`suite/fake_server.rs`), one test binary with a module per area.

mod suite;
