//! The team's planner (issue 19 part B, upstream-behaviour §4 "team.start"): one tool-less
//! model call on the lead session's provider splits the task into at most [`MAX_TASKS`]
//! tasks with dependencies, answered as JSON
//! `{"tasks":[{"id","title","detail"?,"depends_on"?:[ids]}]}`. The answer is validated
//! ([`parse`]): ids unique and safe as names, dependencies known and acyclic, titles
//! non-empty. The call is billed like any model call (one `usage` event on the lead
//! session).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::Value;
use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use crate::events::EventLog;
use crate::session::Session;
use snowpea_session_llm::provider::{ChatMessage, ModelRequest, Providers};

/// Most tasks a plan may hold.
pub const MAX_TASKS: usize = 24;
/// Longest a task id may be.
const MAX_ID: usize = 32;
/// Longest a title may be (characters).
const MAX_TITLE: usize = 200;
/// Longest a task's detail may be (characters).
const MAX_DETAIL: usize = 4000;
/// Longest the planner call may take.
pub const PLAN_TIMEOUT: Duration = Duration::from_secs(180);

/// One planned task.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Unique id (`[A-Za-z0-9][A-Za-z0-9._-]*`, ≤ 32 characters).
    pub id: String,
    /// One line.
    pub title: String,
    /// What exactly to do (may be empty).
    pub detail: String,
    /// Ids that must be merged first.
    pub depends_on: Vec<String>,
}

/// The planner's system prompt for a team of `workers`, with the team guide's persona and
/// routing rules (`guide`, [`super::guides`]) when the project or home has one.
pub fn system(workers: i64, guide: Option<&super::guides::Guide>) -> String {
    let mut s = base_system(workers);
    if let Some(g) = guide {
        if !g.persona.is_empty() {
            s.push_str("\n\nThe team's guide:\n");
            s.push_str(&g.persona);
        }
        if !g.routing.is_empty() {
            s.push_str("\n\nRouting rules of the team (mention the agent in a task's detail when one applies):");
            for (when, agent) in &g.routing {
                s.push_str(&format!("\n- {when} -> {agent}"));
            }
        }
    }
    s
}

fn base_system(workers: i64) -> String {
    format!(
        "You are the planner of a team of {workers} software engineers working in parallel, \
         each in their own git worktree of the same repository. Split the user's task into at \
         most {MAX_TASKS} small, independent tasks; when a task needs another one's result, \
         list it in depends_on. Tasks that touch the same lines of the same file should depend \
         on each other, so their merges do not conflict. Answer with JSON only, no prose: \
         {{\"tasks\":[{{\"id\":\"t1\",\"title\":\"one line\",\"detail\":\"what exactly to do\",\
         \"depends_on\":[]}}]}}. Ids are short words of letters, digits, '.', '_' or '-'."
    )
}

fn valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    id.len() <= MAX_ID
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn id_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Validates the planner's answer `text` (JSON, possibly in a fenced block): the tasks in
/// order, or why the plan is unusable (`tasks[2].depends_on[0]: unknown task "x"`).
pub fn parse(text: &str) -> Result<Vec<Planned>, String> {
    let v = crate::llm::prompt::parse_json(text).ok_or("the planner's answer is not JSON")?;
    let list = match &v {
        Value::Array(a) => a,
        Value::Object(o) => o
            .get("tasks")
            .and_then(Value::as_array)
            .ok_or("the planner's answer has no \"tasks\" array")?,
        _ => return Err("the planner's answer is not a JSON object".into()),
    };
    if list.is_empty() {
        return Err("the planner returned no tasks".into());
    }
    if list.len() > MAX_TASKS {
        return Err(format!(
            "the planner returned {} tasks; at most {MAX_TASKS} are allowed",
            list.len()
        ));
    }
    let mut out: Vec<Planned> = Vec::with_capacity(list.len());
    let mut seen = HashSet::new();
    for (i, t) in list.iter().enumerate() {
        let at = format!("tasks[{i}]");
        let id = t
            .get("id")
            .and_then(id_of)
            .ok_or(format!("{at}.id: missing"))?;
        if !valid_id(&id) {
            return Err(format!(
                "{at}.id: {id:?} must be 1–{MAX_ID} letters, digits, '.', '_' or '-'"
            ));
        }
        if !seen.insert(id.clone()) {
            return Err(format!("{at}.id: {id:?} is used twice"));
        }
        let title = t
            .get("title")
            .and_then(Value::as_str)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .ok_or(format!("{at}.title: missing or empty"))?;
        if title.chars().count() > MAX_TITLE || title.contains('\n') {
            return Err(format!(
                "{at}.title: must be one line of at most {MAX_TITLE} characters"
            ));
        }
        let detail = match t.get("detail").or_else(|| t.get("description")) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) if s.chars().count() <= MAX_DETAIL => s.trim().to_owned(),
            Some(Value::String(_)) => {
                return Err(format!("{at}.detail: longer than {MAX_DETAIL} characters"))
            }
            Some(_) => return Err(format!("{at}.detail: must be a string")),
        };
        let deps = match t.get("depends_on").or_else(|| t.get("dependsOn")) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(j, d)| id_of(d).ok_or(format!("{at}.depends_on[{j}]: must be a task id")))
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err(format!("{at}.depends_on: must be an array of task ids")),
        };
        out.push(Planned {
            id,
            title,
            detail,
            depends_on: deps,
        });
    }
    for (i, t) in out.iter().enumerate() {
        for (j, d) in t.depends_on.iter().enumerate() {
            if !seen.contains(d) {
                return Err(format!("tasks[{i}].depends_on[{j}]: unknown task {d:?}"));
            }
            if *d == t.id {
                return Err(format!(
                    "tasks[{i}].depends_on[{j}]: a task cannot depend on itself"
                ));
            }
        }
    }
    for t in &mut out {
        let mut uniq = HashSet::new();
        t.depends_on.retain(|d| uniq.insert(d.clone()));
    }
    if let Some(id) = cycle(&out) {
        return Err(format!("the dependencies form a cycle through task {id:?}"));
    }
    Ok(out)
}

/// A task on a dependency cycle, if there is one (Kahn's algorithm).
fn cycle(tasks: &[Planned]) -> Option<String> {
    let mut indegree: HashMap<&str, usize> = tasks
        .iter()
        .map(|t| (t.id.as_str(), t.depends_on.len()))
        .collect();
    let mut ready: Vec<&str> = indegree
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(id, _)| *id)
        .collect();
    let mut done = 0;
    while let Some(id) = ready.pop() {
        done += 1;
        for t in tasks
            .iter()
            .filter(|t| t.depends_on.iter().any(|d| d == id))
        {
            let n = indegree.get_mut(t.id.as_str())?;
            *n -= 1;
            if *n == 0 {
                ready.push(&t.id);
            }
        }
    }
    (done < tasks.len()).then(|| {
        indegree
            .into_iter()
            .find(|(_, n)| *n > 0)
            .map(|(id, _)| id.to_owned())
            .unwrap_or_default()
    })
}

/// Runs the planner for `task` on the lead `session`'s provider and model; the validated
/// plan, or why there is none (no provider, timeout, bad answer).
pub async fn plan(
    home: &Home,
    providers: &Providers,
    log: &EventLog,
    session: &Session,
    task: &str,
    workers: i64,
    guide: Option<&super::guides::Guide>,
) -> Result<Vec<Planned>, String> {
    let workdir = session.workdir();
    let settings = snowpea_common::settings::load_effective(home, Some(&workdir))
        .map_err(|e| format!("cannot read settings: {e:#}"))?;
    let row = session.row();
    let provider = providers
        .select(&settings, row.provider.as_deref(), row.model.as_deref())
        .map_err(|(_, message)| message)?;
    let model = row
        .model
        .clone()
        .unwrap_or_else(|| provider.default_model().to_owned());
    let request = ModelRequest {
        model: model.clone(),
        system: system(workers, guide),
        messages: vec![ChatMessage::user(task.to_owned())],
        tools: vec![],
        max_tokens: Some(4096),
        effort: None,
    };
    let vendor = provider.vendor().to_owned();
    let (text, usage) =
        match tokio::time::timeout(PLAN_TIMEOUT, crate::llm::collect(provider.stream(request)))
            .await
        {
            Err(_) => {
                return Err(format!(
                    "the planner did not answer within {} s",
                    PLAN_TIMEOUT.as_secs()
                ))
            }
            Ok(Err(e)) => return Err(format!("the planner's model call failed: {e}")),
            Ok(Ok(r)) => r,
        };
    let usage = usage.unwrap_or_else(|| snowpea_session_llm::provider::Usage {
        input_tokens: 0,
        output_tokens: (text.len() as u64).div_ceil(4),
        cached_tokens: 0,
        timings: None,
    });
    log.event_to(
        session,
        &pb::UsageEvent {
            input_tokens: usage.input_tokens as i64,
            output_tokens: usage.output_tokens as i64,
            cached_input_tokens: (usage.cached_tokens > 0).then_some(usage.cached_tokens as i64),
            model: Some(model),
            provider: Some(vendor),
            ..Default::default()
        },
    );
    parse(&text)
}
