//! `/allowlist [list|remove <entry>|clear]`: listed so clients see it, but its capability arrives with another issue (needs the allowlist methods (question/allowlist issue), not in this build):
//! every form answers `not_implemented` (stable code `NOT_CONFIGURED`) until it lands.

use super::{Builtin, Call, Commands, Failure, Risk, Run};

/// `/allowlist`.
pub struct Allowlist;

impl Builtin for Allowlist {
    fn name(&self) -> &'static str {
        "allowlist"
    }
    fn summary(&self) -> &'static str {
        "Show or edit this project's allowlist"
    }
    fn usage(&self) -> &'static str {
        "/allowlist [list|remove <entry>|clear]"
    }
    fn risk(&self) -> Risk {
        Risk::HighRisk
    }
    fn unavailable(&self) -> Option<&'static str> {
        Some("needs the allowlist methods (question/allowlist issue), not in this build")
    }
    fn run<'a>(&'a self, _cx: &'a Commands, _call: &'a Call) -> Run<'a> {
        Box::pin(async {
            Err(Failure::not_implemented("/allowlist: needs the allowlist methods (question/allowlist issue), not in this build"))
        })
    }
}
