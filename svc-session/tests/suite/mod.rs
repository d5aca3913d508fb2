//! Suites run against the real binary.

mod binary;
