mod capabilities;
mod faults;
mod harness;
mod install;
mod record;
mod roundtrip;
