//! Test modules and the shared harness.

mod durability;
pub mod harness;
mod memory;
mod service;
mod site;
