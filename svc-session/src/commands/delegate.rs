//! `/delegate <agent> <task>`: listed so clients see it, but its capability arrives with another issue (needs subagents (agents issue), not in this build):
//! every form answers `not_implemented` (stable code `NOT_CONFIGURED`) until it lands.

use super::{Builtin, Call, Commands, Failure, Risk, Run};

/// `/delegate`.
pub struct Delegate;

impl Builtin for Delegate {
    fn name(&self) -> &'static str {
        "delegate"
    }
    fn summary(&self) -> &'static str {
        "Hand a task to a subagent"
    }
    fn usage(&self) -> &'static str {
        "/delegate <agent> <task>"
    }
    fn risk(&self) -> Risk {
        Risk::LowWrite
    }
    fn unavailable(&self) -> Option<&'static str> {
        Some("needs subagents (agents issue), not in this build")
    }
    fn run<'a>(&'a self, _cx: &'a Commands, _call: &'a Call) -> Run<'a> {
        Box::pin(async {
            Err(Failure::not_implemented(
                "/delegate: needs subagents (agents issue), not in this build",
            ))
        })
    }
}
