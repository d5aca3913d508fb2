//! `/busy [status|queue|steer] [--scope=global|project]`: bare or `status` reports whether
//! the session is running a turn, how many prompts wait, and what a prompt sent meanwhile
//! does (the effective `agent.busy` setting and the file it comes from) — read. `queue` or
//! `steer` writes `agent.busy` through the settings component, exactly as
//! `settings.set{scope, patch:{agent:{busy}}}` does ([`crate::settings::Settings::patch`]:
//! validated, atomic, 0600, a global change announced as `settings.changed`), into the
//! global settings (default) or this session's project settings with `--scope=project`
//! (low_write: one reversible preference). When the project file overrides what was written
//! to the global one, the reply says so.

use serde_json::{json, Value};

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};
use crate::turn::busy::BUSY_SETTING;

/// `/busy`.
pub struct Busy;

/// `(effective agent.busy, where it comes from)` for `call`'s session.
fn effective(cx: &Commands, call: &Call) -> (String, &'static str) {
    let workdir = call.session.workdir();
    let project = snowpea_common::settings::load_file(&crate::settings::project_path(&workdir))
        .unwrap_or_default();
    let of = |doc: &Value| {
        snowpea_common::settings::get(doc, BUSY_SETTING)
            .and_then(Value::as_str)
            .filter(|v| matches!(*v, "queue" | "steer"))
            .map(str::to_owned)
    };
    if let Some(v) = of(&project) {
        return (v, "project");
    }
    match of(&cx.peers.settings.global()) {
        Some(v) => (v, "global"),
        None => ("steer".into(), "default"),
    }
}

impl Builtin for Busy {
    fn name(&self) -> &'static str {
        "busy"
    }
    fn summary(&self) -> &'static str {
        "Show whether the session is busy, or choose what a prompt sent meanwhile does (agent.busy: queue or steer)"
    }
    fn usage(&self) -> &'static str {
        "/busy [status|queue|steer] [--scope=global|project]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status", "queue", "steer"]
    }
    fn risk(&self) -> Risk {
        Risk::LowWrite
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let a = &call.args;
            a.only_options(&["scope"]).map_err(Failure::args)?;
            if a.words.len() > 1 {
                return Err(Failure::args(format!(
                    "/busy takes one word, got {:?}; usage: {}",
                    a.words.join(" "),
                    self.usage()
                )));
            }
            match a.sub() {
                None | Some("status") => {
                    let st = call.session.turns();
                    // The command's own turn is the running one when it runs as a turn.
                    let running = st
                        .running
                        .as_ref()
                        .filter(|r| r.turn_id != call.turn_id)
                        .map(|r| r.turn_id.clone());
                    let queued = st.queue.len();
                    drop(st);
                    let (when_busy, source) = effective(cx, call);
                    Ok(Reply::done(
                        format!(
                            "busy: {} · queued prompts: {queued} · a prompt sent while busy: {when_busy} (agent.busy, {source})",
                            if running.is_some() { "yes" } else { "no" }
                        ),
                        json!({"busy": running.is_some(), "runningTurnId": running, "queued": queued, "agentBusy": when_busy, "source": source}),
                    ))
                }
                Some(choice @ ("queue" | "steer")) => {
                    let scope = super::scope::parse(call)?;
                    let written =
                        super::scope::write(cx, &scope, &json!({"agent": {"busy": choice}}))
                            .await?;
                    let (now, source) = effective(cx, call);
                    let mut text = format!("agent.busy = {choice} ({written} settings)");
                    if now != choice {
                        text.push_str(&format!(
                            "; this session still follows the {source} setting ({now}) — use --scope=project to change it"
                        ));
                    }
                    Ok(Reply::done(
                        text,
                        json!({"agentBusy": choice, "scope": written, "effective": now, "source": source}),
                    ))
                }
                Some(other) => Err(Failure::args(format!(
                    "unknown /busy form {other:?}: use status, queue or steer"
                ))),
            }
        })
    }
}
