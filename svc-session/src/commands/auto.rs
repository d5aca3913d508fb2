//! `/auto [status]`: bare switches the session to `auto` mode (medium_write; emits
//! `mode.changed`), `status` reports the mode (read).

use super::{Builtin, Call, Commands, Risk, Run};

/// `/auto`.
pub struct Auto;

impl Builtin for Auto {
    fn name(&self) -> &'static str {
        "auto"
    }
    fn summary(&self) -> &'static str {
        "Switch the session to auto mode (everything but configuration runs without asking)"
    }
    fn usage(&self) -> &'static str {
        "/auto [status]"
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
        Box::pin(super::modes::mode_command(cx, call, "auto"))
    }
}
