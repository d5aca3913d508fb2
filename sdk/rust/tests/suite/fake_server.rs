//! A tiny fake Snowpea gateway: JSON-RPC 2.0 over tokio-tungstenite on a listener bound by the
//! test. It answers `system.hello` (token check, `unavailable` while paused), echoes, sleeps,
//! never answers, fails on request, stores session events so `session.resume` works, plays a
//! short turn for `session.prompt`, sends server→client requests (`ask`) and notifications
//! (`push`), records `tool.register` calls, and can drop every connection abruptly.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use snowpea_sdk::{ConnectOptions, ReconnectPolicy};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

pub const TOKEN: &str = "secret-token";

/// The bound of every wait of these tests.
pub const T: Duration = Duration::from_secs(10);

/// Awaits `fut` for at most [`T`] (the test kit's `within`); a test that waits longer has
/// failed.
pub async fn within<F: Future>(fut: F) -> F::Output {
    snowpea_testkit::within(T, "a step of the test", fut).await
}

/// Fast reconnects for tests.
pub fn fast_reconnect() -> ReconnectPolicy {
    ReconnectPolicy {
        initial_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(100),
        ..ReconnectPolicy::default()
    }
}

struct Conn {
    tx: mpsc::UnboundedSender<Message>,
    kill: Option<oneshot::Sender<()>>,
    authed: bool,
}

#[derive(Default)]
struct Data {
    events: HashMap<String, Vec<Value>>,
    conns: HashMap<u64, Conn>,
    resume_calls: Vec<(String, u64)>,
    notes: Vec<Value>,
    next_session: u64,
    registers: Vec<Value>,
}

struct Shared {
    data: Mutex<Data>,
    paused: AtomicBool,
    accepted: AtomicU64,
    next_id: AtomicU64,
    asks: Mutex<HashMap<String, oneshot::Sender<Value>>>,
}

/// The fake daemon; dropping it stops it.
pub struct FakeServer {
    pub port: u16,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeServer {
    /// Serves on a listener the caller bound (no readiness sleep needed).
    pub fn start(listener: TcpListener) -> Self {
        let port = listener.local_addr().expect("local addr").port();
        let shared = Arc::new(Shared {
            data: Mutex::new(Data::default()),
            paused: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            asks: Mutex::new(HashMap::new()),
        });
        let task = tokio::spawn(accept_loop(listener, shared.clone()));
        FakeServer { port, shared, task }
    }

    /// Binds 127.0.0.1:0 and serves.
    pub async fn bind() -> Self {
        let listener = within(TcpListener::bind("127.0.0.1:0"))
            .await
            .expect("bind");
        Self::start(listener)
    }

    /// Client options for this server with the right token.
    pub fn options(&self) -> ConnectOptions {
        let mut opts = ConnectOptions::new(self.port, TOKEN);
        opts.call_timeout = Duration::from_secs(5);
        opts.connect_timeout = Duration::from_secs(2);
        opts
    }

    /// While paused, `system.hello` answers `unavailable`.
    pub fn pause(&self, paused: bool) {
        self.shared.paused.store(paused, Ordering::SeqCst);
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections currently open.
    pub fn live(&self) -> usize {
        self.shared.data.lock().unwrap().conns.len()
    }

    /// Drops every connection without a close frame.
    pub fn kill_all(&self) {
        let mut data = self.shared.data.lock().unwrap();
        for conn in data.conns.values_mut() {
            if let Some(kill) = conn.kill.take() {
                let _ = kill.send(());
            }
        }
    }

    /// Appends `count` events to a session and notifies every authenticated connection.
    pub fn emit(&self, session_id: &str, count: u64) {
        emit(&self.shared, session_id, count, true);
    }

    /// Appends `count` events without notifying anyone (a notification that got lost).
    pub fn store(&self, session_id: &str, count: u64) {
        emit(&self.shared, session_id, count, false);
    }

    /// Sends stored event `seq` again as a live notification (a duplicate).
    pub fn resend(&self, session_id: &str, seq: u64) {
        let data = self.shared.data.lock().unwrap();
        let event = data.events[session_id][(seq - 1) as usize].clone();
        broadcast(&data, &event);
    }

    /// `(sessionId, afterSeq)` of every `session.resume` received.
    pub fn resume_calls(&self) -> Vec<(String, u64)> {
        self.shared.data.lock().unwrap().resume_calls.clone()
    }

    /// Params of every `tool.register` received.
    pub fn registers(&self) -> Vec<Value> {
        self.shared.data.lock().unwrap().registers.clone()
    }

    /// Params of every client notification received.
    pub fn notes(&self) -> Vec<Value> {
        self.shared.data.lock().unwrap().notes.clone()
    }
}

fn emit(shared: &Shared, session_id: &str, count: u64, notify: bool) {
    for _ in 0..count {
        let mut data = shared.data.lock().unwrap();
        let events = data.events.entry(session_id.to_owned()).or_default();
        let seq = events.len() as u64 + 1;
        let event = json!({
            "sessionId": session_id, "seq": seq, "kind": "message.delta",
            "payload": { "text": format!("e{seq}") }, "ts": "2025-01-01T00:00:00Z",
        });
        events.push(event.clone());
        if notify {
            broadcast(&data, &event);
        }
    }
}

fn emit_kind(shared: &Shared, session_id: &str, kind: &str, payload: Value) {
    let mut data = shared.data.lock().unwrap();
    let events = data.events.entry(session_id.to_owned()).or_default();
    let seq = events.len() as u64 + 1;
    let event = json!({
        "sessionId": session_id, "seq": seq, "kind": kind, "payload": payload,
        "ts": "2025-01-01T00:00:00Z",
    });
    events.push(event.clone());
    broadcast(&data, &event);
}

fn broadcast(data: &Data, event: &Value) {
    let frame = json!({ "jsonrpc": "2.0", "method": "session.event", "params": event }).to_string();
    for conn in data.conns.values().filter(|c| c.authed) {
        let _ = conn.tx.send(Message::text(frame.clone()));
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut conns = tokio::task::JoinSet::new();
    let mut conn_ids = 0u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                conn_ids += 1;
                conns.spawn(serve(tcp, shared.clone(), conn_ids));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn serve(tcp: tokio::net::TcpStream, shared: Arc<Shared>, conn_id: u64) {
    let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
        return;
    };
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (kill_tx, mut kill_rx) = oneshot::channel();
    shared.data.lock().unwrap().conns.insert(
        conn_id,
        Conn {
            tx: tx.clone(),
            kill: Some(kill_tx),
            authed: false,
        },
    );
    loop {
        tokio::select! {
            _ = &mut kill_rx => break,
            out = rx.recv() => {
                let Some(out) = out else { break };
                if sink.send(out).await.is_err() { break; }
            }
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    let Ok(msg) = serde_json::from_str::<Value>(&text) else { continue };
                    on_message(&shared, conn_id, &tx, msg);
                }
                Some(Ok(Message::Close(_))) => {
                    let _ = sink.send(Message::Close(None)).await;
                    break;
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            },
        }
    }
    shared.data.lock().unwrap().conns.remove(&conn_id);
}

fn reply(
    tx: &mpsc::UnboundedSender<Message>,
    id: &Value,
    outcome: Result<Value, (i64, &str, &str)>,
) {
    let frame = match outcome {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err((code, data_code, message)) => json!({
            "jsonrpc": "2.0", "id": id,
            "error": { "code": code, "message": message, "data": { "code": data_code } },
        }),
    };
    let _ = tx.send(Message::text(frame.to_string()));
}

fn on_message(shared: &Arc<Shared>, conn_id: u64, tx: &mpsc::UnboundedSender<Message>, msg: Value) {
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let Some(method) = msg.get("method").and_then(Value::as_str).map(str::to_owned) else {
        // A response to one of our `ask` requests.
        if let Some(key) = id.as_str() {
            if let Some(waiter) = shared.asks.lock().unwrap().remove(key) {
                let _ = waiter.send(msg);
            }
        }
        return;
    };
    if id.is_null() {
        shared
            .data
            .lock()
            .unwrap()
            .notes
            .push(json!({ "method": method, "params": params }));
        return;
    }
    let authed = shared
        .data
        .lock()
        .unwrap()
        .conns
        .get(&conn_id)
        .is_some_and(|c| c.authed);
    if method == "system.hello" {
        if shared.paused.load(Ordering::SeqCst) {
            return reply(tx, &id, Err((-32000, "unavailable", "restarting")));
        }
        if params.get("token").and_then(Value::as_str) != Some(TOKEN) {
            return reply(tx, &id, Err((-32000, "unauthorized", "bad token")));
        }
        if let Some(conn) = shared.data.lock().unwrap().conns.get_mut(&conn_id) {
            conn.authed = true;
        }
        let result = json!({ "protocolVersion": "1.25.0", "serverVersion": "fake", "capabilities": ["sessions", "approvals"] });
        return reply(tx, &id, Ok(result));
    }
    if !authed {
        return reply(tx, &id, Err((-32000, "unauthorized", "hello first")));
    }
    let tx = tx.clone();
    let shared = shared.clone();
    tokio::spawn(async move {
        match method.as_str() {
            "echo" => reply(&tx, &id, Ok(params)),
            "sleep" => {
                let ms = params["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                reply(&tx, &id, Ok(params["value"].clone()));
            }
            "never" => {}
            "push" => {
                let note = json!({"jsonrpc": "2.0", "method": params["method"], "params": params["params"]});
                let _ = tx.send(Message::text(note.to_string()));
                reply(&tx, &id, Ok(json!({"ok": true})));
            }
            "tool.register" => {
                let names: Vec<Value> = params["tools"]
                    .as_array()
                    .map(|a| a.iter().map(|t| t["name"].clone()).collect())
                    .unwrap_or_default();
                shared.data.lock().unwrap().registers.push(params.clone());
                reply(&tx, &id, Ok(json!({ "registered": names })));
            }
            "fail" => {
                let code = params["code"].as_str().unwrap_or("internal").to_owned();
                let numeric = if code == "not_found" { -32004 } else { -32000 };
                reply(&tx, &id, Err((numeric, &code, "failed on request")));
            }
            "session.create" => {
                let sid = {
                    let mut data = shared.data.lock().unwrap();
                    data.next_session += 1;
                    let sid = format!("s{}", data.next_session);
                    data.events.insert(sid.clone(), Vec::new());
                    sid
                };
                reply(&tx, &id, Ok(json!({ "sessionId": sid })));
            }
            "session.resume" => {
                let sid = params["sessionId"].as_str().unwrap_or_default().to_owned();
                let after = params["afterSeq"].as_u64().unwrap_or(0);
                let mut data = shared.data.lock().unwrap();
                data.resume_calls.push((sid.clone(), after));
                let Some(events) = data.events.get(&sid) else {
                    return reply(&tx, &id, Err((-32004, "not_found", "no such session")));
                };
                let events: Vec<Value> = events.iter().skip(after as usize).cloned().collect();
                reply(&tx, &id, Ok(json!({ "sessionId": sid, "events": events })));
            }
            "session.prompt" => {
                let sid = params["sessionId"].as_str().unwrap_or_default().to_owned();
                let turn = format!("t-{}", shared.next_id.fetch_add(1, Ordering::SeqCst));
                reply(&tx, &id, Ok(json!({ "turnId": turn })));
                emit_kind(&shared, &sid, "turn.started", json!({ "turnId": turn }));
                for text in ["a", "b", "c"] {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    emit_kind(
                        &shared,
                        &sid,
                        "message.delta",
                        json!({ "turnId": turn, "text": text }),
                    );
                }
                emit_kind(
                    &shared,
                    &sid,
                    "turn.done",
                    json!({ "turnId": turn, "reason": "complete" }),
                );
            }
            "ask" => {
                let key = format!("srv-{}", shared.next_id.fetch_add(1, Ordering::SeqCst));
                let (waiter, answer) = oneshot::channel();
                shared.asks.lock().unwrap().insert(key.clone(), waiter);
                let request = json!({
                    "jsonrpc": "2.0", "id": key, "method": params["method"], "params": params["params"],
                });
                let _ = tx.send(Message::text(request.to_string()));
                match tokio::time::timeout(Duration::from_secs(5), answer).await {
                    Ok(Ok(response)) => reply(&tx, &id, Ok(json!({ "response": response }))),
                    _ => reply(&tx, &id, Err((-32000, "internal", "client never answered"))),
                }
            }
            _ => reply(
                &tx,
                &id,
                Err((-32601, "method_not_found", "no such method")),
            ),
        }
    });
}
