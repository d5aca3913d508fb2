//! Questions the agent puts to its person (issue 17; spec `question.request`,
//! `question.pending`, `question.list`, `question.respond`, `question.resolved`; the
//! `ask_user` tool is [`crate::tools::ask_user`]). Owns the `questions` table.
//!
//! One `ask_user` call is one batch (`qu-` + 12 hex). It is persisted (without answers),
//! `question.pending{request}` goes to every connection but the live origin (to all while
//! no origin is live), and the session's origin connection gets the
//! server→client request `question.request` (with a 2 s grace added to its timeout) as soon
//! as it is live. The first of these resolves it:
//! * the origin's answer to `question.request` (`{answers}`) → `by: "user"`;
//! * `question.respond{requestId, answers}` → `by: "user"` (an empty list declines the
//!   batch), by the rule `approval.respond` follows too
//!   ([`crate::session::callers::may_answer`], issue 32 item 10): the origin of the session
//!   or of one it was delegated from, only its host besides for a browser-owned session,
//!   else any connected surface (a browser profile: its own cards and those without a host);
//! * the origin answering `question.request` with an error, or its connection closing before
//!   it answered → declined, `by: "origin-unreachable"`;
//! * `questions.timeoutSec` (default 600) → timed out, `by: "timeout"`;
//! * `session.interrupt` / `session.close` → declined, `by: "interrupted"`.
//!
//! `question.resolved{requestId, by}` follows every resolution. While no origin is live the
//! batch stays pending (listed, answerable as above); a connection that attaches, or the
//! origin re-announced, gets `question.request` again. A batch pending when svc-session
//! died is restored at start ([`Questions::restore`]) with what is left of its timeout:
//! still listed, re-sent and answerable; its answers reach the model as a new turn of the
//! session ([`LateAnswer`]), because the turn that asked was closed by the restart.
//! Answers never enter the database, events or logs in clear when the question is `secret`.

pub mod shape;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_common::bus::{BusHub, RequestError};
use snowpea_common::home::Home;
use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::events::EventLog;
use crate::session::ask_origin::{ask_origin, AskOptions, Ended, Reply};
use crate::session::{Registry, Session};
use crate::store::{self, Store};
pub use shape::{Answer, Question};
use snowpea_session_error::{Error, Result};

/// Default of the `questions.timeoutSec` setting, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// Longest a batch may wait, whatever the settings say (7 days).
pub const MAX_TIMEOUT_SECS: u64 = 7 * 24 * 3600;
/// Extra time the origin gets to answer `question.request` beyond `timeoutSec`.
pub const ORIGIN_GRACE: Duration = Duration::from_secs(2);

/// How a batch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// One answer per question; `None` = the whole batch was declined or timed out.
    pub answers: Option<Vec<Answer>>,
    /// Who decided: `user`, `timeout`, `interrupted`, `origin-unreachable`.
    pub by: String,
}

impl Resolution {
    fn declined(by: &str) -> Self {
        Resolution {
            answers: None,
            by: by.to_owned(),
        }
    }

    /// The stored outcome: `answered`, `declined` or `timed_out`.
    pub fn outcome(&self) -> &'static str {
        match (&self.answers, self.by.as_str()) {
            (Some(_), _) => "answered",
            (None, "timeout") => "timed_out",
            (None, _) => "declined",
        }
    }
}

/// What the `ask_user` call gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// True when at least one question was answered.
    pub ok: bool,
    /// The text for the model (secret answers clear).
    pub text: String,
    /// The same text with secret answers masked (stored in the `tool.result` event).
    pub masked: String,
    /// How it was resolved.
    pub by: String,
    /// The batch's id.
    pub request_id: String,
}

/// Answers to a batch restored after a restart: the turn that asked is gone, so they are
/// handed to the model as a new prompt of the session (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateAnswer {
    /// The session to prompt.
    pub session_id: String,
    /// The prompt text (secret answers masked: a prompt is stored as `message.user`).
    pub text: String,
}

struct Pending {
    session_id: String,
    questions: Vec<Question>,
    request: pb::QuestionRequest,
    answer: Option<oneshot::Sender<Resolution>>,
    cancel: CancellationToken,
}

/// The `question.*` component: the pending batches of the process and the `questions`
/// table.
pub struct Questions {
    home: Home,
    log: EventLog,
    hub: Arc<BusHub>,
    store: Store,
    sessions: Registry,
    pending: Mutex<HashMap<String, Pending>>,
    late: mpsc::UnboundedSender<LateAnswer>,
    late_rx: Mutex<Option<mpsc::UnboundedReceiver<LateAnswer>>>,
}

impl std::fmt::Debug for Questions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Questions").finish_non_exhaustive()
    }
}

impl Questions {
    /// The component: settings of `home`, writes through `log`, reads through `store`,
    /// requests over `hub`, sessions looked up in `sessions`.
    pub fn new(
        home: Home,
        log: EventLog,
        hub: Arc<BusHub>,
        store: Store,
        sessions: Registry,
    ) -> Self {
        let (late, late_rx) = mpsc::unbounded_channel();
        Questions {
            home,
            log,
            hub,
            store,
            sessions,
            pending: Mutex::new(HashMap::new()),
            late,
            late_rx: Mutex::new(Some(late_rx)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many batches are pending (for one session, or all).
    pub fn count(&self, session_id: Option<&str>) -> usize {
        self.lock()
            .values()
            .filter(|p| session_id.is_none_or(|s| p.session_id == s))
            .count()
    }

    /// The answers of restored batches (taken once, by the composition root, which starts
    /// a turn with each).
    pub fn take_late_answers(&self) -> Option<mpsc::UnboundedReceiver<LateAnswer>> {
        self.late_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Updates the session's pending-question count (its `awaiting_question` status) and
    /// publishes `sessions.changed`.
    fn changed(&self, session: &Session) {
        session.set_pending_questions(self.count(Some(&session.id)));
        session.notify_changed(&self.log, "question");
    }

    /// How long a batch of `session` may wait: `questions.timeoutSec` from the settings of
    /// its workdir (default 600 s), at most 7 days.
    fn timeout(&self, session: &Session) -> Duration {
        let settings =
            snowpea_common::settings::load_effective(&self.home, Some(&session.workdir()))
                .unwrap_or_else(|_| json!({}));
        let secs = snowpea_common::settings::get(&settings, "questions.timeoutSec")
            .and_then(Value::as_f64)
            .filter(|s| *s > 0.0 && s.is_finite())
            .unwrap_or(DEFAULT_TIMEOUT_SECS as f64);
        Duration::from_secs_f64(secs.min(MAX_TIMEOUT_SECS as f64))
    }

    /// Asks `questions` (from the `ask_user` call `call_id` of turn `turn_id`) and waits
    /// for the resolution; `cancel` is the turn's (an interrupt declines the batch).
    pub async fn ask(
        self: &Arc<Self>,
        session: &Arc<Session>,
        turn_id: &str,
        call_id: &str,
        questions: Vec<Question>,
        cancel: CancellationToken,
    ) -> Asked {
        let timeout = self.timeout(session);
        let timeout_sec = timeout.as_secs_f64().ceil() as i64;
        let request_id = format!("qu-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let deadline_ms = snowpea_common::time::now_ms() + timeout.as_millis() as i64;
        let row = store::questions::PendingRow {
            request_id: request_id.clone(),
            session_id: session.id.clone(),
            turn_id: turn_id.to_owned(),
            call_id: call_id.to_owned(),
            questions: serde_json::to_string(&questions).unwrap_or_default(),
            timeout_sec,
            deadline_ms,
        };
        self.log
            .write_later(move |c| store::questions::insert(c, &row, &now_iso()));
        let (tx, rx) = oneshot::channel();
        let answered = self.open(session, &request_id, questions.clone(), timeout_sec, cancel);
        let me = self.clone();
        let s = session.clone();
        let rid = request_id.clone();
        tokio::spawn(async move {
            let r = me.wait(&s, &rid, answered, timeout).await;
            let _ = tx.send(r);
        });
        let resolution = rx
            .await
            .unwrap_or_else(|_| Resolution::declined("interrupted"));
        let (text, masked) = match &resolution.answers {
            Some(a) => (
                shape::answered_text(&questions, a, false),
                shape::answered_text(&questions, a, true),
            ),
            None => {
                let t = shape::unanswered_text(&resolution.by, timeout_sec);
                (t.clone(), t)
            }
        };
        Asked {
            ok: resolution.answers.is_some(),
            text,
            masked,
            by: resolution.by,
            request_id,
        }
    }

    /// Registers a pending batch, broadcasts `question.pending` and returns the channel its
    /// `question.respond` answer arrives on. The entry's cancel token is a child of `cancel`.
    fn open(
        &self,
        session: &Arc<Session>,
        request_id: &str,
        questions: Vec<Question>,
        timeout_sec: i64,
        cancel: CancellationToken,
    ) -> (oneshot::Receiver<Resolution>, CancellationToken) {
        let request = pb::QuestionRequest {
            questions: questions.iter().map(Question::to_proto).collect(),
            request_id: request_id.to_owned(),
            session_id: session.id.clone(),
            timeout_sec,
        };
        let (answer, answered) = oneshot::channel();
        let cancel = cancel.child_token();
        self.lock().insert(
            request_id.to_owned(),
            Pending {
                session_id: session.id.clone(),
                questions,
                request: request.clone(),
                answer: Some(answer),
                cancel: cancel.clone(),
            },
        );
        self.changed(session);
        (answered, cancel)
    }

    /// Waits for the first resolution of a registered batch (see the module doc), then
    /// records it and publishes `question.resolved`.
    async fn wait(
        &self,
        session: &Arc<Session>,
        request_id: &str,
        (mut answered, cancel): (oneshot::Receiver<Resolution>, CancellationToken),
        timeout: Duration,
    ) -> Resolution {
        // The events before this ask (its tool.call) reach clients first.
        if let Err(e) = self.log.flush().await {
            tracing::warn!(error = %e, "event log flush before question.request failed");
        }
        let Some((request, questions)) = self
            .lock()
            .get(request_id)
            .map(|p| (p.request.clone(), p.questions.clone()))
        else {
            return answered
                .try_recv()
                .unwrap_or_else(|_| Resolution::declined("interrupted"));
        };
        // `question.pending` goes to everyone but a live origin (which gets the request).
        let origin = session.origin().filter(|o| self.hub.is_live(o));
        let targets: Vec<String> = match &origin {
            Some(o) => self
                .hub
                .connections()
                .into_iter()
                .map(|c| c.connection_id)
                .filter(|c| c != o)
                .collect(),
            None => vec![],
        };
        if origin.is_none() || !targets.is_empty() {
            self.hub.publish(
                &pb::QuestionPendingNotification {
                    host_tools_from: session.host_tools_from(),
                    request: Some(request.clone()),
                },
                targets,
            );
        }
        // Only a live origin is asked; one that cannot take the request declines the batch.
        let options = AskOptions {
            deadline: Instant::now() + timeout,
            grace: ORIGIN_GRACE,
            require_live: true,
        };
        let ended = ask_origin(
            &self.hub,
            session.origin.subscribe(),
            &request,
            options,
            &mut answered,
            &cancel,
            |outcome| match outcome {
                Ok(v) => {
                    let parsed = shape::answers_from_json(v.get("answers").unwrap_or(&Value::Null), "answers")
                        .and_then(|a| shape::validate_answers(&questions, a, "answers"));
                    match parsed {
                        Ok(answers) => Reply::Resolve(Resolution { answers, by: "user".into() }),
                        Err((field, why)) => {
                            // Never log the answer itself (it may be a secret).
                            tracing::warn!(request_id, field = %field, reason = %why, "question.request answered with a bad shape; waiting for question.respond");
                            Reply::WaitForNewOrigin
                        }
                    }
                }
                Err(RequestError::Timeout(_)) => Reply::Resolve(Resolution::declined("timeout")),
                Err(e) => {
                    tracing::info!(request_id, error = %e, "origin could not take question.request; declining");
                    Reply::Resolve(Resolution::declined("origin-unreachable"))
                }
            },
        )
        .await;
        let resolution = match ended {
            Ended::Resolved(r) => r,
            Ended::TimedOut => Resolution::declined("timeout"),
            Ended::Interrupted => Resolution::declined("interrupted"),
        };
        self.finish(session, request_id, resolution, answered)
    }

    /// Removes the entry (a `question.respond` that took it first wins), records the
    /// resolution and publishes `question.resolved`.
    fn finish(
        &self,
        session: &Session,
        request_id: &str,
        resolution: Resolution,
        mut answered: oneshot::Receiver<Resolution>,
    ) -> Resolution {
        let resolution = if self.lock().remove(request_id).is_some() {
            resolution
        } else {
            answered.try_recv().unwrap_or(resolution)
        };
        {
            let (rid, outcome, by) = (
                request_id.to_owned(),
                resolution.outcome(),
                resolution.by.clone(),
            );
            self.log
                .write_later(move |c| store::questions::resolve(c, &rid, outcome, &by, &now_iso()));
        }
        self.log.publish(&pb::QuestionResolvedNotification {
            by: resolution.by.clone(),
            request_id: request_id.to_owned(),
        });
        tracing::info!(session_id = %session.id, request_id, outcome = resolution.outcome(), by = %resolution.by, "question resolved");
        self.changed(session);
        resolution
    }

    /// `question.respond`: any client may answer; an unknown id is `not_found`, an
    /// already-resolved batch `ok` with no effect, answers of the wrong count or shape
    /// `invalid_params` naming the field.
    pub async fn respond(
        &self,
        ctx: &snowpea_common::context::CallContext,
        p: pb::QuestionRespondParams,
    ) -> Result<()> {
        let answers: Vec<Answer> = p
            .answers
            .into_iter()
            .map(|a| Answer {
                selected: a.selected,
                text: a.text,
            })
            .collect();
        {
            let mut pending = self.lock();
            if let Some(entry) = pending.get(&p.request_id) {
                crate::session::callers::may_answer(
                    ctx,
                    &self.sessions,
                    &entry.session_id,
                    "question.respond",
                )?;
                let answers = shape::validate_answers(&entry.questions, answers, "params.answers")
                    .map_err(|(field, why)| Error::invalid(&field, why))?;
                let mut entry = pending.remove(&p.request_id).expect("checked above");
                if let Some(tx) = entry.answer.take() {
                    let _ = tx.send(Resolution {
                        answers,
                        by: "user".into(),
                    });
                }
                return Ok(());
            }
        }
        let id = p.request_id.clone();
        match self
            .store
            .read("question.respond", move |c| {
                store::questions::status(c, &id)
            })
            .await?
        {
            Some(_) => Ok(()),
            None => Err(Error::NotFound(format!(
                "no question batch {:?}",
                p.request_id
            ))),
        }
    }

    /// `question.list`: the pending batches (of one session, or all), oldest first.
    pub async fn list(&self, session_id: Option<&str>) -> Result<pb::QuestionListResult> {
        if let Some(id) = session_id {
            if self.sessions.row(id).await?.is_none() {
                return Err(Error::NotFound(format!("no session {id:?}")));
            }
        }
        let mut requests: Vec<pb::QuestionRequest> = self
            .lock()
            .values()
            .filter(|p| session_id.is_none_or(|s| p.session_id == s))
            .map(|p| p.request.clone())
            .collect();
        requests.sort_by(|a, b| a.request_id.cmp(&b.request_id));
        Ok(pb::QuestionListResult { requests })
    }

    /// Declines every pending batch of a session (`session.interrupt` also reaches batches
    /// restored after a restart, which no running turn waits on; `session.close`).
    pub fn interrupt_session(&self, session_id: &str) {
        for p in self.lock().values() {
            if p.session_id == session_id {
                p.cancel.cancel();
            }
        }
    }

    /// Restores the batches a killed svc-session left pending (see the module doc): a batch
    /// of a session that is gone, or past its deadline, is resolved at once with a reason.
    pub async fn restore(self: &Arc<Self>) -> Result<()> {
        let rows = self
            .store
            .read("questions.restore", store::questions::pending)
            .await?;
        for row in rows {
            let questions: Vec<Question> = serde_json::from_str(&row.questions).unwrap_or_default();
            let session = self.sessions.get(&row.session_id).ok();
            let left = row.deadline_ms - snowpea_common::time::now_ms();
            let (Some(session), true, false) = (session, left > 0, questions.is_empty()) else {
                let by = if left <= 0 { "timeout" } else { "interrupted" };
                let (rid, outcome) = (
                    row.request_id.clone(),
                    if left <= 0 { "timed_out" } else { "declined" },
                );
                self.log.write_later(move |c| {
                    store::questions::resolve(c, &rid, outcome, by, &now_iso())
                });
                self.log.publish(&pb::QuestionResolvedNotification {
                    by: by.into(),
                    request_id: row.request_id.clone(),
                });
                tracing::info!(request_id = %row.request_id, by, "resolved a question batch a restart left pending");
                continue;
            };
            tracing::info!(request_id = %row.request_id, session_id = %row.session_id, "restored a pending question batch");
            let answered = self.open(
                &session,
                &row.request_id,
                questions.clone(),
                row.timeout_sec,
                CancellationToken::new(),
            );
            let me = self.clone();
            tokio::spawn(async move {
                let r = me
                    .wait(
                        &session,
                        &row.request_id,
                        answered,
                        Duration::from_millis(left as u64),
                    )
                    .await;
                if let Some(answers) = &r.answers {
                    let text = format!(
                        "[Answers to the questions you asked before the service restarted (request {}); your earlier turn ended with the restart, so continue from here.]\n{}",
                        row.request_id,
                        shape::answered_text(&questions, answers, true)
                    );
                    let _ = me.late.send(LateAnswer {
                        session_id: session.id.clone(),
                        text,
                    });
                }
            });
        }
        self.log.flush().await.map_err(Error::Internal)?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "question_tests.rs"]
mod tests;
