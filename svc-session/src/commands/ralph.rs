//! `/ralph <task> [--max-iterations=N]` (low_write: model steps whose tool calls ask as
//! usual): the persistent loop. Iteration 0 asks the model for a plan of stories
//! (`command.progress{iteration: 0}`, all `pending`); each iteration then works on the first
//! story not yet passed and ends with `STATUS: pass|fail — note`, reported as
//! `command.progress{iteration: n}`. A failed story is retried in the next iteration with its
//! note. It ends with outcome `complete` (every story passed), `rejected` (the model declined
//! or gave no plan), `stopped` (interrupted, or a person denied a call), `max_iterations`
//! (the budget ran out with stories left) or `error` (a step failed). See [`super::workflow`].

use std::sync::Arc;

use serde_json::json;

use super::workflow::{
    count_option, headless_unsupported, parse_plan, parse_status, stop_on, BoxFut, Driver, Finish,
    Plan, Step, Story, Workflow, WorkflowRun,
};
use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/ralph`.
pub struct Ralph;

/// Iterations after the plan when `--max-iterations` is not given.
pub const DEFAULT_MAX_ITERATIONS: usize = 10;
/// Most iterations `--max-iterations` may ask for.
pub const MAX_ITERATIONS: usize = 50;

impl Builtin for Ralph {
    fn name(&self) -> &'static str {
        "ralph"
    }
    fn summary(&self) -> &'static str {
        "Plan a task as stories and keep working until every story passes (bounded iterations)"
    }
    fn usage(&self) -> &'static str {
        "/ralph <task> [--max-iterations=N]"
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
                return Err(headless_unsupported("ralph"));
            }
            call.args
                .only_options(&["max-iterations"])
                .map_err(Failure::args)?;
            let max_iterations = count_option(
                &call.args,
                "max-iterations",
                DEFAULT_MAX_ITERATIONS,
                MAX_ITERATIONS,
            )?;
            let task = call.args.words.join(" ");
            if task.trim().is_empty() {
                return Err(Failure::args(format!("usage: {}", self.usage())));
            }
            Ok(Reply::Workflow(WorkflowRun(Arc::new(RalphRun {
                task,
                max_iterations,
            }))))
        })
    }
}

/// One `/ralph` run.
struct RalphRun {
    task: String,
    max_iterations: usize,
}

/// The plan prompt (iteration 0).
pub fn plan_prompt(task: &str) -> String {
    format!(
        "[ralph plan] Break this task into small, independently verifiable user stories, in the \
         order they should be done. Do not change any file yet. Answer with only a JSON object \
         {{\"stories\": [{{\"id\": \"S1\", \"title\": \"...\"}}]}} (at most {} stories), or \
         {{\"rejected\": \"why\"}} if the task cannot or should not be done.\n\nTask: {task}",
        super::workflow::MAX_STORIES
    )
}

/// The prompt of one iteration on `story`.
pub fn story_prompt(task: &str, story: &Story, iteration: usize, max: usize) -> String {
    let mut p = format!(
        "[ralph story {id}] Iteration {iteration} of at most {max}. Overall task: {task}\n\n\
         Work on story {id}: {title}\n",
        id = story.id,
        title = story.title
    );
    if story.status == "fail" && !story.note.is_empty() {
        p.push_str(&format!(
            "The previous attempt failed: {}\nFix that first.\n",
            story.note
        ));
    }
    p.push_str(
        "Make the change, then verify it (run the relevant tests or checks). End your answer \
         with one line `STATUS: pass` when the story is done and verified, or \
         `STATUS: fail — <what is missing>` otherwise.",
    );
    p
}

impl Workflow for RalphRun {
    fn run<'a>(&'a self, d: &'a dyn Driver) -> BoxFut<'a, Finish> {
        Box::pin(async move {
            let plan = d
                .step(Step {
                    prompt: plan_prompt(&self.task),
                    allowed_tools: Some(
                        super::review::REVIEW_TOOLS
                            .iter()
                            .map(|s| s.to_string())
                            .collect(),
                    ),
                })
                .await;
            let text = match stop_on(plan, Some((d, "ralph", 0, &[]))) {
                Ok(t) => t,
                Err(f) => return f,
            };
            let (mut stories, dropped) = match parse_plan(&text) {
                Plan::Stories { stories, dropped } => (stories, dropped),
                Plan::Rejected(why) => {
                    d.progress("ralph", 0, &[], Some("rejected"));
                    return Finish::Complete {
                        text: format!("/ralph: the plan was rejected: {why}"),
                        data: json!({"outcome": "rejected", "reason": why, "stories": []}),
                    };
                }
            };
            d.progress("ralph", 0, &stories, None);
            let mut iteration = 0;
            let outcome = loop {
                let Some(i) = stories.iter().position(|s| s.status != "pass") else {
                    break "complete";
                };
                if iteration >= self.max_iterations {
                    break "max_iterations";
                }
                iteration += 1;
                let end = d
                    .step(Step {
                        prompt: story_prompt(
                            &self.task,
                            &stories[i],
                            iteration,
                            self.max_iterations,
                        ),
                        allowed_tools: None,
                    })
                    .await;
                let text = match stop_on(end, Some((d, "ralph", iteration as i64, &stories))) {
                    Ok(t) => t,
                    Err(f) => return f,
                };
                let (pass, note) = parse_status(&text);
                stories[i].status = if pass { "pass" } else { "fail" }.into();
                stories[i].note = note;
                if stories.iter().all(|s| s.status == "pass") {
                    break "complete";
                }
                if iteration >= self.max_iterations {
                    break "max_iterations";
                }
                d.progress("ralph", iteration as i64, &stories, None);
            };
            d.progress("ralph", iteration as i64, &stories, Some(outcome));
            let passed = stories.iter().filter(|s| s.status == "pass").count();
            let mut text = format!(
                "/ralph {outcome}: {passed} of {} stories passed in {iteration} iteration(s)",
                stories.len()
            );
            if dropped > 0 {
                text.push_str(&format!(
                    " ({dropped} stories past the first {} were left out)",
                    super::workflow::MAX_STORIES
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
