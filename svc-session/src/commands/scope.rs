//! `--scope=global|project`: the settings file `/busy queue|steer` and `/mode save` write
//! (`settings.set`'s `scope`, spec "Settings"): the global file by default, or the
//! session's project file.

use serde_json::Value;

use super::{Call, Commands, Failure};
use crate::settings::Scope;

/// Checks `--scope` without a session: `global`, `project` or absent; anything else is
/// the invalid-arguments failure of [`parse`].
pub(super) fn check(args: &super::Args) -> Result<(), Failure> {
    match args.options.get("scope").map(String::as_str) {
        None | Some("global" | "project") => Ok(()),
        Some(other) => Err(Failure::args(format!(
            "--scope must be global or project, not {:?}",
            super::args::clip(other)
        ))),
    }
}

/// The file `call`'s `--scope` option names; anything but `global`/`project` is an
/// invalid-arguments failure naming the value (clipped to [`super::args::ECHO_CHARS`]
/// characters; `--scope` given twice with different values is refused by
/// [`super::args::Args::parse`]).
pub(super) fn parse(call: &Call) -> Result<Scope, Failure> {
    match call.args.options.get("scope").map(String::as_str) {
        None | Some("global") => Ok(Scope::Global),
        Some("project") => Ok(Scope::Project(call.session.workdir())),
        Some(other) => Err(Failure::args(format!(
            "--scope must be global or project, not {:?}",
            super::args::clip(other)
        ))),
    }
}

/// Merges `patch` into the settings file of `scope` (through the settings component, so
/// `settings.changed` goes out as for `settings.set`); returns the file's name for the
/// reply (`global` or `project`).
pub(super) async fn write(
    cx: &Commands,
    scope: &Scope,
    patch: &Value,
) -> Result<&'static str, Failure> {
    cx.peers
        .settings
        .patch(scope, patch)
        .await
        .map_err(Failure::from_error)?;
    Ok(if *scope == Scope::Global {
        "global"
    } else {
        "project"
    })
}
