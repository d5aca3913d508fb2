//! The command turn of a workflow (`/ralph`, `/ultrawork`, `/deepinit`; see
//! [`crate::commands::workflow`]): each step is a model turn of the agent loop inside the
//! command turn (its own `message.user` — `text` the command as typed, the step's prompt as
//! `expansion{kind: "command"}` — tool calls, `message.done` and `context`), and
//! `command.progress` events carry the turn id. The command's attachments go with the first
//! step only. A cancelled turn runs no further step.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use snowpea_proto::session::v1 as pb;

use super::agent::TurnOutcome;
use super::{TurnEnd, TurnStart, Turns};
use crate::commands::workflow::{BoxFut, Driver, Finish, Step, StepEnd, Story, WorkflowRun};
use crate::session::Session;

/// The [`Driver`] of one command turn.
struct TurnSteps<'a> {
    turns: &'a Turns,
    session: &'a Arc<Session>,
    t: &'a TurnStart,
    /// The command's name (`message.user.expansion.name`).
    name: &'a str,
    /// The first step has run (it took the attachments).
    started: AtomicBool,
}

impl Driver for TurnSteps<'_> {
    fn step(&self, step: Step) -> BoxFut<'_, StepEnd> {
        Box::pin(async move {
            if self.t.cancel.is_cancelled() {
                return StepEnd::Interrupted;
            }
            let first = !self.started.swap(true, Ordering::SeqCst);
            let st = TurnStart {
                turn_id: self.t.turn_id.clone(),
                text: self.t.text.clone(),
                queued: self.t.queued,
                cancel: self.t.cancel.clone(),
                system_reason: None,
                attachments: if first {
                    self.t.attachments.clone()
                } else {
                    Default::default()
                },
                headless: self.t.headless,
            };
            let expansion = pb::message_user_event::Expansion {
                kind: "command".into(),
                name: self.name.to_owned(),
                text: step.prompt,
            };
            let out = self
                .turns
                .model_turn(self.session, &st, Some(expansion), step.allowed_tools)
                .await;
            match out.end {
                TurnEnd::Complete => StepEnd::Answer(out.text),
                TurnEnd::Interrupted => StepEnd::Interrupted,
                TurnEnd::Denied => StepEnd::Denied,
                // An empty answer has its `error` event out; a stalled step, like a failed
                // one, ends the workflow.
                TurnEnd::Error | TurnEnd::EmptyResponse | TurnEnd::Stalled => StepEnd::Failed,
                TurnEnd::Budget => StepEnd::Budget,
            }
        })
    }

    fn progress(&self, command: &str, iteration: i64, stories: &[Story], outcome: Option<&str>) {
        self.turns.event(
            self.session,
            &pb::CommandProgressEvent {
                command: command.to_owned(),
                iteration,
                outcome: outcome.map(str::to_owned),
                stories: stories.to_vec(),
                turn_id: self.t.turn_id.clone(),
                ..Default::default()
            },
        );
    }

    fn workdir(&self) -> std::path::PathBuf {
        self.session.workdir()
    }
}

impl Turns {
    /// Runs the workflow `w` as the rest of command turn `t` and maps how it finished to
    /// the turn's end (a `message.done{role:"system"}` with its summary when complete).
    pub(super) async fn workflow_turn(
        &self,
        session: &Arc<Session>,
        t: &TurnStart,
        name: &str,
        w: WorkflowRun,
    ) -> TurnOutcome {
        let driver = TurnSteps {
            turns: self,
            session,
            t,
            name,
            started: AtomicBool::new(false),
        };
        let finish = w.0.run(&driver).await;
        let end = match finish {
            Finish::Complete { text, data } => {
                self.log.event_to_with(
                    session,
                    &pb::MessageDoneEvent {
                        turn_id: t.turn_id.clone(),
                        text,
                        role: "system".into(),
                        ..Default::default()
                    },
                    &[("/data", data)],
                );
                TurnEnd::Complete
            }
            Finish::Interrupted => TurnEnd::Interrupted,
            Finish::Denied => TurnEnd::Denied,
            Finish::Budget => TurnEnd::Budget,
            Finish::Error(failure) => {
                if let Some(f) = failure {
                    self.command_error(session, t, &f);
                }
                TurnEnd::Error
            }
        };
        tracing::info!(session_id = %session.id, turn_id = %t.turn_id, end = end.as_str(), "workflow ended");
        TurnOutcome {
            end,
            text: String::new(),
        }
    }
}
