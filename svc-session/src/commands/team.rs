//! `/team [status [<teamId>]|stop|<task> [--workers=N]]`: the session's teams, through the
//! same calls as `team.status` / `team.start` / `session.interrupt` ([`crate::teams`]).
//! Bare and `status` are read; `stop` and starting a team are medium_write. `--workers`
//! defaults to the setting `team.workers` (3) and is clamped to 1–16 like `team.start{n}`.
//! `on`/`off` switch the session's delegation mode ([`crate::session::delegation`]: the lead
//! hands the work to subagents; `mode.changed{mode, delegation}`), never starting a team
//! whose task is "on"; bare and `status` also say whether it is in force.

use serde_json::json;
use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;

use super::{Args, Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/team`.
pub struct Team;

fn status_text(s: &pb::TeamStatusResult) -> String {
    let mut out = format!(
        "Team {} ({}, {} workers): {}",
        s.team_id, s.state, s.workers, s.task
    );
    for t in &s.tasks {
        out.push_str(&format!("\n- {} [{}] {}", t.task_id, t.status, t.title));
        if t.retries > 0 {
            out.push_str(&format!(" (retried {}×)", t.retries));
        }
        if !t.note.is_empty() && t.status == "failed" {
            out.push_str(&format!(" — {}", t.note));
        }
    }
    out
}

impl Builtin for Team {
    fn name(&self) -> &'static str {
        "team"
    }
    fn summary(&self) -> &'static str {
        "Run a team of agents"
    }
    fn usage(&self) -> &'static str {
        "/team [status [<teamId>]|on|off|stop|<task> [--workers=N]]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status", "on", "off", "stop"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn tier(&self, args: &Args) -> Risk {
        match args.sub() {
            None | Some("status") => Risk::Read,
            _ => Risk::MediumWrite,
        }
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let teams = cx
                .teams
                .get()
                .ok_or_else(|| Failure::failed("unavailable", "teams are not ready yet"))?;
            let a = &call.args;
            match a.sub() {
                None | Some("status") => {
                    a.only_options(&[]).map_err(Failure::args)?;
                    let id = a.words.get(1).cloned().unwrap_or_default();
                    let delegation = cx.sessions.delegation(&call.session);
                    let mode_line = format!(
                        "Delegation mode: {}.",
                        if delegation { "on" } else { "off" }
                    );
                    let s = match teams
                        .status(pb::TeamStatusParams {
                            team_id: id.clone(),
                        })
                        .await
                    {
                        Ok(s) => s,
                        // No team yet: still say whether delegation mode is on.
                        Err(snowpea_session_error::Error::NotFound(_)) if id.is_empty() => {
                            return Ok(Reply::done(
                                format!("No team has run yet. {mode_line}"),
                                json!({"delegation": delegation}),
                            ))
                        }
                        Err(e) => return Err(Failure::from_error(e)),
                    };
                    let data = json!({
                        "teamId": s.team_id, "state": s.state, "workers": s.workers,
                        "delegation": delegation,
                        "tasks": s.tasks.iter().map(|t| json!({
                            "taskId": t.task_id, "title": t.title, "status": t.status,
                            "retries": t.retries, "note": t.note,
                        })).collect::<Vec<_>>(),
                    });
                    Ok(Reply::done(
                        format!("{}\n{mode_line}", status_text(&s)),
                        data,
                    ))
                }
                Some(sw @ ("on" | "off")) => {
                    a.only_options(&[]).map_err(Failure::args)?;
                    if a.words.len() > 1 {
                        return Err(Failure::args(format!(
                            "/team {sw} takes no task; start a team with /team <task>"
                        )));
                    }
                    let on = cx
                        .sessions
                        .set_delegation(&call.session.id, sw == "on")
                        .await
                        .map_err(Failure::from_error)?;
                    Ok(Reply::done(
                        if on {
                            "Delegation mode on: this session hands its work to subagents."
                        } else {
                            "Delegation mode off: this session does the work itself."
                        },
                        json!({"delegation": on}),
                    ))
                }
                Some("stop") => {
                    a.only_options(&[]).map_err(Failure::args)?;
                    teams.interrupt_session(&call.session.id);
                    Ok(Reply::done(
                        "Stopping this session's teams.",
                        json!({"stopped": true}),
                    ))
                }
                Some(_) => {
                    a.only_options(&["workers"]).map_err(Failure::args)?;
                    let n = match a.options.get("workers") {
                        Some(w) => w.parse::<i64>().map_err(|_| {
                            Failure::args(format!("--workers must be a number, not {w:?}"))
                        })?,
                        None => teams.default_workers(&call.session.workdir()),
                    };
                    let task = a.words.join(" ");
                    let r = teams
                        .start(
                            &CallContext::default(),
                            pb::TeamStartParams {
                                n,
                                session_id: call.session.id.clone(),
                                task,
                            },
                        )
                        .await
                        .map_err(Failure::from_error)?;
                    Ok(Reply::done(
                        format!(
                            "Team {} started; follow it with /team status {}.",
                            r.team_id, r.team_id
                        ),
                        json!({"teamId": r.team_id}),
                    ))
                }
            }
        })
    }
}
