//! `/mode [plan|accept|auto|status|save [--scope=global|project]]`: bare or `status`
//! reports the mode (read); a mode name switches to it (medium_write). `save` keeps the
//! session's current mode as the default of new sessions: it writes
//! `permissions.defaultMode` through the settings component exactly as
//! `settings.set{scope, patch:{permissions:{defaultMode}}}` does (validated, atomic, 0600),
//! into the global settings (default) or this session's project settings with
//! `--scope=project`; `session.create` without `mode` starts in it (the project file wins
//! over the global one). When the project file overrides a global save, the reply says so.

use serde_json::{json, Value};

use super::{Args, Builtin, Call, Commands, Failure, Outcome, Reply, Risk, Run};
use crate::session::DEFAULT_MODE_SETTING;

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
        "/mode [plan|accept|auto|status|save [--scope=global|project]]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status", "plan", "accept", "auto", "save"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn check(&self, args: &Args) -> Result<(), Failure> {
        let sub = args.sub();
        let options: &[&str] = if sub == Some("save") { &["scope"] } else { &[] };
        args.only_options(options).map_err(Failure::args)?;
        if args.words.len() > 1 {
            return Err(Failure::args(format!(
                "/mode takes one word, got {:?}; usage: {}",
                super::args::clip(&args.words.join(" ")),
                self.usage()
            )));
        }
        match sub {
            None | Some("status" | "plan" | "accept" | "auto") => Ok(()),
            Some("save") => super::scope::check(args),
            Some(other) => Err(Failure::args(format!(
                "unknown mode {:?}: use plan, accept, auto, status or save",
                super::args::clip(other)
            ))),
        }
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            self.check(&call.args)?;
            match call.args.sub() {
                None | Some("status") => super::modes::status(call),
                Some(m @ ("plan" | "accept" | "auto")) => super::modes::switch(cx, call, m).await,
                _ => save(cx, call).await,
            }
        })
    }
}

/// The `permissions.defaultMode` new sessions of `call`'s workdir start in, and where it
/// comes from (`project`, `global` or `default`: `accept`).
fn effective_default(cx: &Commands, call: &Call) -> (String, &'static str) {
    let project = snowpea_common::settings::load_file(&crate::settings::project_path(
        &call.session.workdir(),
    ))
    .unwrap_or_default();
    let of = |doc: &Value| {
        snowpea_common::settings::get(doc, DEFAULT_MODE_SETTING)
            .and_then(Value::as_str)
            .filter(|v| crate::permissions::Mode::parse(v).is_some())
            .map(str::to_owned)
    };
    if let Some(v) = of(&project) {
        return (v, "project");
    }
    match of(&cx.peers.settings.global()) {
        Some(v) => (v, "global"),
        None => ("accept".into(), "default"),
    }
}

/// `/mode save [--scope=global|project]` (module doc).
async fn save(cx: &Commands, call: &Call) -> Outcome {
    let scope = super::scope::parse(call)?;
    let mode = call.session.mode().as_str();
    let written =
        super::scope::write(cx, &scope, &json!({"permissions": {"defaultMode": mode}})).await?;
    let (now, source) = effective_default(cx, call);
    let mut text = format!(
        "permissions.defaultMode = {mode} ({written} settings): new sessions start in {mode}"
    );
    if now != mode {
        text = format!(
            "permissions.defaultMode = {mode} ({written} settings); new sessions here still start in {now} (the {source} setting) — use --scope=project to change it"
        );
    }
    Ok(Reply::done(
        text,
        json!({"defaultMode": mode, "scope": written, "effective": now, "source": source}),
    ))
}
