//! [`Client`]: calls, notifications, server→client request handlers and the thin session helpers.
//! The shared state both the caller and the connection task see lives in [`Inner`].

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::connection;
use crate::events::{Notification, SessionEvent, SessionEvents, TurnOutcome};
use crate::sequencer::{event_seq, Sequencer};
use crate::{ConnectOptions, Error, RpcError};

/// A handler for one server→client request method (`approval.request`, `question.request`,
/// `tool.invoke`): it gets the request's params and returns its result, or an error the client
/// sends back as the JSON-RPC error.
pub type RequestHandler =
    Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, RpcError>> + Send + Sync>;

/// Where the connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Connected and past `system.hello`.
    Connected,
    /// The connection dropped; the client is reconnecting (calls wait for it).
    Reconnecting,
    /// Closed for good: [`Client::close`], a drop without a reconnect policy, or reconnect
    /// attempts exhausted.
    Closed,
}

/// The connection as the callers see it.
#[derive(Debug, Clone)]
pub(crate) struct ConnSlot {
    pub state: ConnectionState,
    /// Outbound frames of the live connection; `None` unless connected.
    pub tx: Option<mpsc::UnboundedSender<Message>>,
    /// Number of successful connects so far.
    pub generation: u64,
}

/// State shared by the [`Client`] handle and its connection task.
pub(crate) struct Inner {
    pub opts: ConnectOptions,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, Error>>>>,
    pub conn: watch::Sender<ConnSlot>,
    handlers: RwLock<HashMap<String, RequestHandler>>,
    sequencer: Mutex<Sequencer>,
    notifications: Mutex<Option<broadcast::Sender<Notification>>>,
    hello: Mutex<Value>,
    pub cancel: CancellationToken,
}

/// Locks a mutex, recovering from poisoning (a panicking holder cannot leave these maps in a
/// state worse than "one entry missing").
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    fn new(opts: ConnectOptions, hello: Value) -> Self {
        let (notify_tx, _) = broadcast::channel(opts.notification_buffer.max(1));
        let (conn, _) = watch::channel(ConnSlot {
            state: ConnectionState::Reconnecting,
            tx: None,
            generation: 0,
        });
        Inner {
            opts,
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            conn,
            handlers: RwLock::new(HashMap::new()),
            sequencer: Mutex::new(Sequencer::default()),
            notifications: Mutex::new(Some(notify_tx)),
            hello: Mutex::new(hello),
            cancel: CancellationToken::new(),
        }
    }

    /// Publishes a new live connection.
    pub fn set_connected(&self, tx: mpsc::UnboundedSender<Message>, hello: Value) {
        *lock(&self.hello) = hello;
        self.conn.send_modify(|c| {
            c.state = ConnectionState::Connected;
            c.tx = Some(tx);
            c.generation += 1;
        });
    }

    /// Marks the connection gone, then fails every call waiting on it with [`Error::Closed`].
    /// The caller must have dropped the connection's outbound receiver first, so a call that
    /// registers after the drain fails on send instead of waiting forever.
    pub fn connection_lost(&self, next: ConnectionState) {
        self.conn.send_modify(|c| {
            c.state = next;
            c.tx = None;
        });
        lock(&self.sequencer).reset_fills();
        let pending = std::mem::take(&mut *lock(&self.pending));
        for (_, waiter) in pending {
            let _ = waiter.send(Err(Error::Closed));
        }
    }

    /// Closes for good: no more calls, subscribers see the end of their streams.
    pub fn finish(&self) {
        self.connection_lost(ConnectionState::Closed);
        lock(&self.notifications).take();
    }

    /// Hands the answer of call `id` to its waiter; false when nobody waits for it.
    pub fn complete(&self, id: u64, outcome: Result<Value, Error>) -> bool {
        match lock(&self.pending).remove(&id) {
            Some(waiter) => waiter.send(outcome).is_ok(),
            None => false,
        }
    }

    /// The handler for a server→client request method.
    pub fn handler(&self, method: &str) -> Option<RequestHandler> {
        self.handlers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(method)
            .cloned()
    }

    /// Broadcasts a notification (never blocks; see [`Client::subscribe`] on lag).
    fn publish(&self, notification: Notification) {
        if let Some(tx) = lock(&self.notifications).as_ref() {
            let _ = tx.send(notification);
        }
    }

    fn publish_events(&self, events: Vec<Value>) {
        for params in events {
            self.publish(Notification {
                method: "session.event".into(),
                params,
            });
        }
    }

    /// Dispatches a notification from the wire; `session.event` goes through the sequencer.
    /// Returns `Some((sessionId, afterSeq))` when a gap must be filled.
    pub fn on_notification(&self, method: String, params: Value) -> Option<(String, u64)> {
        if method != "session.event" {
            self.publish(Notification { method, params });
            return None;
        }
        let session_id = params
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let (Some(session_id), Some(seq)) = (session_id, event_seq(&params)) else {
            tracing::warn!("session.event without sessionId or seq; delivered unsequenced");
            self.publish(Notification { method, params });
            return None;
        };
        let mut sequencer = lock(&self.sequencer);
        let outcome = sequencer.on_live(&session_id, seq, params);
        self.publish_events(outcome.deliver);
        outcome.fill_after.map(|after| (session_id, after))
    }

    /// Marks every tracked session as resuming; returns the resumes to make.
    pub fn begin_resume_all(&self) -> Vec<(String, u64)> {
        lock(&self.sequencer).begin_resume_all()
    }

    /// Applies the answer of a resume the client made itself (gap fill or reconnect).
    pub fn on_fill(&self, session_id: &str, result: Result<Value, Error>) {
        let events = match result {
            Ok(result) => Some(
                result
                    .get("events")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            ),
            Err(error) => {
                tracing::warn!(session_id, %error, "session.resume failed");
                if error.code_str() == Some("not_found") {
                    lock(&self.sequencer).untrack(session_id);
                }
                None
            }
        };
        let mut sequencer = lock(&self.sequencer);
        let deliver = sequencer.on_fill(session_id, events);
        self.publish_events(deliver);
    }

    /// Waits until connected (or closed), returning the live connection's sender. A sender
    /// whose connection already ended counts as "not yet reconnected": the state flips right
    /// after the connection task notices, and the call should wait for the next connection
    /// rather than fail.
    async fn connected(&self) -> Result<mpsc::UnboundedSender<Message>, Error> {
        let mut rx = self.conn.subscribe();
        let slot = rx
            .wait_for(|c| match c.state {
                ConnectionState::Connected => c.tx.as_ref().is_some_and(|tx| !tx.is_closed()),
                ConnectionState::Reconnecting => false,
                ConnectionState::Closed => true,
            })
            .await
            .map_err(|_| Error::Closed)?;
        match slot.state {
            ConnectionState::Connected => slot.tx.clone().ok_or(Error::Closed),
            ConnectionState::Reconnecting | ConnectionState::Closed => Err(Error::Closed),
        }
    }

    /// Sends a client notification, waiting for a connection within the call timeout.
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), Error> {
        let frame = json!({ "jsonrpc": "2.0", "method": method, "params": params }).to_string();
        tokio::time::timeout(self.opts.call_timeout, async {
            loop {
                let tx = self.connected().await?;
                // A send fails only when the connection ended just now: wait for the next one.
                if tx.send(Message::text(frame.clone())).is_ok() {
                    return Ok(());
                }
            }
        })
        .await
        .map_err(|_| Error::Timeout)?
    }

    /// Every notification from now on (see `Client::subscribe`).
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Notification> {
        match lock(&self.notifications).as_ref() {
            Some(tx) => tx.subscribe(),
            None => broadcast::channel(1).1,
        }
    }

    /// Sets the handler of a server→client request method.
    pub(crate) fn set_handler(&self, method: &str, handler: RequestHandler) {
        self.handlers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(method.to_owned(), handler);
    }

    /// A call with no tracking side effects: waits for a connection, then sends and waits for
    /// the answer, all within `timeout`. A request that could not even be sent (the connection
    /// ended just before) waits for the next connection; one that was sent fails with
    /// [`Error::Closed`] if its connection drops.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Error> {
        tokio::time::timeout(timeout, async {
            let frame = loop {
                let tx = self.connected().await?;
                if let Some(sent) = self.send_request(&tx, method, &params) {
                    break sent;
                }
            };
            frame.wait().await
        })
        .await
        .map_err(|_| Error::Timeout)?
    }

    /// Sends a request on one given connection and waits (unbounded: callers add the timeout).
    pub async fn request_on(
        &self,
        tx: &mpsc::UnboundedSender<Message>,
        method: &str,
        params: Value,
    ) -> Result<Value, Error> {
        match self.send_request(tx, method, &params) {
            Some(sent) => sent.wait().await,
            None => Err(Error::Closed),
        }
    }

    /// Registers a pending call and sends it; `None` when the connection is gone.
    fn send_request(
        &self,
        tx: &mpsc::UnboundedSender<Message>,
        method: &str,
        params: &Value,
    ) -> Option<SentRequest<'_>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (waiter, answer) = oneshot::channel();
        lock(&self.pending).insert(id, waiter);
        let guard = PendingGuard { inner: self, id };
        let frame = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        tx.send(Message::text(frame.to_string())).ok()?;
        Some(SentRequest {
            _guard: guard,
            answer,
        })
    }
}

/// A request on the wire, waiting for its answer.
struct SentRequest<'a> {
    _guard: PendingGuard<'a>,
    answer: oneshot::Receiver<Result<Value, Error>>,
}

impl SentRequest<'_> {
    async fn wait(self) -> Result<Value, Error> {
        let SentRequest { _guard, answer } = self;
        answer.await.map_err(|_| Error::Closed)?
    }
}

/// Removes a pending call on every exit path (answer, timeout, cancellation).
struct PendingGuard<'a> {
    inner: &'a Inner,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.inner.pending).remove(&self.id);
    }
}

/// A connection to the Snowpea daemon.
///
/// All methods take `&self`; share a client between tasks with `Arc<Client>`. Dropping the
/// client stops its connection task (like [`Client::close`], without waiting).
pub struct Client {
    inner: Arc<Inner>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.inner.opts.ws_url())
            .field("state", &self.connection_state())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Opens the WebSocket and performs `system.hello` (bounded by `opts.connect_timeout`).
    ///
    /// A refused hello is [`Error::Rpc`] (e.g. `code_str() == Some("unauthorized")` or
    /// `"protocol_incompatible"`); an unreachable daemon is [`Error::Connect`]. On error nothing
    /// keeps running. Reconnecting only applies to connections that were up.
    pub async fn connect(opts: ConnectOptions) -> Result<Client, Error> {
        let (ws, hello) = connection::open(&opts).await?;
        let inner = Arc::new(Inner::new(opts, hello.clone()));
        let (tx, rx) = mpsc::unbounded_channel();
        inner.set_connected(tx, hello);
        let task = tokio::spawn(connection::run(inner.clone(), ws, rx));
        Ok(Client {
            inner,
            task: Mutex::new(Some(task)),
        })
    }

    /// The result of the latest successful `system.hello` (`{protocolVersion, serverVersion,
    /// capabilities}`).
    pub fn hello(&self) -> Value {
        lock(&self.inner.hello).clone()
    }

    /// True when the latest `system.hello` advertised `capability`.
    pub fn has_capability(&self, capability: &str) -> bool {
        lock(&self.inner.hello)
            .get("capabilities")
            .and_then(Value::as_array)
            .is_some_and(|caps| caps.iter().any(|c| c.as_str() == Some(capability)))
    }

    /// Where the connection is now.
    pub fn connection_state(&self) -> ConnectionState {
        self.inner.conn.borrow().state
    }

    /// How many times a connection was established (1 after connect, +1 per reconnect).
    pub fn generation(&self) -> u64 {
        self.inner.conn.borrow().generation
    }

    /// The options this client was made with.
    pub fn options(&self) -> &ConnectOptions {
        &self.inner.opts
    }

    /// Calls `method` with the default timeout ([`ConnectOptions::call_timeout`]).
    ///
    /// Calls run concurrently on the one connection. While reconnecting, a call waits for the
    /// connection within its timeout; a call in flight when the connection drops fails with
    /// [`Error::Closed`]. `session.create`, `session.prompt`, `session.attach` and
    /// `session.resume` track their session (see [`Client::track`]); `session.close` untracks.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, Error> {
        self.call_with_timeout(method, params, self.inner.opts.call_timeout)
            .await
    }

    /// [`Client::call`] with an explicit timeout.
    pub async fn call_with_timeout(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Error> {
        let session_id = params
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let after_seq = params.get("afterSeq").and_then(Value::as_u64).unwrap_or(0);
        if let (Some(sid), "session.prompt" | "session.attach") = (&session_id, method) {
            self.track(sid, None);
        }
        let result = self.inner.request(method, params, timeout).await?;
        match (method, &session_id) {
            ("session.create", _) => {
                if let Some(sid) = result.get("sessionId").and_then(Value::as_str) {
                    self.track(sid, Some(0));
                }
            }
            ("session.resume", Some(sid)) => {
                let events = result.get("events").and_then(Value::as_array);
                let events = events.map(Vec::as_slice).unwrap_or_default();
                let mut sequencer = lock(&self.inner.sequencer);
                let deliver = sequencer.on_caller_resume(sid, after_seq, events);
                self.inner.publish_events(deliver);
            }
            ("session.close", Some(sid)) => lock(&self.inner.sequencer).untrack(sid),
            _ => {}
        }
        Ok(result)
    }

    /// Sends a client notification (no answer). Waits for a connection like a call, within
    /// [`ConnectOptions::call_timeout`].
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), Error> {
        self.inner.notify(method, params).await
    }

    /// The shared state, for helpers that run their own tasks ([`Client::register_tools`]).
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Every notification from now on, `session.event`s deduplicated and in seq order per
    /// session (replays after a reconnect included).
    ///
    /// The channel is a bounded broadcast ([`ConnectOptions::notification_buffer`]): the reader
    /// never waits for a subscriber. A subscriber that falls more than the buffer behind gets
    /// `RecvError::Lagged(n)` and has lost the `n` oldest notifications; session events can be
    /// recovered with [`Client::resume`] ([`Client::events`] does that by itself). After the
    /// client closes, receivers drain what is buffered and then get `RecvError::Closed`.
    pub fn subscribe(&self) -> broadcast::Receiver<Notification> {
        match lock(&self.inner.notifications).as_ref() {
            Some(tx) => tx.subscribe(),
            None => broadcast::channel(1).1,
        }
    }

    /// The events of one session from now on, in seq order, each once, recovering from lag.
    /// Take it before the call that causes the events (or use [`Client::prompt_and_collect`]).
    pub fn events(&self, session_id: &str) -> SessionEvents {
        // Under the sequencer lock, so no event is delivered between the two reads.
        let sequencer = lock(&self.inner.sequencer);
        let rx = self.subscribe();
        let last = sequencer.delivered(session_id);
        drop(sequencer);
        SessionEvents::new(self.inner.clone(), session_id.to_owned(), rx, last)
    }

    /// Registers the handler for a server→client request method, replacing any earlier one.
    /// Requests without a handler are answered `method_not_found`. Handlers run on their own
    /// tasks (a slow handler does not block the connection), survive reconnects, and a request
    /// in progress when its connection drops is abandoned (the daemon sees "connection gone").
    pub fn on_request<F, Fut>(&self, method: &str, handler: F)
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, RpcError>> + Send + 'static,
    {
        let handler: RequestHandler = Arc::new(move |params| Box::pin(handler(params)));
        self.inner
            .handlers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(method.to_owned(), handler);
    }

    /// Removes the handler for a server→client request method.
    pub fn remove_request_handler(&self, method: &str) {
        self.inner
            .handlers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(method);
    }

    /// Tracks a session: after a reconnect the client calls `session.resume` for it with the
    /// highest seq delivered, and live gaps in its events are filled. `after_seq` is the seq
    /// the caller has already seen; it only applies when the client knows nothing newer. With
    /// `None` and nothing known, the first event seen sets the baseline (and a reconnect before
    /// any event replays the session from the start).
    pub fn track(&self, session_id: &str, after_seq: Option<u64>) {
        lock(&self.inner.sequencer).track(session_id, after_seq);
    }

    /// Stops tracking a session.
    pub fn untrack(&self, session_id: &str) {
        lock(&self.inner.sequencer).untrack(session_id);
    }

    /// Highest seq of the session delivered to subscribers (or returned by `session.resume`).
    pub fn last_seq(&self, session_id: &str) -> Option<u64> {
        lock(&self.inner.sequencer).delivered(session_id)
    }

    /// `session.create {workdir, mode?}`; returns the new `sessionId` (tracked).
    pub async fn create_session(
        &self,
        workdir: &Path,
        mode: Option<&str>,
    ) -> Result<String, Error> {
        let mut params = json!({ "workdir": workdir.to_string_lossy() });
        if let Some(mode) = mode {
            params["mode"] = mode.into();
        }
        self.create_session_with(params).await
    }

    /// `session.create` with arbitrary params (e.g. `denyExec`); returns the `sessionId`.
    pub async fn create_session_with(&self, params: Value) -> Result<String, Error> {
        let result = self.call("session.create", params).await?;
        string_field(&result, "sessionId")
    }

    /// `session.prompt {sessionId, text}`; returns the `turnId`. To see the turn's events,
    /// take [`Client::events`] first or use [`Client::prompt_and_collect`].
    pub async fn prompt(&self, session_id: &str, text: &str) -> Result<String, Error> {
        let result = self
            .call(
                "session.prompt",
                json!({ "sessionId": session_id, "text": text }),
            )
            .await?;
        string_field(&result, "turnId")
    }

    /// Prompts and collects the session's events until that turn's `turn.done`, waiting at most
    /// `timeout` for the whole turn. The subscription is taken before the prompt is sent.
    pub async fn prompt_and_collect(
        &self,
        session_id: &str,
        text: &str,
        timeout: Duration,
    ) -> Result<TurnOutcome, Error> {
        let mut events = self.events(session_id);
        let turn_id = self.prompt(session_id, text).await?;
        events.wait_for_turn_done(&turn_id, timeout).await
    }

    /// `session.interrupt {sessionId}`.
    pub async fn interrupt(&self, session_id: &str) -> Result<(), Error> {
        self.call("session.interrupt", json!({ "sessionId": session_id }))
            .await?;
        Ok(())
    }

    /// `session.resume {sessionId, afterSeq}`; returns the events after `after_seq` in seq
    /// order. They go to the caller only (not re-broadcast) and count as delivered.
    pub async fn resume(
        &self,
        session_id: &str,
        after_seq: u64,
    ) -> Result<Vec<SessionEvent>, Error> {
        let params = json!({ "sessionId": session_id, "afterSeq": after_seq });
        let result = self.call("session.resume", params).await?;
        let events = result.get("events").and_then(Value::as_array);
        Ok(events
            .into_iter()
            .flatten()
            .filter_map(SessionEvent::from_value)
            .collect())
    }

    /// Closes the connection cleanly (WebSocket close handshake, bounded by
    /// `connect_timeout`) and stops the connection task. Calls waiting fail with
    /// [`Error::Closed`]; later calls too. Idempotent.
    pub async fn close(&self) {
        self.inner.cancel.cancel();
        let task = lock(&self.task).take();
        if let Some(mut task) = task {
            let grace = self.inner.opts.connect_timeout + Duration::from_secs(1);
            if tokio::time::timeout(grace, &mut task).await.is_err() {
                tracing::warn!("connection task did not stop in time; aborting it");
                task.abort();
            }
        }
        self.inner.finish();
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.inner.cancel.cancel();
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
        self.inner.finish();
    }
}

fn string_field(result: &Value, field: &str) -> Result<String, Error> {
    result
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Error::Protocol(format!("result has no string `{field}`: {result}")))
}
