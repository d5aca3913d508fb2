//! Suites run against the real binary.

mod binary;
mod method_homes;
