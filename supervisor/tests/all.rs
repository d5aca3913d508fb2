//! Integration tests of the `snowpea` binary: one test binary, modules under `suite/`.
//!
//! They run the real `snowpea` on a temp home with `SNOWPEA_BIN_DIR` pointing at fake
//! service and gateway binaries (see `suite/fake.rs`), so the supervisor is tested on its
//! own, independent of the real services.

mod suite;
