//! The SDK glue: runs [`Effect`]s as protocol calls on the Rust SDK's [`Client`] and turns
//! everything the daemon sends (notifications, `approval.request` / `question.request`,
//! call replies, connection changes) into [`Msg`]s for the UI loop.
//!
//! Reconnecting is the SDK's ([`snowpea_sdk::ReconnectPolicy`]: backoff, re-reading
//! `daemon.json` so a restarted suite on a new port is found, `session.resume` of the
//! tracked session); this module reports the connection's state and generation so the UI
//! says so, re-attaches and resumes from its own last seq (duplicates are dropped by seq).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_sdk::{Client, ConnectionState, Error, RpcError};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::state::{CallError, Effect, Msg};

/// How often the connection state is looked at.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// How long a server→client request waits for the person when it has no `timeoutSec`.
const ANSWER_WAIT: Duration = Duration::from_secs(3600);

/// Pending server→client requests by `requestId`: the answer goes back through the handler.
type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

/// Runs effects and feeds messages.
pub struct Net {
    client: Arc<Client>,
    tx: mpsc::UnboundedSender<Msg>,
    pending: Pending,
}

/// How a failed call is shown: `not_implemented` / `method_not_found` make the feature
/// unavailable; anything else is a failure with the daemon's message.
pub fn classify(method: &str, error: &Error) -> CallError {
    let unavailable = matches!(
        error.code_str(),
        Some("not_implemented" | "method_not_found")
    ) || error
        .rpc()
        .is_some_and(|e| e.code == snowpea_sdk::METHOD_NOT_FOUND);
    if unavailable {
        CallError::Unavailable(method.to_owned())
    } else {
        CallError::Failed(error.to_string())
    }
}

impl Net {
    /// Subscribes to notifications, registers the request handlers and starts watching the
    /// connection; messages go to `tx`.
    pub fn start(client: Arc<Client>, tx: mpsc::UnboundedSender<Msg>) -> Net {
        let net = Net {
            client,
            tx,
            pending: Arc::default(),
        };
        net.pump_notifications();
        net.handle_requests("approval.request", Msg::ApprovalRequest, |id| {
            json!({ "decision": "deny", "reason": format!("no answer in snowpea chat for {id}") })
        });
        net.handle_requests(
            "question.request",
            Msg::QuestionRequest,
            |_| json!({ "answers": [] }),
        );
        net.watch_connection();
        net
    }

    fn pump_notifications(&self) {
        let mut rx = self.client.subscribe();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            loop {
                let msg = match rx.recv().await {
                    Ok(n) => match n.method.as_str() {
                        "session.event" => match n.session_event() {
                            Some(e) => Msg::Event(e),
                            None => continue,
                        },
                        "approval.resolved" => Msg::ApprovalResolved(n.params),
                        "question.resolved" => Msg::QuestionResolved(n.params),
                        "commands.changed" => Msg::CommandsChanged(n.params),
                        "sessions.changed" => Msg::SessionsChanged(n.params),
                        _ => continue,
                    },
                    Err(broadcast::error::RecvError::Lagged(_)) => Msg::Lagged,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
        });
    }

    /// Registers the handler of a server→client request: the UI gets the params, the
    /// handler waits (bounded by the request's `timeoutSec`) for [`Effect::Answer`].
    fn handle_requests(&self, method: &str, wrap: fn(Value) -> Msg, unanswered: fn(&str) -> Value) {
        let tx = self.tx.clone();
        let pending = self.pending.clone();
        self.client.on_request(method, move |params: Value| {
            let tx = tx.clone();
            let pending = pending.clone();
            async move {
                let id = params
                    .get("requestId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let wait = params
                    .get("timeoutSec")
                    .and_then(Value::as_f64)
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .map_or(ANSWER_WAIT, |s| {
                        Duration::from_secs_f64(s.min(86_400.0) + 5.0)
                    });
                let (answer_tx, answer_rx) = oneshot::channel();
                lock(&pending).insert(id.clone(), answer_tx);
                let _ = tx.send(wrap(params));
                let answer = tokio::time::timeout(wait, answer_rx).await;
                lock(&pending).remove(&id);
                match answer {
                    Ok(Ok(result)) => Ok::<Value, RpcError>(result),
                    _ => Ok(unanswered(&id)),
                }
            }
        });
    }

    fn watch_connection(&self) {
        let client = Arc::downgrade(&self.client);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut last = None;
            loop {
                let Some(client) = client.upgrade() else {
                    return;
                };
                let now = (client.connection_state(), client.generation());
                drop(client);
                if last != Some(now) {
                    last = Some(now);
                    let msg = Msg::Connection {
                        connected: now.0 == ConnectionState::Connected,
                        closed: now.0 == ConnectionState::Closed,
                        generation: now.1,
                    };
                    if tx.send(msg).is_err() {
                        return;
                    }
                }
                tokio::time::sleep(WATCH_EVERY).await;
            }
        });
    }

    /// Performs one effect (calls run on their own tasks). Returns false for [`Effect::Quit`].
    pub fn run(&self, effect: Effect) -> bool {
        match effect {
            Effect::Call {
                method,
                params,
                purpose,
            } => {
                let client = self.client.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let result = client
                        .call(method, params)
                        .await
                        .map_err(|e| classify(method, &e));
                    let _ = tx.send(Msg::Reply { purpose, result });
                });
            }
            Effect::Answer {
                request_id,
                result,
                fallback,
            } => {
                let held = lock(&self.pending).remove(&request_id);
                let unsent = match held {
                    Some(answer) => answer.send(result).err(),
                    None => Some(result),
                };
                if let Some(result) = unsent {
                    // The request is no longer held here (its connection dropped): answer
                    // it through the client→server method.
                    let mut params = result;
                    params["requestId"] = request_id.into();
                    let client = self.client.clone();
                    let tx = self.tx.clone();
                    tokio::spawn(async move {
                        let result = client
                            .call(fallback, params)
                            .await
                            .map_err(|e| classify(fallback, &e));
                        let _ = tx.send(Msg::Reply {
                            purpose: super::state::Purpose::Other(fallback.to_owned()),
                            result,
                        });
                    });
                }
            }
            Effect::Forget(id) => {
                lock(&self.pending).remove(&id);
            }
            Effect::Quit => return false,
        }
        true
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
