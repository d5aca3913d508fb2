//! Session events and their single writer (DESIGN.md §6 "Durability rule").
//!
//! Every `session.event` goes through [`EventLog`]: a dedicated writer thread assigns the
//! next contiguous per-session `seq` (from 1), inserts the row, commits, and only then
//! publishes the `session.event` notification on the [`BusHub`]. Operations queued while a
//! transaction is being written are committed together in the next one (group commit), so
//! a turn streaming thousands of deltas costs a handful of transactions, not one each.
//!
//! The queue is FIFO, so events keep the order they were emitted in, and other writes
//! ([`EventLog::write`]) and plain notifications ([`EventLog::notify`]) queued behind an
//! event are committed/published after it.
//!
//! [`EventLog`] is the component that owns the `events` and `turns` tables: it writes them
//! (the `turns` rows follow the `turn.*` events) and answers the reads of them
//! ([`EventLog::after`], [`EventLog::last_seq`], [`EventLog::of_kinds`]) on the read
//! connection's thread.
//!
//! Every event and notification is typed (issue 13 §2): an event is queued as its generated
//! payload message ([`SessionEventPayload`], e.g. `pb::TurnDoneEvent`) and a notification as
//! its generated params message ([`Notification`]), so a misspelt or missing field is a
//! compile error; the `session.event` envelope is a `pb::SessionEventNotification`. Only
//! fields the schema declares free-form (a tool call's `args`, a result's `meta`) are
//! handed over as JSON ([`FreeForm`]).
//!
//! **Model-only fields** (issue 32 item 3): what only the model may see — a prompt as the
//! model was given it, with resolved `@` references, attached files and the rendered page —
//! is stored beside its event (column `events.model_only`, a JSON object; migration 10) with
//! [`EventLog::event_to_with_model_only`]. It is never published and never returned by
//! `session.resume` ([`EventLog::after`]); only the service's own reads ([`EventLog::of_kinds`],
//! which rebuilds the model's history) see it, merged into the payload.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;
use serde_json::Value;
use snowpea_common::bus::BusHub;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::typed::{FreeForm, Notification, SessionEventPayload};
use tokio::sync::{mpsc, oneshot};

use crate::session::Session;
use crate::store::{self, Store};

/// Most operations committed in one transaction.
const MAX_BATCH: usize = 4096;

/// One event of a session's stream as the log holds it: a `pb::SessionEvent` whose payload
/// is kept as the JSON it was written as (a `Struct` would turn its numbers into `f64`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    /// Session the event belongs to.
    pub session_id: String,
    /// Contiguous per-session sequence number, from 1.
    pub seq: i64,
    /// Kind, e.g. `turn.started`.
    pub kind: String,
    /// Kind-specific body (a JSON object).
    pub payload: Value,
    /// UTC ISO-8601 time.
    pub ts: String,
}

impl SessionEvent {
    /// The event as `session.resume` returns it.
    pub fn to_proto(&self) -> pb::SessionEvent {
        pb::SessionEvent {
            kind: self.kind.clone(),
            // Its JSON text, so the payload's numbers (integers past 2^53 too) come back exactly.
            payload: self.payload.to_string(),
            seq: self.seq,
            session_id: self.session_id.clone(),
            ts: self.ts.clone(),
        }
    }

    /// The params of its `session.event` notification (the payload verbatim).
    pub fn notification(&self, host_tools_from: Option<String>) -> Value {
        pb::SessionEventNotification {
            host_tools_from,
            kind: self.kind.clone(),
            payload: None,
            seq: self.seq,
            session_id: self.session_id.clone(),
            ts: self.ts.clone(),
        }
        .to_params_with(&[("/payload", self.payload.clone())])
    }

    /// From a stored row (an unreadable payload becomes `{}`).
    pub fn from_row(row: store::events::EventRow) -> Self {
        SessionEvent {
            payload: serde_json::from_str(&row.payload)
                .unwrap_or_else(|_| Value::Object(Default::default())),
            session_id: row.session_id,
            seq: row.seq,
            kind: row.kind,
            ts: row.ts,
        }
    }
}

/// A write run by the writer inside its transaction (in a savepoint of its own).
pub type WriteFn = Box<dyn FnOnce(&Connection) -> rusqlite::Result<()> + Send>;

enum Op {
    Event {
        session_id: String,
        kind: &'static str,
        payload: Value,
        /// Model-only fields (module doc): stored, never published.
        model_only: Option<Value>,
        host_tools_from: Option<String>,
        done: Option<oneshot::Sender<Result<SessionEvent, String>>>,
    },
    Write {
        f: WriteFn,
        done: Option<oneshot::Sender<Result<(), String>>>,
    },
    Notify {
        method: &'static str,
        params: Value,
    },
}

/// Handle to the single writer. Cheap to clone; the writer thread ends when every handle
/// is dropped (after writing what was queued).
#[derive(Debug, Clone)]
pub struct EventLog {
    tx: mpsc::UnboundedSender<Op>,
    store: Store,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Event { kind, .. } => write!(f, "Event({kind})"),
            Op::Write { .. } => write!(f, "Write"),
            Op::Notify { method, .. } => write!(f, "Notify({method})"),
        }
    }
}

impl EventLog {
    /// Opens a writer connection to the database at `path` and starts the writer thread,
    /// publishing on `hub`; reads go through `store`.
    pub fn start(path: &Path, hub: Arc<BusHub>, store: Store) -> anyhow::Result<EventLog> {
        let conn = store::open(path)?;
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("session-event-writer".into())
            .spawn(move || writer(conn, rx, hub))?;
        Ok(EventLog { tx, store })
    }

    /// The committed events of `session_id` with `seq > after_seq`, in seq order.
    pub async fn after(
        &self,
        session_id: &str,
        after_seq: i64,
    ) -> snowpea_session_error::Result<Vec<SessionEvent>> {
        let sid = session_id.to_owned();
        let rows = self
            .store
            .read("events.after", move |c| {
                store::events::after(c, &sid, after_seq)
            })
            .await?;
        Ok(rows.into_iter().map(SessionEvent::from_row).collect())
    }

    /// The last committed seq of `session_id` (0 before its first event).
    pub async fn last_seq(&self, session_id: &str) -> snowpea_session_error::Result<i64> {
        let sid = session_id.to_owned();
        self.store
            .read("events.last_seq", move |c| store::events::last_seq(c, &sid))
            .await
    }

    /// `(kind, payload)` of the committed events of `kinds`, in seq order (an unreadable
    /// payload becomes `null`), each payload with its model-only fields merged in (module
    /// doc): for the service's own reads, never for a client.
    pub async fn of_kinds(
        &self,
        session_id: &str,
        kinds: &'static [&'static str],
    ) -> snowpea_session_error::Result<Vec<(String, Value)>> {
        let sid = session_id.to_owned();
        let rows = self
            .store
            .read("events.of_kinds", move |c| {
                store::events::of_kinds(c, &sid, kinds)
            })
            .await?;
        Ok(rows
            .into_iter()
            .map(|(k, p, model_only)| {
                let mut payload = serde_json::from_str(&p).unwrap_or(Value::Null);
                let extra = model_only.and_then(|m| serde_json::from_str::<Value>(&m).ok());
                if let (Some(to), Some(Value::Object(from))) = (payload.as_object_mut(), extra) {
                    to.extend(from);
                }
                (k, payload)
            })
            .collect())
    }

    /// Queues a typed event of `session` (published with its `hostToolsFrom`): `payload` is
    /// the generated payload message of the kind `E::KIND`. Committed, then published, in
    /// emission order; does not wait.
    pub fn event_to<E: SessionEventPayload>(&self, session: &Session, payload: &E) {
        self.event(&session.id, session.host_tools_from(), payload, &[]);
    }

    /// [`EventLog::event_to`] with the free-form fields of `free` written verbatim (e.g.
    /// `("/args", call.arguments)`).
    pub fn event_to_with<E: SessionEventPayload>(
        &self,
        session: &Session,
        payload: &E,
        free: FreeForm<'_>,
    ) {
        self.event(&session.id, session.host_tools_from(), payload, free);
    }

    /// [`EventLog::event_to`] with model-only fields (module doc): `model_only` (a JSON
    /// object, e.g. `{"input": …}`) is stored beside the event and never published.
    pub fn event_to_with_model_only<E: SessionEventPayload>(
        &self,
        session: &Session,
        payload: &E,
        model_only: Value,
    ) {
        self.send(Op::Event {
            session_id: session.id.clone(),
            kind: E::KIND,
            payload: payload.to_payload(),
            model_only: Some(model_only),
            host_tools_from: session.host_tools_from(),
            done: None,
        });
    }

    /// [`EventLog::event_to`], waiting until the event is committed (and published).
    pub async fn event_to_committed<E: SessionEventPayload>(
        &self,
        session: &Session,
        payload: &E,
    ) -> anyhow::Result<SessionEvent> {
        self.event_committed(&session.id, session.host_tools_from(), payload)
            .await
    }

    fn send(&self, op: Op) {
        if self.tx.send(op).is_err() {
            tracing::error!("event writer is gone; operation dropped");
        }
    }

    /// Queues a typed event of the session `session_id` (for callers without its
    /// [`Session`]: recovery, background work), published with `host_tools_from`; the
    /// free-form fields of `free` are written verbatim. Does not wait.
    pub fn event<E: SessionEventPayload>(
        &self,
        session_id: &str,
        host_tools_from: Option<String>,
        payload: &E,
        free: FreeForm<'_>,
    ) {
        self.send(Op::Event {
            session_id: session_id.to_owned(),
            kind: E::KIND,
            payload: payload.to_payload_with(free),
            model_only: None,
            host_tools_from,
            done: None,
        });
    }

    /// [`EventLog::event`] (without free-form fields), waiting until the event is
    /// committed (and published).
    pub async fn event_committed<E: SessionEventPayload>(
        &self,
        session_id: &str,
        host_tools_from: Option<String>,
        payload: &E,
    ) -> anyhow::Result<SessionEvent> {
        let (done, rx) = oneshot::channel();
        self.send(Op::Event {
            session_id: session_id.to_owned(),
            kind: E::KIND,
            payload: payload.to_payload(),
            model_only: None,
            host_tools_from,
            done: Some(done),
        });
        match rx.await {
            Ok(Ok(e)) => Ok(e),
            Ok(Err(e)) => Err(anyhow::anyhow!("event not written: {e}")),
            Err(_) => Err(anyhow::anyhow!("event writer is gone")),
        }
    }

    /// Runs `f` in the writer's next transaction and waits for the commit.
    pub async fn write(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let (done, rx) = oneshot::channel();
        self.send(Op::Write {
            f: Box::new(f),
            done: Some(done),
        });
        match rx.await {
            Ok(r) => r.map_err(|e| anyhow::anyhow!("write failed: {e}")),
            Err(_) => Err(anyhow::anyhow!("event writer is gone")),
        }
    }

    /// Queues `f` for the writer's next transaction without waiting.
    pub fn write_later(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    ) {
        self.send(Op::Write {
            f: Box::new(f),
            done: None,
        });
    }

    /// Publishes a typed notification (`params` is the generated params message of
    /// `N::METHOD`) once everything queued before it is committed.
    pub fn publish<N: Notification>(&self, params: &N) {
        self.publish_with(params, &[]);
    }

    /// [`EventLog::publish`] with the free-form fields of `free` written verbatim (e.g.
    /// `("/request/args", args)`).
    pub fn publish_with<N: Notification>(&self, params: &N, free: FreeForm<'_>) {
        self.send(Op::Notify {
            method: N::METHOD,
            params: params.to_params_with(free),
        });
    }

    /// Waits until everything queued so far is committed and published.
    pub async fn flush(&self) -> anyhow::Result<()> {
        self.write(|_| Ok(())).await
    }
}

enum Outcome {
    Event(
        SessionEvent,
        Option<String>,
        Option<oneshot::Sender<Result<SessionEvent, String>>>,
    ),
    EventFailed(
        String,
        Option<oneshot::Sender<Result<SessionEvent, String>>>,
    ),
    Write(
        Result<(), String>,
        Option<oneshot::Sender<Result<(), String>>>,
    ),
    Notify(&'static str, Value),
}

fn writer(mut conn: Connection, mut rx: mpsc::UnboundedReceiver<Op>, hub: Arc<BusHub>) {
    let mut seqs: HashMap<String, i64> = HashMap::new();
    while let Some(first) = rx.blocking_recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        write_batch(&mut conn, &mut seqs, batch, &hub);
    }
    tracing::debug!("event writer stopped");
}

fn write_batch(
    conn: &mut Connection,
    seqs: &mut HashMap<String, i64>,
    batch: Vec<Op>,
    hub: &BusHub,
) {
    let mut tx = match conn.transaction() {
        Ok(tx) => tx,
        Err(e) => {
            tracing::error!(error = %e, "cannot begin a transaction; batch dropped");
            fail_all(batch, &e.to_string());
            return;
        }
    };
    let mut outcomes = Vec::with_capacity(batch.len());
    for op in batch {
        match op {
            Op::Event {
                session_id,
                kind,
                payload,
                model_only,
                host_tools_from,
                done,
            } => match insert_event(&tx, seqs, &session_id, kind, payload, model_only) {
                Ok(event) => outcomes.push(Outcome::Event(event, host_tools_from, done)),
                Err(e) => {
                    tracing::error!(error = %e, session_id, kind, "event not written");
                    outcomes.push(Outcome::EventFailed(e.to_string(), done));
                }
            },
            Op::Write { f, done } => {
                let result = match tx.savepoint() {
                    Ok(sp) => match f(&sp) {
                        Ok(()) => sp.commit().map_err(|e| e.to_string()),
                        Err(e) => Err(e.to_string()),
                    },
                    Err(e) => Err(e.to_string()),
                };
                if let Err(e) = &result {
                    tracing::error!(error = %e, "write failed");
                }
                outcomes.push(Outcome::Write(result, done));
            }
            Op::Notify { method, params } => outcomes.push(Outcome::Notify(method, params)),
        }
    }
    if let Err(e) = tx.commit() {
        tracing::error!(error = %e, "commit failed; nothing of this batch was published");
        // Seqs handed out in this batch were not persisted: re-read them next time.
        seqs.clear();
        let msg = e.to_string();
        for o in outcomes {
            match o {
                Outcome::Event(_, _, Some(done)) | Outcome::EventFailed(_, Some(done)) => {
                    let _ = done.send(Err(msg.clone()));
                }
                Outcome::Write(_, Some(done)) => {
                    let _ = done.send(Err(msg.clone()));
                }
                _ => {}
            }
        }
        return;
    }
    for o in outcomes {
        match o {
            Outcome::Event(event, host_tools_from, done) => {
                let params = event.notification(host_tools_from);
                hub.notify_json(
                    pb::SessionEventNotification::METHOD,
                    params.to_string(),
                    vec![],
                );
                if let Some(done) = done {
                    let _ = done.send(Ok(event));
                }
            }
            Outcome::EventFailed(e, done) => {
                if let Some(done) = done {
                    let _ = done.send(Err(e));
                }
            }
            Outcome::Write(result, done) => {
                if let Some(done) = done {
                    let _ = done.send(result);
                }
            }
            Outcome::Notify(method, params) => hub.notify_json(method, params.to_string(), vec![]),
        }
    }
}

fn insert_event(
    conn: &Connection,
    seqs: &mut HashMap<String, i64>,
    session_id: &str,
    kind: &str,
    payload: Value,
    model_only: Option<Value>,
) -> rusqlite::Result<SessionEvent> {
    let last = match seqs.get(session_id) {
        Some(s) => *s,
        None => store::events::last_seq(conn, session_id)?,
    };
    let seq = last + 1;
    if let Some(turn_id) = payload.get("turnId").and_then(Value::as_str) {
        store::turns::track(conn, session_id, kind, turn_id)?;
    }
    let ts = snowpea_common::time::now_iso();
    store::events::insert(
        conn,
        &store::events::EventRow {
            session_id: session_id.to_owned(),
            seq,
            kind: kind.to_owned(),
            payload: payload.to_string(),
            ts: ts.clone(),
        },
    )?;
    if let Some(m) = model_only {
        store::events::set_model_only(conn, session_id, seq, &m.to_string())?;
    }
    seqs.insert(session_id.to_owned(), seq);
    Ok(SessionEvent {
        session_id: session_id.to_owned(),
        seq,
        kind: kind.to_owned(),
        payload,
        ts,
    })
}

fn fail_all(batch: Vec<Op>, msg: &str) {
    for op in batch {
        match op {
            Op::Event {
                done: Some(done), ..
            } => {
                let _ = done.send(Err(msg.to_owned()));
            }
            Op::Write {
                done: Some(done), ..
            } => {
                let _ = done.send(Err(msg.to_owned()));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
