//! Long command workflows (`/ralph`, `/ultrawork`, `/deepinit`; protocol 1.25.0 event
//! `command.progress`, upstream-behaviour §3 "workflows"): a command that drives several
//! model steps inside its one command turn.
//!
//! A built-in answers [`super::Reply::Workflow`] with a [`Workflow`]; the command turn
//! (`turn/workflow.rs`) runs it over a [`Driver`]. Each [`Driver::step`] is one model turn
//! of the session's agent loop inside the command turn (`message.user` with the step's
//! prompt, the model's calls and tools, `message.done`, `context`), so every step sees the
//! steps before it in the history. A step that is interrupted, fails or is denied ends the
//! workflow; between steps the workflow checks nothing itself: the driver answers
//! [`StepEnd::Interrupted`] at once once the turn is cancelled. Every workflow is bounded
//! (a maximum of iterations / stories / directories, each with its own option and cap).
//!
//! `/ralph` and `/ultrawork` report `command.progress{command, iteration, stories, outcome}`
//! ([`Driver::progress`]): iteration 0 is the plan, then one event per iteration; the last
//! event carries the `outcome`.
//!
//! Plans and step results are read from the model's text: a plan is a JSON object
//! `{"stories":[{"id","title"}]}` (or `{"rejected":"why"}`), anywhere in the answer, fenced
//! or not ([`parse_plan`]); a step ends its answer with a line `STATUS: pass` or
//! `STATUS: fail — <note>` ([`parse_status`]).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use snowpea_proto::session::v1 as pb;

use super::Failure;

/// One story of a plan, as `command.progress` reports it.
pub type Story = pb::command_progress_event::Story;

/// Most stories a plan may hold (the rest are dropped, and the plan says so).
pub const MAX_STORIES: usize = 20;
/// Longest story title kept, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// Longest note kept on a story, in characters.
pub const MAX_NOTE_CHARS: usize = 500;

/// One model step of a workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The user message of the step.
    pub prompt: String,
    /// When set, only these tools may be called (as a markdown command's `allowed-tools`).
    pub allowed_tools: Option<Vec<String>>,
}

/// How one step ended.
#[derive(Debug, Clone, PartialEq)]
pub enum StepEnd {
    /// The model answered (its whole answer text).
    Answer(String),
    /// The turn was interrupted (before or during the step).
    Interrupted,
    /// The step failed (provider error, tool budget); its `error` event is already out.
    Failed,
    /// A person denied a tool call of the step.
    Denied,
    /// The step used up its tool rounds (`agent.max_tool_rounds`).
    Budget,
}

/// How a workflow ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    /// Done: a `message.done{role:"system", text, data}` closes the turn (`complete`).
    Complete {
        /// Summary for people.
        text: String,
        /// Structured result.
        data: Value,
    },
    /// `turn.done{reason:"interrupted"}`.
    Interrupted,
    /// `turn.done{reason:"denied"}`.
    Denied,
    /// `turn.done{reason:"budget"}`: a step used up its tool rounds.
    Budget,
    /// `turn.done{reason:"error"}`; `None` when the failed step already reported its error.
    Error(Option<Failure>),
}

/// A boxed future of a workflow or driver.
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a workflow runs its steps on (the command turn; see the module doc).
pub trait Driver: Send + Sync {
    /// Runs one model step and returns how it ended.
    fn step(&self, step: Step) -> BoxFut<'_, StepEnd>;
    /// Emits `command.progress{command, iteration, stories, outcome}`.
    fn progress(&self, command: &str, iteration: i64, stories: &[Story], outcome: Option<&str>);
    /// The session's workdir.
    fn workdir(&self) -> PathBuf;
}

/// A multi-step command (one implementation per workflow command file).
pub trait Workflow: Send + Sync {
    /// Runs the whole workflow.
    fn run<'a>(&'a self, driver: &'a dyn Driver) -> BoxFut<'a, Finish>;
}

/// A workflow as a command's reply carries it.
#[derive(Clone)]
pub struct WorkflowRun(pub Arc<dyn Workflow>);

impl std::fmt::Debug for WorkflowRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkflowRun(..)")
    }
}

impl PartialEq for WorkflowRun {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What a plan step produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// The stories, in plan order, all `pending`; `dropped` is how many past
    /// [`MAX_STORIES`] were left out.
    Stories {
        /// The stories.
        stories: Vec<Story>,
        /// Stories past the cap.
        dropped: usize,
    },
    /// The model declined the task (`{"rejected": "why"}`), or gave no usable plan.
    Rejected(String),
}

fn clip(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// The JSON objects in `text`, last first: fenced blocks, then the span from the first `{`
/// to the last `}`.
fn json_candidates(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let Some(end) = after[body_start..].find("```") else {
            break;
        };
        if let Ok(v) = serde_json::from_str::<Value>(after[body_start..body_start + end].trim()) {
            out.push(v);
        }
        rest = &after[body_start + end + 3..];
    }
    if let (Some(a), Some(b)) = (text.find('{'), text.rfind('}')) {
        if a < b {
            if let Ok(v) = serde_json::from_str::<Value>(&text[a..=b]) {
                out.push(v);
            }
        }
    }
    out.reverse();
    out
}

/// Reads a plan from the model's answer (see the module doc). Stories without a usable
/// title are skipped; ids default to `S1`, `S2`, … and repeated ids get a suffix.
pub fn parse_plan(text: &str) -> Plan {
    for v in json_candidates(text) {
        if let Some(why) = v.get("rejected").and_then(Value::as_str) {
            return Plan::Rejected(clip(why, MAX_NOTE_CHARS));
        }
        let Some(items) = v.get("stories").and_then(Value::as_array) else {
            continue;
        };
        let mut stories: Vec<Story> = Vec::new();
        let mut dropped = 0;
        for item in items {
            let title = match item {
                Value::String(s) => s.as_str(),
                _ => item
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            };
            if title.trim().is_empty() {
                continue;
            }
            if stories.len() >= MAX_STORIES {
                dropped += 1;
                continue;
            }
            let mut id = item
                .get("id")
                .and_then(|i| {
                    i.as_str()
                        .map(str::to_owned)
                        .or_else(|| i.as_i64().map(|n| n.to_string()))
                })
                .map(|s| clip(&s, 40))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("S{}", stories.len() + 1));
            if stories.iter().any(|s| s.id == id) {
                id = format!("{id}-{}", stories.len() + 1);
            }
            stories.push(Story {
                id,
                title: clip(title, MAX_TITLE_CHARS),
                status: "pending".into(),
                note: String::new(),
            });
        }
        if !stories.is_empty() {
            return Plan::Stories { stories, dropped };
        }
    }
    Plan::Rejected(
        "the plan step gave no stories (expected {\"stories\":[{\"id\",\"title\"}]})".into(),
    )
}

/// Reads the verdict of a step from the last `STATUS:` line of its answer: `(passed, note)`.
/// No such line is a failure noting it.
pub fn parse_status(text: &str) -> (bool, String) {
    for line in text.lines().rev() {
        let l = line.trim().trim_start_matches(['*', '#', '>', '-', ' ']);
        let Some(rest) = l
            .strip_prefix("STATUS:")
            .or_else(|| l.strip_prefix("Status:"))
            .or_else(|| l.strip_prefix("status:"))
        else {
            continue;
        };
        let rest = rest.trim().trim_matches('*').trim();
        let lower = rest.to_ascii_lowercase();
        let (pass, after) = if lower.starts_with("pass") {
            (true, &rest[4..])
        } else if lower.starts_with("fail") {
            (false, &rest[4..])
        } else {
            continue;
        };
        let note = after
            .trim_start_matches(|c: char| {
                c.is_whitespace() || matches!(c, '—' | '–' | '-' | ':' | '*')
            })
            .trim();
        return (pass, clip(note, MAX_NOTE_CHARS));
    }
    (
        false,
        "the step did not end with a STATUS: pass|fail line".into(),
    )
}

/// A bounded positive integer option (`--name=N`), `default` when absent.
pub fn count_option(
    args: &super::Args,
    name: &str,
    default: usize,
    max: usize,
) -> std::result::Result<usize, Failure> {
    match args.options.get(name) {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(Failure::args(format!(
                "--{name} must be an integer from 1 to {max}"
            ))),
        },
    }
}

/// The refusal of a workflow on the headless plane (it runs model turns).
pub fn headless_unsupported(name: &str) -> Failure {
    Failure {
        code: "invalid_params",
        stable: super::codes::HEADLESS_UNSUPPORTED,
        message: format!("/{name} runs model turns; use `snowpea run` or an interactive client"),
    }
}

/// How a step that did not answer ends the workflow, after the closing `command.progress`
/// with `outcome` (`stopped` or `error`) when `progress` is given.
pub fn stop_on(
    end: StepEnd,
    progress: Option<(&dyn Driver, &str, i64, &[Story])>,
) -> std::result::Result<String, Finish> {
    let (finish, outcome) = match end {
        StepEnd::Answer(text) => return Ok(text),
        StepEnd::Interrupted => (Finish::Interrupted, "stopped"),
        StepEnd::Denied => (Finish::Denied, "stopped"),
        StepEnd::Failed => (Finish::Error(None), "error"),
        StepEnd::Budget => (Finish::Budget, "error"),
    };
    if let Some((d, command, iteration, stories)) = progress {
        d.progress(command, iteration, stories, Some(outcome));
    }
    Err(finish)
}

#[cfg(test)]
#[path = "workflow_tests.rs"]
mod tests;
