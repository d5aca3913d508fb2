//! `/busy [status]` (read): whether the session is running a turn and how many prompts
//! wait. Choosing what a busy session does with a new prompt (`queue`/`steer`) arrives with
//! the interactive-turn methods and answers `not_implemented` here.

use serde_json::json;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/busy`.
pub struct Busy;

impl Builtin for Busy {
    fn name(&self) -> &'static str {
        "busy"
    }
    fn summary(&self) -> &'static str {
        "Show whether the session is busy and how many prompts are queued"
    }
    fn usage(&self) -> &'static str {
        "/busy [status|queue|steer]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status", "queue", "steer"]
    }
    fn risk(&self) -> Risk {
        Risk::LowWrite
    }
    fn run<'a>(&'a self, _cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            match call.args.sub() {
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
                    Ok(Reply::done(
                        format!(
                            "busy: {} · queued prompts: {queued}",
                            if running.is_some() { "yes" } else { "no" }
                        ),
                        json!({"busy": running.is_some(), "runningTurnId": running, "queued": queued}),
                    ))
                }
                Some(_) => Err(Failure::not_implemented(
                    "choosing queue/steer for a busy session arrives with the interactive-turn methods (not in this build)",
                )),
            }
        })
    }
}
