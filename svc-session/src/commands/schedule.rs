//! `/schedule [list|add <spec> <task>|cancel <jobId>]`: the scheduler jobs, through the same
//! `schedule_list` / `schedule_create` / `schedule_cancel` tools the model has (so one code
//! path talks to svc-scheduler). `list` (bare) is read, `add` low_write, `cancel`
//! medium_write.

use serde_json::{json, Value};

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
            let out = cx.run_tool(&call.session, tool, args.clone()).await?;
            Ok(Reply::done(text(tool, &args, &out.meta), out.meta))
        })
    }
}

/// The reply for people (`snowpea cmd` prints it; `data` keeps the tool's JSON): one line
/// per job for `list`, one line for `add` and `cancel` (issue 39 item 6).
fn text(tool: &str, args: &Value, meta: &Value) -> String {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match tool {
        "schedule_create" => format!(
            "scheduled job {}: {:?} {}, next run {}",
            s(meta, "jobId"),
            super::args::clip(&s(args, "task")),
            s(args, "spec"),
            meta.get("nextRunAt")
                .and_then(Value::as_str)
                .unwrap_or("not planned")
        ),
        "schedule_cancel" => format!("cancelled job {}", s(meta, "jobId")),
        _ => {
            let jobs = meta
                .get("jobs")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if jobs.is_empty() {
                return "no scheduled jobs".into();
            }
            let mut out = format!("{} scheduled job(s):", jobs.len());
            for j in &jobs {
                out.push_str(&format!(
                    "\n  {}  {}  next {}  {}  {:?}",
                    s(j, "jobId"),
                    s(j, "state"),
                    j.get("nextRunAt").and_then(Value::as_str).unwrap_or("-"),
                    s(j, "spec"),
                    super::args::clip(&s(j, "task"))
                ));
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn schedule_replies_are_text_for_people_not_json() {
        let add = super::text(
            "schedule_create",
            &json!({"spec": "every day at 9", "task": "summarise"}),
            &json!({"jobId": "job_1", "nextRunAt": "2030-01-01T09:00:00Z"}),
        );
        assert_eq!(
            add,
            "scheduled job job_1: \"summarise\" every day at 9, next run 2030-01-01T09:00:00Z"
        );
        let list = super::text(
            "schedule_list",
            &json!({}),
            &json!({"jobs": [{"jobId": "job_1", "state": "scheduled", "nextRunAt": null, "spec": "in 5 minutes", "task": "x"}]}),
        );
        assert_eq!(
            list,
            "1 scheduled job(s):\n  job_1  scheduled  next -  in 5 minutes  \"x\""
        );
        assert_eq!(
            super::text("schedule_list", &json!({}), &json!({"jobs": []})),
            "no scheduled jobs"
        );
        assert_eq!(
            super::text("schedule_cancel", &json!({}), &json!({"jobId": "job_1"})),
            "cancelled job job_1"
        );
    }
}
