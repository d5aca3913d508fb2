//! Service-level tests of svc-memory: the real `snowpea-svc-memory` binary on a temp home,
//! called over its unix socket with the generated tonic clients (STYLE.md "Tests").

mod suite;
