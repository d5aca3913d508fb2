//! `/accept [status]`: bare switches the session to `accept` mode (medium_write; emits
//! `mode.changed`), `status` reports the mode (read).

use super::{Builtin, Call, Commands, Risk, Run};

/// `/accept`.
pub struct Accept;

impl Builtin for Accept {
    fn name(&self) -> &'static str {
        "accept"
    }
    fn summary(&self) -> &'static str {
        "Switch the session to accept mode (edit files freely; ask before running things)"
    }
    fn usage(&self) -> &'static str {
        "/accept [status]"
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
        Box::pin(super::modes::mode_command(cx, call, "accept"))
    }
}
