//! Suite-level tests and benchmarks (`tests/`, `snowpea-bench`) that drive the real binaries.
//! The suite harness itself is part of the test kit, [`snowpea_testkit::suite`]; it is
//! re-exported here so the tests and the benchmark name it `snowpea_e2e::…`.

pub use snowpea_testkit::suite::*;
