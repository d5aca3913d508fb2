//! `/agent [list|<name>]`: listed so clients see it, but its capability arrives with another issue (needs the agent methods (agents issue), not in this build):
//! every form answers `not_implemented` (stable code `NOT_CONFIGURED`) until it lands.

use super::{Builtin, Call, Commands, Failure, Risk, Run};

/// `/agent`.
pub struct Agent;

impl Builtin for Agent {
    fn name(&self) -> &'static str {
        "agent"
    }
    fn summary(&self) -> &'static str {
        "Switch the session's agent definition"
    }
    fn usage(&self) -> &'static str {
        "/agent [list|<name>]"
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn unavailable(&self) -> Option<&'static str> {
        Some("needs the agent methods (agents issue), not in this build")
    }
    fn run<'a>(&'a self, _cx: &'a Commands, _call: &'a Call) -> Run<'a> {
        Box::pin(async {
            Err(Failure::not_implemented(
                "/agent: needs the agent methods (agents issue), not in this build",
            ))
        })
    }
}
