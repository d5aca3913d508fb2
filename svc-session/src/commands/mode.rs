//! `/mode [plan|accept|auto|status|save]`: bare or `status` reports the mode (read); a
//! mode name switches to it (medium_write). `save` (keeping the mode as the default of new
//! sessions) answers `not_implemented`: `permissions.defaultMode` can be written, but
//! `session.create` does not apply it yet, so saving it would change nothing.

use super::{Builtin, Call, Commands, Failure, Risk, Run};

/// `/mode`.
pub struct ModeCmd;

impl Builtin for ModeCmd {
    fn name(&self) -> &'static str {
        "mode"
    }
    fn summary(&self) -> &'static str {
        "Show or switch the session's permission mode (plan, accept, auto)"
    }
    fn usage(&self) -> &'static str {
        "/mode [plan|accept|auto|status|save]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status", "plan", "accept", "auto", "save"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            call.args.only_options(&[]).map_err(Failure::args)?;
            match call.args.sub() {
                None | Some("status") => super::modes::status(call),
                Some(m @ ("plan" | "accept" | "auto")) => super::modes::switch(cx, call, m).await,
                Some("save") => Err(Failure::not_implemented(
                    "/mode save: session.create does not apply permissions.defaultMode in this build, so a saved default would change nothing",
                )),
                Some(other) => Err(Failure::args(format!(
                    "unknown mode {other:?}: use plan, accept, auto, status or save"
                ))),
            }
        })
    }
}
