//! `/plan [status]`: bare switches the session to `plan` mode (medium_write; emits
//! `mode.changed`), `status` reports the mode (read).

use super::{Builtin, Call, Commands, Risk, Run};

/// `/plan`.
pub struct Plan;

impl Builtin for Plan {
    fn name(&self) -> &'static str {
        "plan"
    }
    fn summary(&self) -> &'static str {
        "Switch the session to plan mode (read and plan; no changes)"
    }
    fn usage(&self) -> &'static str {
        "/plan [status]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn bare_is_read(&self) -> bool {
        false
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(super::modes::mode_command(cx, call, "plan"))
    }
}
