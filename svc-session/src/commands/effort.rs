//! `/effort [level]`: reasoning effort is set by `session.setEffort`, which is not in this
//! build; every form answers `not_implemented` (listed so clients see the command).

use super::{Builtin, Call, Commands, Risk, Run};

/// `/effort`.
pub struct Effort;

impl Builtin for Effort {
    fn name(&self) -> &'static str {
        "effort"
    }
    fn summary(&self) -> &'static str {
        "Show or set the reasoning effort"
    }
    fn usage(&self) -> &'static str {
        "/effort [status|low|medium|high]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status", "low", "medium", "high"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn unavailable(&self) -> Option<&'static str> {
        Some("needs session.setEffort, which is not in this build")
    }
    fn run<'a>(&'a self, _cx: &'a Commands, _call: &'a Call) -> Run<'a> {
        Box::pin(async {
            Err(super::Failure::not_implemented(
                "/effort needs session.setEffort, which is not in this build",
            ))
        })
    }
}
