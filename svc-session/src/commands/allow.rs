//! `/allow <tool>`: listed so clients see it, but its capability arrives with another issue (needs the allowlist methods (question/allowlist issue), not in this build):
//! every form answers `not_implemented` (stable code `NOT_CONFIGURED`) until it lands.

use super::{Builtin, Call, Commands, Failure, Risk, Run};

/// `/allow`.
pub struct Allow;

impl Builtin for Allow {
    fn name(&self) -> &'static str {
        "allow"
    }
    fn summary(&self) -> &'static str {
        "Always allow a tool in this project (the allowlist)"
    }
    fn usage(&self) -> &'static str {
        "/allow <tool>"
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn unavailable(&self) -> Option<&'static str> {
        Some("needs the allowlist methods (question/allowlist issue), not in this build")
    }
    fn run<'a>(&'a self, _cx: &'a Commands, _call: &'a Call) -> Run<'a> {
        Box::pin(async {
            Err(Failure::not_implemented(
                "/allow: needs the allowlist methods (question/allowlist issue), not in this build",
            ))
        })
    }
}
