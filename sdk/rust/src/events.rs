//! What the daemon pushes: [`Notification`]s, the typed [`SessionEvent`], and
//! [`SessionEvents`], one session's events in seq order with a turn collector.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::client::Inner;
use crate::Error;

/// A JSON-RPC notification from the daemon (`session.event`, `sessions.changed`,
/// `approval.pending`, …). Session events replayed by a resume after a reconnect are delivered
/// as `session.event` notifications too.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The notification's method, e.g. `"session.event"`.
    pub method: String,
    /// Its params (`Value::Null` when absent).
    pub params: Value,
}

impl Notification {
    /// The session event this notification carries, when it is a well-formed `session.event`.
    pub fn session_event(&self) -> Option<SessionEvent> {
        if self.method != "session.event" {
            return None;
        }
        SessionEvent::from_value(&self.params)
    }
}

/// One `session.event` (protocol § session.event): `{sessionId, seq, kind, payload, ts}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEvent {
    /// Session the event belongs to.
    pub session_id: String,
    /// Contiguous per-session sequence number, starting at 1.
    pub seq: u64,
    /// Event kind, e.g. `"message.delta"`, `"turn.done"`.
    pub kind: String,
    /// Kind-specific body (an empty object when absent).
    #[serde(default = "empty_object")]
    pub payload: Value,
    /// UTC ISO-8601 timestamp.
    #[serde(default)]
    pub ts: String,
}

fn empty_object() -> Value {
    json!({})
}

impl SessionEvent {
    /// Parses an event object; `None` (logged) when it lacks `sessionId`, `seq` or `kind`.
    pub fn from_value(value: &Value) -> Option<Self> {
        match SessionEvent::deserialize(value) {
            Ok(event) => Some(event),
            Err(error) => {
                tracing::warn!(%error, "malformed session event");
                None
            }
        }
    }

    /// The `turnId` of the event (from its payload), if it has one.
    pub fn turn_id(&self) -> Option<&str> {
        self.payload.get("turnId").and_then(Value::as_str)
    }
}

/// The events of one turn, as collected by [`SessionEvents::wait_for_turn_done`].
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The turn that ended.
    pub turn_id: String,
    /// `turn.done`'s `reason` (`complete`, `interrupted`, `error`, `denied`, …), if given.
    pub reason: Option<String>,
    /// Every event of the session from the subscription up to and including this turn's
    /// `turn.done`, in seq order (it includes other turns' events when the prompt was queued).
    pub events: Vec<SessionEvent>,
}

impl TurnOutcome {
    /// The concatenated `text` of the turn's `message.delta` events.
    pub fn text(&self) -> String {
        self.events
            .iter()
            .filter(|e| e.kind == "message.delta" && e.turn_id().is_none_or(|t| t == self.turn_id))
            .filter_map(|e| e.payload.get("text").and_then(Value::as_str))
            .collect()
    }
}

/// One session's events, in seq order, each once; made by [`crate::Client::events`].
///
/// It is a filtered [`crate::Client::subscribe`] receiver started at the moment it was made, so
/// take it *before* sending the prompt whose events you want. If it falls behind the broadcast
/// buffer it recovers the missed events with `session.resume` rather than losing them.
pub struct SessionEvents {
    inner: Arc<Inner>,
    session_id: String,
    rx: broadcast::Receiver<Notification>,
    last_seq: Option<u64>,
    backlog: VecDeque<SessionEvent>,
}

impl SessionEvents {
    pub(crate) fn new(
        inner: Arc<Inner>,
        session_id: String,
        rx: broadcast::Receiver<Notification>,
        last_seq: Option<u64>,
    ) -> Self {
        SessionEvents {
            inner,
            session_id,
            rx,
            last_seq,
            backlog: VecDeque::new(),
        }
    }

    /// The session these events belong to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Highest seq returned so far (or already delivered when this was made).
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// The next event, waiting at most `timeout`. [`Error::Timeout`] when none came,
    /// [`Error::Closed`] when the client closed.
    pub async fn next(&mut self, timeout: Duration) -> Result<SessionEvent, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(event) = self.backlog.pop_front() {
                if self.accept(&event) {
                    return Ok(event);
                }
                continue;
            }
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Err(_) => return Err(Error::Timeout),
                Ok(Err(broadcast::error::RecvError::Closed)) => return Err(Error::Closed),
                Ok(Err(broadcast::error::RecvError::Lagged(missed))) => {
                    tracing::warn!(session_id = %self.session_id, missed, "subscriber lagged; resuming");
                    let after = self.last_seq.unwrap_or(0);
                    let params = json!({ "sessionId": self.session_id, "afterSeq": after });
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    let result = self
                        .inner
                        .request("session.resume", params, remaining)
                        .await?;
                    let events = result.get("events").and_then(Value::as_array);
                    self.backlog.extend(
                        events
                            .into_iter()
                            .flatten()
                            .filter_map(SessionEvent::from_value),
                    );
                }
                Ok(Ok(notification)) => {
                    if notification.method != "session.event"
                        || notification.params.get("sessionId").and_then(Value::as_str)
                            != Some(self.session_id.as_str())
                    {
                        continue;
                    }
                    if let Some(event) = notification.session_event() {
                        if self.accept(&event) {
                            return Ok(event);
                        }
                    }
                }
            }
        }
    }

    /// Collects events until `turn.done` for `turn_id`, waiting at most `timeout` in total.
    pub async fn wait_for_turn_done(
        &mut self,
        turn_id: &str,
        timeout: Duration,
    ) -> Result<TurnOutcome, Error> {
        let deadline = Instant::now() + timeout;
        let mut events = Vec::new();
        loop {
            let event = self
                .next(deadline.saturating_duration_since(Instant::now()))
                .await?;
            let done = event.kind == "turn.done" && event.turn_id() == Some(turn_id);
            let reason = done
                .then(|| {
                    event
                        .payload
                        .get("reason")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .flatten();
            events.push(event);
            if done {
                return Ok(TurnOutcome {
                    turn_id: turn_id.to_owned(),
                    reason,
                    events,
                });
            }
        }
    }

    /// True (and remembered) when `event` is newer than everything returned so far.
    fn accept(&mut self, event: &SessionEvent) -> bool {
        if self.last_seq.is_some_and(|last| event.seq <= last) {
            return false;
        }
        self.last_seq = Some(event.seq);
        true
    }
}
