//! Agent tools backed by svc-scheduler (issue 5): `schedule_create{spec, task, mode?}`,
//! `schedule_list` and `schedule_cancel{jobId}`, all with permission `send` (they arrange for
//! work to happen later, unattended). Jobs they create report `createdVia: "tool"`. They call
//! the scheduler's internal `SchedulerInternalService` over `run/scheduler.sock`; a job with
//! `meta` (owned by a browser) cannot be cancelled by them. When svc-scheduler is down they fail
//! with a clear error within [`CALL_TIMEOUT`], never a hang.
//!
//! The calling session (from [`ToolContext`]) is the job's origin, so `job.done` /
//! `job.failed` land on that chat, and its mode is the runs' mode unless the model names one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use snowpea_common::home::Home;
use snowpea_proto::scheduler::v1::{ToolCancelRequest, ToolListRequest, ToolScheduleRequest};

use crate::clients::scheduler::{SchedulerClient, CALL_TIMEOUT};
use crate::tools::{Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use snowpea_session_llm::provider::ToolSpec;

/// The three tools, calling the scheduler of `home`.
pub fn for_home(home: &Home) -> Vec<Arc<dyn Tool>> {
    let client = crate::clients::scheduler::connect(home);
    vec![
        Arc::new(ScheduleTool {
            which: Which::Create,
            client: client.clone(),
        }),
        Arc::new(ScheduleTool {
            which: Which::List,
            client: client.clone(),
        }),
        Arc::new(ScheduleTool {
            which: Which::Cancel,
            client,
        }),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Create,
    List,
    Cancel,
}

/// One of `schedule_create`, `schedule_list`, `schedule_cancel`.
#[derive(Debug, Clone)]
pub struct ScheduleTool {
    which: Which,
    client: SchedulerClient,
}

fn str_arg<'a>(a: &'a Value, key: &str) -> Result<&'a str, String> {
    match a.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(Value::String(_)) => Err(format!("argument `{key}` must not be empty")),
        Some(_) => Err(format!("argument `{key}` must be a string")),
        None => Err(format!("missing argument `{key}`")),
    }
}

fn opt_mode(a: &Value) -> Result<Option<String>, String> {
    match a.get("mode") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(m)) if ["plan", "accept", "auto"].contains(&m.as_str()) => {
            Ok(Some(m.clone()))
        }
        Some(_) => Err("argument `mode` must be one of plan, accept, auto".into()),
    }
}

fn failed(e: tonic::Status) -> ToolOutput {
    let e = snowpea_proto::error::RpcError::from_status(&e);
    ToolOutput::error(format!("scheduler: {} ({})", e.message, e.code.wire()))
}

impl Tool for ScheduleTool {
    fn name(&self) -> &'static str {
        match self.which {
            Which::Create => "schedule_create",
            Which::List => "schedule_list",
            Which::Cancel => "schedule_cancel",
        }
    }

    fn permission(&self) -> Permission {
        // All three arrange for work to run later on the user's behalf (module doc).
        Permission::Send
    }

    fn category(&self) -> &'static str {
        "builtin"
    }

    fn spec(&self) -> ToolSpec {
        let (description, parameters) = match self.which {
            Which::Create => (
                "Schedule a task to run later, unattended, in a new session in this working directory. \
                 `spec` is a cron expression (`0 9 * * 1-5`), an interval (`every 30 minutes`), a one-shot \
                 (`in 20 minutes`, `tomorrow 9am`, an ISO-8601 time) or a phrase (`daily at 9:00`, `매일 9시`).",
                json!({
                    "type": "object",
                    "properties": {
                        "spec": { "type": "string", "description": "When to run." },
                        "task": { "type": "string", "description": "The prompt to run each time." },
                        "mode": { "type": "string", "enum": ["plan", "accept", "auto"], "description": "Permission mode of the runs." }
                    },
                    "required": ["spec", "task"],
                    "additionalProperties": false
                }),
            ),
            Which::List => (
                "List scheduled jobs with their next run times and last results.",
                json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            ),
            Which::Cancel => (
                "Cancel a scheduled job by its id (from schedule_list).",
                json!({
                    "type": "object",
                    "properties": { "jobId": { "type": "string", "description": "The job to cancel." } },
                    "required": ["jobId"],
                    "additionalProperties": false
                }),
            ),
        };
        ToolSpec {
            name: self.name().into(),
            description: description.into(),
            parameters,
        }
    }

    fn plan(&self, a: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        let summary = match self.which {
            Which::Create => {
                let spec = str_arg(a, "spec")?;
                let task = str_arg(a, "task")?;
                opt_mode(a)?;
                format!(
                    "schedule_create {spec:?}: {}",
                    task.chars().take(60).collect::<String>()
                )
            }
            Which::List => "schedule_list".into(),
            Which::Cancel => format!("schedule_cancel {}", str_arg(a, "jobId")?),
        };
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: vec![],
            summary,
        })
    }

    fn run(&self, a: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let mut client = self.client.clone();
        let which = self.which;
        let workdir: PathBuf = ctx.workdir.clone();
        // The calling session: the job's origin (job.done / job.failed land there) and, when
        // the model names no mode, the mode its runs use.
        let session_id = ctx.session_id.clone();
        let session_mode = Some(ctx.mode.clone()).filter(|m| !m.is_empty());
        // A named agent's jobs run in its own session (issue 19).
        let agent = ctx.named_agent.clone();
        Box::pin(async move {
            let call = async {
                match which {
                    Which::Create => {
                        let req = ToolScheduleRequest {
                            spec: str_arg(&a, "spec").map_err(ToolOutput::error)?.to_owned(),
                            task: str_arg(&a, "task").map_err(ToolOutput::error)?.to_owned(),
                            mode: opt_mode(&a).map_err(ToolOutput::error)?.or(session_mode),
                            session_id: session_id.clone(),
                            workdir: workdir.display().to_string(),
                            agent: agent.clone(),
                        };
                        let r = client
                            .tool_schedule(req)
                            .await
                            .map_err(failed)?
                            .into_inner();
                        Ok(json!({ "jobId": r.job_id, "nextRunAt": r.next_run_at }))
                    }
                    Which::List => {
                        let r = client
                            .tool_list(ToolListRequest {
                                session_id: session_id.clone(),
                            })
                            .await
                            .map_err(failed)?;
                        let jobs: Vec<Value> = r
                            .into_inner()
                            .jobs
                            .into_iter()
                            .map(|j| json!({
                                "jobId": j.job_id, "spec": j.spec, "task": j.task, "kind": j.kind,
                                "enabled": j.enabled, "state": j.state, "nextRunAt": j.next_run_at,
                                "lastRunAt": j.last_run_at, "lastStatus": j.last_status, "createdVia": j.created_via,
                                "owned": j.owned,
                            }))
                            .collect();
                        Ok(json!({ "jobs": jobs }))
                    }
                    Which::Cancel => {
                        let job_id = str_arg(&a, "jobId").map_err(ToolOutput::error)?.to_owned();
                        client
                            .tool_cancel(ToolCancelRequest {
                                job_id: job_id.clone(),
                                session_id: session_id.clone(),
                            })
                            .await
                            .map_err(failed)?;
                        Ok(json!({ "jobId": job_id, "cancelled": true }))
                    }
                }
            };
            match tokio::time::timeout(CALL_TIMEOUT, call).await {
                Ok(Ok(v)) => ToolOutput {
                    ok: true,
                    content: v.to_string(),
                    meta: v,
                    diff: None,
                },
                Ok(Err(out)) => out,
                Err(_) => ToolOutput::error(format!(
                    "scheduler: svc-scheduler did not answer within {CALL_TIMEOUT:?}"
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn tool(which: Which) -> ScheduleTool {
        let home = Home::new("/nonexistent-snowpea-home");
        ScheduleTool {
            which,
            client: crate::clients::scheduler::connect(&home),
        }
    }

    #[tokio::test]
    async fn tools_are_send_permission_and_check_their_arguments() {
        let t = tool(Which::Create);
        let p = t
            .plan(
                &json!({"spec": "in 20 minutes", "task": "x"}),
                Path::new("/"),
            )
            .unwrap();
        assert_eq!(p.permission, Permission::Send);
        assert!(t
            .plan(&json!({"task": "x"}), Path::new("/"))
            .unwrap_err()
            .contains("spec"));
        assert!(t
            .plan(
                &json!({"spec": "x", "task": "y", "mode": "yolo"}),
                Path::new("/")
            )
            .is_err());
        assert_eq!(
            tool(Which::Cancel)
                .plan(&json!({"jobId": "job_1"}), Path::new("/"))
                .unwrap()
                .permission,
            Permission::Send
        );
        assert_eq!(tool(Which::List).name(), "schedule_list");
    }

    #[tokio::test]
    async fn scheduler_down_is_a_clear_error_not_a_hang() {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let ctx = ToolContext {
            workdir: "/tmp".into(),
            progress: tx,
            cancel: Default::default(),
            output_cap: 4096,
            session_id: String::new(),
            mode: String::new(),
            turn_id: String::new(),
            call_id: String::new(),
            named_agent: None,
            turn: None,
            backend: crate::backend::local(),
        };
        let out = tokio::time::timeout(
            Duration::from_secs(15),
            tool(Which::List).run(json!({}), ctx),
        )
        .await
        .unwrap();
        assert!(!out.ok);
        assert!(out.content.starts_with("scheduler:"), "{}", out.content);
    }
}
