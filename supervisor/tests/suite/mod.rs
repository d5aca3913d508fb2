//! Test modules; `harness` and `fake` are the shared support.

/// `snowpea cmd` against the real services (help, the target rule, text replies).
mod cmd;
mod crash;
mod fake;
mod harness;
mod lifecycle;
mod restart;
/// `snowpea run` against the real services (not the fakes).
mod run;
