//! `/compact [focus]` (medium_write): compacting the history is `session.compact`, which is
//! not in this build, so the command answers `not_implemented` through the command path
//! (an `error{code:"not_implemented"}` and `turn.done{reason:"error"}`), never a fake.

use super::{Builtin, Call, Commands, Failure, Risk, Run};

/// `/compact`.
pub struct Compact;

impl Builtin for Compact {
    fn name(&self) -> &'static str {
        "compact"
    }
    fn summary(&self) -> &'static str {
        "Summarise the conversation so far to free context"
    }
    fn usage(&self) -> &'static str {
        "/compact [focus]"
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn bare_is_read(&self) -> bool {
        false
    }
    fn unavailable(&self) -> Option<&'static str> {
        Some("needs session.compact, which is not in this build")
    }
    fn run<'a>(&'a self, _cx: &'a Commands, _call: &'a Call) -> Run<'a> {
        Box::pin(async {
            Err(Failure::not_implemented(
                "/compact needs session.compact, which is not in this build",
            ))
        })
    }
}
