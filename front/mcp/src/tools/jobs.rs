//! `snowpea_jobs` → `job.list`: the scheduled jobs with their schedule, state and next run.
//!
//! Text: one line per job, `<jobId>  <state>  <spec>  next <nextRunAt>  <task>`.
//! Structured: `{jobs: [{jobId, spec, task, state, enabled, nextRunAt, lastRunAt,
//! lastStatus}]}`.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{definition as def, native, ToolError, ToolOutput};
use crate::args::Args;
use crate::server::State;
use crate::transcript::clip;

/// The tool's name.
pub const NAME: &str = "snowpea_jobs";

/// Most jobs listed.
pub const MAX_JOBS: usize = 500;

/// The tool's definition.
pub fn definition() -> Value {
    def(
        NAME,
        "List Snowpea jobs",
        "List the Snowpea agent's scheduled jobs (unattended prompts): jobId, schedule, \
         state, next and last run.",
        json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        true,
    )
}

/// Runs the tool.
pub async fn call(state: &Arc<State>, args: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    Args::new(args, &[])?;
    let client = state.client().await.map_err(ToolError::Daemon)?;
    let result = client
        .call("job.list", json!({}))
        .await
        .map_err(native("job.list"))?;
    let jobs: Vec<Value> = result
        .get("jobs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(MAX_JOBS)
        .map(|j| {
            let keep = [
                "jobId",
                "spec",
                "task",
                "state",
                "enabled",
                "nextRunAt",
                "lastRunAt",
                "lastStatus",
                "kind",
            ];
            let mut row = Map::new();
            for k in keep {
                if let Some(v) = j.get(k) {
                    row.insert(k.to_owned(), v.clone());
                }
            }
            Value::Object(row)
        })
        .collect();
    let text = if jobs.is_empty() {
        "No scheduled jobs.".to_owned()
    } else {
        jobs.iter()
            .map(|j| {
                let s = |k: &str| j.get(k).and_then(Value::as_str).unwrap_or("");
                format!(
                    "{}  {}  {}  next {}  {}",
                    s("jobId"),
                    s("state"),
                    s("spec"),
                    j.get("nextRunAt").and_then(Value::as_str).unwrap_or("-"),
                    clip(s("task"), 120)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(ToolOutput::ok(text, json!({ "jobs": jobs })))
}
