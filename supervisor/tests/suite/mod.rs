//! Test modules; `harness` and `fake` are the shared support.

mod crash;
mod fake;
mod harness;
mod lifecycle;
mod restart;
/// `snowpea run` against the real services (not the fakes).
mod run;
