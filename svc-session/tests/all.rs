//! Integration tests of the `snowpea-svc-session` binary (one test binary, modules under
//! `suite/`).

mod suite;
