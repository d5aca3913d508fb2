//! `/ultrawork <task> [--max-tasks=N]` (low_write: model steps whose tool calls ask as
//! usual): plan, then one pass over every task. Iteration 0 asks the model to split the
//! task into independent tasks (`command.progress{iteration: 0}`, all `pending`); iteration
//! `n` works on task `n` once and ends with `STATUS: pass|fail — note`
//! (`command.progress{iteration: n}`). Unlike `/ralph` nothing is retried: the outcome is
//! `complete` when every task passed, else `partial` (also when the turn was interrupted, a
//! call denied or a step failed: the tasks not reached stay `pending`). A plan the model
//! declines ends the turn with the reason and outcome `partial`. See [`super::workflow`].

use std::sync::Arc;

use serde_json::json;

use super::workflow::{
    count_option, headless_unsupported, parse_plan, parse_status, BoxFut, Driver, Finish, Plan,
    Step, StepEnd, Story, Workflow, WorkflowRun,
};
use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/ultrawork`.
pub struct Ultrawork;

/// Tasks worked on when `--max-tasks` is not given (the plan is cut there).
pub const DEFAULT_MAX_TASKS: usize = 8;
/// Most tasks `--max-tasks` may ask for.
pub const MAX_TASKS: usize = super::workflow::MAX_STORIES;

impl Builtin for Ultrawork {
    fn name(&self) -> &'static str {
        "ultrawork"
    }
    fn summary(&self) -> &'static str {
        "Split a task into independent tasks and work through each once (bounded)"
    }
    fn usage(&self) -> &'static str {
        "/ultrawork <task> [--max-tasks=N]"
    }
    fn risk(&self) -> Risk {
        Risk::LowWrite
    }
    fn bare_is_read(&self) -> bool {
        false
    }
    fn run<'a>(&'a self, _cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            if call.headless {
                return Err(headless_unsupported("ultrawork"));
            }
            call.args
                .only_options(&["max-tasks"])
                .map_err(Failure::args)?;
            let max_tasks = count_option(&call.args, "max-tasks", DEFAULT_MAX_TASKS, MAX_TASKS)?;
            let task = call.args.words.join(" ");
            if task.trim().is_empty() {
                return Err(Failure::args(format!("usage: {}", self.usage())));
            }
            Ok(Reply::Workflow(WorkflowRun(Arc::new(UltraworkRun {
                task,
                max_tasks,
            }))))
        })
    }
}

/// One `/ultrawork` run.
struct UltraworkRun {
    task: String,
    max_tasks: usize,
}

/// The plan prompt (iteration 0).
pub fn plan_prompt(task: &str, max_tasks: usize) -> String {
    format!(
        "[ultrawork plan] Split this task into at most {max_tasks} independent tasks that can be \
         done one after another without waiting on each other. Do not change any file yet. \
         Answer with only a JSON object {{\"stories\": [{{\"id\": \"T1\", \"title\": \"...\"}}]}}, \
         or {{\"rejected\": \"why\"}} if the task cannot or should not be done.\n\nTask: {task}"
    )
}

/// The prompt of iteration `n` on `story`.
pub fn task_prompt(task: &str, story: &Story, n: usize, of: usize) -> String {
    format!(
        "[ultrawork task {id}] Task {n} of {of}, part of: {task}\n\nDo task {id}: {title}\n\
         Do only this task, verify it, and end your answer with one line `STATUS: pass` or \
         `STATUS: fail — <what is missing>`.",
        id = story.id,
        title = story.title
    )
}

impl Workflow for UltraworkRun {
    fn run<'a>(&'a self, d: &'a dyn Driver) -> BoxFut<'a, Finish> {
        Box::pin(async move {
            let plan = d
                .step(Step {
                    prompt: plan_prompt(&self.task, self.max_tasks),
                    allowed_tools: Some(
                        super::review::REVIEW_TOOLS
                            .iter()
                            .map(|s| s.to_string())
                            .collect(),
                    ),
                })
                .await;
            let text = match plan {
                StepEnd::Answer(t) => t,
                other => {
                    d.progress("ultrawork", 0, &[], Some("partial"));
                    return ended(other);
                }
            };
            let mut stories = match parse_plan(&text) {
                Plan::Stories { stories, .. } => stories,
                Plan::Rejected(why) => {
                    d.progress("ultrawork", 0, &[], Some("partial"));
                    return Finish::Complete {
                        text: format!("/ultrawork: no tasks to work on: {why}"),
                        data: json!({"outcome": "partial", "reason": why, "stories": []}),
                    };
                }
            };
            let planned = stories.len();
            stories.truncate(self.max_tasks);
            d.progress("ultrawork", 0, &stories, None);
            let total = stories.len();
            let mut stop: Option<StepEnd> = None;
            let mut iteration = 0;
            for i in 0..total {
                iteration = i + 1;
                let end = d
                    .step(Step {
                        prompt: task_prompt(&self.task, &stories[i], iteration, total),
                        allowed_tools: None,
                    })
                    .await;
                match end {
                    StepEnd::Answer(text) => {
                        let (pass, note) = parse_status(&text);
                        stories[i].status = if pass { "pass" } else { "fail" }.into();
                        stories[i].note = note;
                    }
                    other => {
                        stop = Some(other);
                        break;
                    }
                }
                if iteration < total {
                    d.progress("ultrawork", iteration as i64, &stories, None);
                }
            }
            let passed = stories.iter().filter(|s| s.status == "pass").count();
            let outcome = if passed == total && stop.is_none() {
                "complete"
            } else {
                "partial"
            };
            d.progress("ultrawork", iteration as i64, &stories, Some(outcome));
            if let Some(end) = stop {
                return ended(end);
            }
            let mut text = format!("/ultrawork {outcome}: {passed} of {total} tasks passed");
            if planned > total {
                text.push_str(&format!(
                    " ({} planned tasks past --max-tasks={} were left out)",
                    planned - total,
                    self.max_tasks
                ));
            }
            Finish::Complete {
                text,
                data: json!({
                    "outcome": outcome,
                    "iterations": iteration,
                    "stories": stories.iter().map(|s| json!({"id": s.id, "title": s.title, "status": s.status, "note": s.note})).collect::<Vec<_>>(),
                }),
            }
        })
    }
}

/// The turn end of a step that did not answer.
fn ended(end: StepEnd) -> Finish {
    match end {
        StepEnd::Answer(_) => Finish::Error(Some(Failure::failed(
            "internal",
            "an answered step does not end /ultrawork",
        ))),
        StepEnd::Interrupted => Finish::Interrupted,
        StepEnd::Denied => Finish::Denied,
        StepEnd::Failed => Finish::Error(None),
        StepEnd::Budget => Finish::Budget,
    }
}
