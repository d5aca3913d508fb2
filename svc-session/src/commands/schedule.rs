//! `/schedule [list|add <spec> <task>|cancel <jobId>]`: the scheduler jobs, through the same
//! `schedule_list` / `schedule_create` / `schedule_cancel` tools the model has (so one code
//! path talks to svc-scheduler). `list` (bare) is read, `add` low_write, `cancel`
//! medium_write.

use serde_json::json;

use super::{Args, Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/schedule`.
pub struct Schedule;

impl Builtin for Schedule {
    fn name(&self) -> &'static str {
        "schedule"
    }
    fn summary(&self) -> &'static str {
        "List, add or cancel scheduled jobs"
    }
    fn usage(&self) -> &'static str {
        "/schedule [list|add \"<spec>\" \"<task>\" [--mode=plan|accept|auto]|cancel <jobId>]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["list", "add", "cancel"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn tier(&self, args: &Args) -> Risk {
        match args.sub() {
            None | Some("list" | "status") => Risk::Read,
            Some("add") => Risk::LowWrite,
            _ => Risk::MediumWrite,
        }
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let a = &call.args;
            let (tool, args) = match a.sub() {
                None | Some("list" | "status") => ("schedule_list", json!({})),
                Some("add") => {
                    a.only_options(&["mode"]).map_err(Failure::args)?;
                    let (Some(spec), Some(task)) = (a.words.get(1), a.words.get(2)) else {
                        return Err(Failure::args("usage: /schedule add \"<spec>\" \"<task>\""));
                    };
                    let mut v = json!({"spec": spec, "task": task});
                    if let Some(m) = a.options.get("mode") {
                        v["mode"] = json!(m);
                    }
                    ("schedule_create", v)
                }
                Some("cancel") => {
                    let Some(id) = a.words.get(1) else {
                        return Err(Failure::args("usage: /schedule cancel <jobId>"));
                    };
                    ("schedule_cancel", json!({"jobId": id}))
                }
                Some(other) => {
                    return Err(Failure::args(format!(
                        "unknown /schedule subcommand {other:?}"
                    )))
                }
            };
            let out = cx.run_tool(&call.session, tool, args).await?;
            Ok(Reply::done(out.content, out.meta))
        })
    }
}
