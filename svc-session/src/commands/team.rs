//! `/team [status|on|off|<task>]`: listed so clients see it, but its capability arrives with another issue (needs teams (agents issue), not in this build):
//! every form answers `not_implemented` (stable code `NOT_CONFIGURED`) until it lands.

use super::{Builtin, Call, Commands, Failure, Risk, Run};

/// `/team`.
pub struct Team;

impl Builtin for Team {
    fn name(&self) -> &'static str {
        "team"
    }
    fn summary(&self) -> &'static str {
        "Run a team of agents"
    }
    fn usage(&self) -> &'static str {
        "/team [status|on|off|<task>]"
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn unavailable(&self) -> Option<&'static str> {
        Some("needs teams (agents issue), not in this build")
    }
    fn run<'a>(&'a self, _cx: &'a Commands, _call: &'a Call) -> Run<'a> {
        Box::pin(async {
            Err(Failure::not_implemented(
                "/team: needs teams (agents issue), not in this build",
            ))
        })
    }
}
