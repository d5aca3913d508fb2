//! Slash-command turns (issue 18 "Commands"): `command.run` and a `session.prompt` whose
//! text starts with `/` take the same path — the reply is `{turnId}` at once, the command
//! runs as that turn in the background and the turn ends with `turn.done`:
//!
//! * `complete` after a `message.done{role:"system", text, data}` with the command's result
//!   (no model call);
//! * `error` after an `error{code, message, commandCode}` event (`not_found` for an unknown
//!   command, `invalid_params` for bad arguments, `not_implemented` for a capability not in
//!   this build, …);
//! * `interrupted` when `session.interrupt` cancels it;
//! * a markdown command, skill, `/review` or `/skill create` continues as a normal model turn
//!   limited to its `allowed-tools`: its `message.user` keeps `text` as typed and carries the
//!   body the model was given as `expansion{kind: skill|command, name, text}` (spec
//!   `message.user.expansion`; issue 32 item 4);
//! * `/ralph`, `/ultrawork`, `/deepinit` continue with several model steps
//!   ([`super::workflow`]).
//!
//! `skill.create{description}` starts a `/skill create` turn here ([`Turns::draft_skill`]).

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;

use super::agent::TurnOutcome;
use super::{TurnEnd, TurnStart, Turns};
use crate::commands::{AfterTurn, Failure, PromptTurn, Reply};
use crate::session::Session;
use snowpea_session_error::{Error, Result};

/// The `clientKind` of the headless command plane (`snowpea cmd`).
pub const HEADLESS_CLIENT_KIND: &str = "cli";

/// Longest `command.run` `name`, characters (longer than any command, skill or plugin name).
pub const MAX_COMMAND_NAME_CHARS: usize = 128;

impl Turns {
    /// `command.run`: starts the command as a turn of the session (queued behind a running
    /// turn like any prompt) and returns its id. A call from a `cli` client is on the
    /// headless plane (confirmation rule; no model turns).
    pub async fn command(
        self: &Arc<Self>,
        ctx: &CallContext,
        p: pb::CommandRunParams,
    ) -> Result<pb::CommandRunResult> {
        let session = self.sessions.get(&p.session_id)?;
        let name = p.name.trim().trim_start_matches('/');
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(Error::invalid(
                "params.name",
                "must be a command name without spaces",
            ));
        }
        if name.chars().count() > MAX_COMMAND_NAME_CHARS {
            return Err(Error::invalid(
                "params.name",
                format!("must be at most {MAX_COMMAND_NAME_CHARS} characters"),
            ));
        }
        let headless = ctx.client_kind.as_deref() == Some(HEADLESS_CLIENT_KIND);
        let text = if p.args.trim().is_empty() {
            format!("/{name}")
        } else {
            format!("/{name} {}", p.args.trim())
        };
        let turn_id = self.start(&session, text, headless)?;
        Ok(pb::CommandRunResult { turn_id })
    }

    /// `skill.create` with a `description`: checks the name, description and target, then
    /// starts the drafting `/skill create` turn on `sessionId` (which must be rooted at
    /// `workdir`) or on a new session of `workdir`; answers `{sessionId, turnId}`. The turn
    /// validates and saves the SKILL.md when the model answered.
    pub async fn draft_skill(
        self: &Arc<Self>,
        ctx: &CallContext,
        p: pb::SkillCreateParams,
    ) -> Result<pb::SkillCreateResult> {
        self.commands.skills.check_draft(&p)?;
        let workdir = snowpea_session_core::workdir::check_workdir(&p.workdir)?;
        let session = match p.session_id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => {
                let s = self.sessions.get(id)?;
                if s.workdir() != workdir {
                    return Err(Error::invalid(
                        "params.sessionId",
                        "that session is not rooted at params.workdir",
                    ));
                }
                s
            }
            None => {
                let r = self
                    .sessions
                    .create(
                        ctx,
                        pb::SessionCreateParams {
                            workdir: p.workdir.clone(),
                            ..Default::default()
                        },
                    )
                    .await?;
                self.sessions.get(&r.session_id)?
            }
        };
        let quote = |s: &str| {
            shlex::try_quote(s)
                .map(|q| q.into_owned())
                .map_err(|_| Error::invalid("params.description", "must not contain NUL"))
        };
        let mut text = format!(
            "/skill create {} {}",
            quote(&p.name)?,
            quote(p.description.as_deref().unwrap_or_default().trim())?
        );
        if !p.scope.is_empty() {
            text.push_str(&format!(" --scope={}", quote(&p.scope)?));
        }
        if p.force {
            text.push_str(" --force");
        }
        let turn_id = self.start(&session, text, false)?;
        Ok(pb::SkillCreateResult {
            session_id: Some(session.id.clone()),
            turn_id: Some(turn_id),
            ..Default::default()
        })
    }

    pub(super) fn command_error(&self, session: &Session, t: &TurnStart, f: &Failure) {
        self.event(
            session,
            &pb::ErrorEvent {
                turn_id: t.turn_id.clone(),
                code: f.code.to_owned(),
                message: f.message.clone(),
                command_code: Some(f.stable.to_owned()),
                ..Default::default()
            },
        );
    }

    /// Runs the command turn `t` (`/<name> args`; see the module doc).
    pub(crate) async fn command_turn(
        &self,
        session: &Arc<Session>,
        t: &TurnStart,
        name: &str,
        args: &str,
    ) -> TurnOutcome {
        if let Err(e) = self.log.flush().await {
            tracing::error!(error = %format!("{e:#}"), "flush before command failed");
        }
        self.event(
            session,
            &pb::TurnStartedEvent {
                turn_id: t.turn_id.clone(),
                prompt: Some(t.text.clone()),
                queued: t.queued,
                initiator: "user".into(),
                ..Default::default()
            },
        );
        let run = self
            .commands
            .execute(session, name, args, &t.turn_id, t.headless);
        let outcome = tokio::select! {
            biased;
            _ = t.cancel.cancelled() => {
                return TurnOutcome { end: TurnEnd::Interrupted, text: String::new() };
            }
            o = run => o,
        };
        tracing::info!(session_id = %session.id, turn_id = %t.turn_id, command = name, ok = outcome.is_ok(), "command ran");
        match outcome {
            Err(f) => {
                self.command_error(session, t, &f);
                TurnOutcome {
                    end: TurnEnd::Error,
                    text: String::new(),
                }
            }
            Ok(Reply::Done { text, data }) => {
                self.log.event_to_with(
                    session,
                    &pb::MessageDoneEvent {
                        turn_id: t.turn_id.clone(),
                        text: text.clone(),
                        role: "system".into(),
                        ..Default::default()
                    },
                    &[("/data", data)],
                );
                TurnOutcome {
                    end: TurnEnd::Complete,
                    text: String::new(),
                }
            }
            Ok(Reply::Prompt(prompt)) => self.prompted_turn(session, t, name, prompt).await,
            Ok(Reply::Workflow(w)) => self.workflow_turn(session, t, name, w).await,
        }
    }

    /// The model part of a command turn, then its [`AfterTurn`] work.
    async fn prompted_turn(
        &self,
        session: &Arc<Session>,
        t: &TurnStart,
        name: &str,
        prompt: PromptTurn,
    ) -> TurnOutcome {
        let expansion = pb::message_user_event::Expansion {
            kind: if prompt.skill { "skill" } else { "command" }.into(),
            name: name.to_owned(),
            text: prompt.text.clone(),
        };
        let mut outcome = self
            .model_turn(session, t, Some(expansion), prompt.allowed_tools.clone())
            .await;
        if outcome.end != TurnEnd::Complete {
            return outcome;
        }
        match prompt.after {
            None => {}
            Some(AfterTurn::SaveSkill { name, path }) => {
                let content = crate::commands::skill_draft(&outcome.text);
                match self
                    .commands
                    .skills
                    .save_draft(&name, path.clone(), content)
                    .await
                {
                    Ok(()) => {
                        self.log.event_to_with(
                            session,
                            &pb::MessageDoneEvent {
                                turn_id: t.turn_id.clone(),
                                text: format!("saved skill {name} to {}", path.display()),
                                role: "system".into(),
                                ..Default::default()
                            },
                            &[("/data", serde_json::json!({"name": name, "path": path}))],
                        );
                    }
                    Err(e) => {
                        let f = Failure::from_error(e);
                        self.command_error(
                            session,
                            t,
                            &Failure {
                                message: format!(
                                    "the drafted SKILL.md was not saved: {}",
                                    f.message
                                ),
                                ..f
                            },
                        );
                        outcome.end = TurnEnd::Error;
                    }
                }
            }
        }
        outcome
    }
}
