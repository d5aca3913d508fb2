//! `snowpea_schedule{spec, prompt, workdir}` → `job.schedule {spec, task: prompt, workdir}`:
//! a prompt the agent runs unattended on a schedule (cron expression or natural language,
//! e.g. `every day at 9:00`, `in 20 minutes`). The run's approvals follow the daemon's
//! `approvals` settings for unattended jobs; nothing is allowed on this server's behalf.
//!
//! Text: `Scheduled job <jobId>; first run <nextRunAt>.` Structured: `{jobId, nextRunAt}`.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{definition as def, native, ToolError, ToolOutput};
use crate::args::Args;
use crate::server::State;

/// The tool's name.
pub const NAME: &str = "snowpea_schedule";

/// The tool's definition.
pub fn definition() -> Value {
    def(
        NAME,
        "Schedule a Snowpea job",
        "Schedule a prompt for the Snowpea agent to run unattended later or repeatedly, in \
         a working directory. spec is a cron expression (\"0 9 * * 1-5\") or plain words \
         (\"every day at 9:00\", \"in 20 minutes\"). Returns the jobId; snowpea_jobs lists \
         the jobs with their next run.",
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "string",
                    "description": "When to run: a cron expression or natural language."
                },
                "prompt": {
                    "type": "string",
                    "description": "The prompt the agent runs on each firing."
                },
                "workdir": {
                    "type": "string",
                    "description": "Absolute directory the run works in."
                }
            },
            "required": ["spec", "prompt", "workdir"],
            "additionalProperties": false
        }),
        false,
    )
}

/// Runs the tool.
pub async fn call(state: &Arc<State>, args: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let args = Args::new(args, &["spec", "prompt", "workdir"])?;
    let spec = args.str("spec")?;
    let prompt = args.str("prompt")?;
    args.str("workdir")?;
    let workdir = args
        .opt_dir("workdir")?
        .ok_or_else(|| ToolError::Other("invalid argument workdir: is required".into()))?;
    let client = state.client().await.map_err(ToolError::Daemon)?;
    let result = client
        .call(
            "job.schedule",
            json!({ "spec": spec, "task": prompt, "workdir": workdir }),
        )
        .await
        .map_err(native("job.schedule"))?;
    let job_id = result.get("jobId").cloned().unwrap_or(Value::Null);
    let next = result.get("nextRunAt").cloned().unwrap_or(Value::Null);
    let text = format!(
        "Scheduled job {}; first run {}.",
        job_id.as_str().unwrap_or_default(),
        next.as_str().unwrap_or("not planned")
    );
    Ok(ToolOutput::ok(
        text,
        json!({ "jobId": job_id, "nextRunAt": next }),
    ))
}
