//! The connection task: opening the WebSocket and `system.hello` (protocol § Handshake), the
//! read/write loop that matches responses to calls and answers server→client requests, and
//! reconnecting with backoff followed by `session.resume` of every tracked session.
//!
//! One task per client owns the socket; it never waits on a subscriber or a request handler
//! (those run on their own tasks, held in a `JoinSet` that dies with the connection).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt, SinkExt, StreamExt};
use serde_json::{json, Map, Value};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::client::{ConnectionState, Inner};
use crate::{ConnectOptions, Error, RpcError};

/// The client's WebSocket.
pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The id of `system.hello`, sent before any other call on a connection.
const HELLO_ID: u64 = 0;

/// Opens the WebSocket and performs `system.hello`, all within `opts.connect_timeout`.
/// Returns the socket and the hello result.
pub(crate) async fn open(opts: &ConnectOptions) -> Result<(Ws, Value), Error> {
    let (url, token) = opts.resolve()?;
    match tokio::time::timeout(opts.connect_timeout, open_inner(opts, &url, token)).await {
        Ok(result) => result,
        Err(_) => Err(Error::Connect(format!("{url}: timed out connecting"))),
    }
}

async fn open_inner(opts: &ConnectOptions, url: &str, token: String) -> Result<(Ws, Value), Error> {
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
        .await
        .map_err(|e| Error::Connect(format!("{url}: {e}")))?;
    let mut params = Map::new();
    params.insert("token".into(), token.into());
    params.insert("clientVersion".into(), opts.client_version.clone().into());
    params.insert(
        "protocolVersion".into(),
        opts.protocol_version.clone().into(),
    );
    for (key, value) in [
        ("clientId", &opts.client_id),
        ("clientKind", &opts.client_kind),
        ("instanceId", &opts.instance_id),
    ] {
        if let Some(value) = value {
            params.insert(key.into(), value.clone().into());
        }
    }
    if opts.keep_alive {
        params.insert("keepAlive".into(), true.into());
    }
    let hello =
        json!({ "jsonrpc": "2.0", "id": HELLO_ID, "method": "system.hello", "params": params });
    ws.send(Message::text(hello.to_string()))
        .await
        .map_err(|e| Error::Connect(format!("{url}: sending system.hello: {e}")))?;
    loop {
        let frame = match ws.next().await {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => return Err(Error::Connect(format!("{url}: during system.hello: {e}"))),
            None => return Err(Error::Connect(format!("{url}: closed during system.hello"))),
        };
        let text = match frame {
            Message::Text(text) => text,
            Message::Close(reason) => {
                let reason = reason.map(|r| r.reason.to_string()).unwrap_or_default();
                return Err(Error::Connect(format!(
                    "{url}: closed during system.hello: {reason}"
                )));
            }
            Message::Binary(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {
                continue
            }
        };
        let Ok(reply) = serde_json::from_str::<Value>(&text) else {
            tracing::warn!("unparsable frame before the system.hello answer");
            continue;
        };
        if reply.get("id").and_then(Value::as_u64) != Some(HELLO_ID)
            || reply.get("method").is_some()
        {
            tracing::debug!("ignoring a message that arrived before the system.hello answer");
            continue;
        }
        if let Some(error) = reply.get("error") {
            let _ = ws.close(None).await;
            return Err(Error::Rpc(RpcError::from_value(error)));
        }
        return match reply.get("result") {
            Some(result) if result.is_object() => Ok((ws, result.clone())),
            _ => Err(Error::Protocol(format!(
                "system.hello result is not an object: {reply}"
            ))),
        };
    }
}

/// Why one connection's loop ended.
enum End {
    /// [`crate::Client::close`] or drop.
    Shutdown,
    /// The connection broke; the reason is for the log.
    Lost(String),
}

/// The connection task: drives the connection, reconnects per policy, and closes the client
/// when it gives up. `rx` is the outbound queue of the connection already published.
pub(crate) async fn run(inner: Arc<Inner>, ws: Ws, rx: mpsc::UnboundedReceiver<Message>) {
    let mut ws = ws;
    let mut rx = rx;
    let mut resumes = Vec::new();
    loop {
        let end = drive(&inner, ws, rx, resumes).await;
        // `drive` dropped the outbound receiver; only now fail the waiting calls.
        match end {
            End::Shutdown => break,
            End::Lost(reason) => tracing::warn!(%reason, "connection to the daemon lost"),
        }
        if inner.opts.reconnect.is_none() {
            break;
        }
        inner.connection_lost(ConnectionState::Reconnecting);
        let Some((new_ws, hello)) = reconnect(&inner).await else {
            break;
        };
        let (tx, new_rx) = mpsc::unbounded_channel();
        resumes = inner.begin_resume_all();
        inner.set_connected(tx, hello);
        tracing::info!(
            generation = inner.conn.borrow().generation,
            "reconnected to the daemon"
        );
        ws = new_ws;
        rx = new_rx;
    }
    inner.finish();
}

/// Connect attempts with jittered exponential backoff until one succeeds, attempts run out,
/// or the client is closed.
async fn reconnect(inner: &Inner) -> Option<(Ws, Value)> {
    let policy = inner.opts.reconnect.clone()?;
    let mut attempt: u32 = 0;
    loop {
        if policy.max_attempts.is_some_and(|max| attempt >= max) {
            tracing::warn!(attempts = attempt, "giving up reconnecting");
            return None;
        }
        let delay = policy.delay(attempt);
        tokio::select! {
            _ = inner.cancel.cancelled() => return None,
            _ = tokio::time::sleep(delay) => {}
        }
        attempt = attempt.saturating_add(1);
        tokio::select! {
            _ = inner.cancel.cancelled() => return None,
            opened = open(&inner.opts) => match opened {
                Ok(connection) => return Some(connection),
                Err(error) => tracing::debug!(attempt, %error, "reconnect attempt failed"),
            },
        }
    }
}

/// One connection's read/write loop. `resumes` are the `session.resume` calls to make first
/// (after a reconnect).
async fn drive(
    inner: &Arc<Inner>,
    ws: Ws,
    mut rx: mpsc::UnboundedReceiver<Message>,
    resumes: Vec<(String, u64)>,
) -> End {
    let io_timeout = inner.opts.connect_timeout;
    let (mut sink, mut stream) = ws.split();
    let tx = inner.conn.borrow().tx.clone();
    let Some(tx) = tx else { return End::Shutdown };
    let mut tasks = JoinSet::new();
    for (session_id, after_seq) in resumes {
        spawn_fill(&mut tasks, inner, &tx, session_id, after_seq);
    }
    let ping_every = inner.opts.ping_interval;
    let mut ping =
        tokio::time::interval(ping_every.unwrap_or(std::time::Duration::from_secs(3600)));
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ping.reset();
    let mut last_heard = Instant::now();
    let end = loop {
        tokio::select! {
            _ = inner.cancel.cancelled() => {
                let close = Message::Close(Some(CloseFrame { code: CloseCode::Normal, reason: "client closed".into() }));
                let _ = tokio::time::timeout(io_timeout, async {
                    sink.send(close).await?;
                    // Wait for the server's close reply so the handshake completes.
                    while let Some(frame) = stream.next().await {
                        if matches!(frame?, Message::Close(_)) { break; }
                    }
                    Ok::<_, tokio_tungstenite::tungstenite::Error>(())
                }).await;
                break End::Shutdown;
            }
            outbound = rx.recv() => {
                let Some(frame) = outbound else { break End::Shutdown };
                match tokio::time::timeout(io_timeout, sink.send(frame)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => break End::Lost(format!("write failed: {e}")),
                    Err(_) => break End::Lost("write timed out".into()),
                }
            }
            frame = stream.next() => {
                last_heard = Instant::now();
                match frame {
                    Some(Ok(Message::Text(text))) => on_text(inner, &mut tasks, &tx, &text),
                    Some(Ok(Message::Close(reason))) => {
                        let reason = reason.map(|r| r.reason.to_string()).unwrap_or_default();
                        break End::Lost(format!("closed by the daemon: {reason}"));
                    }
                    Some(Ok(Message::Binary(_))) => tracing::warn!("ignoring a binary frame"),
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Err(e)) => break End::Lost(format!("read failed: {e}")),
                    None => break End::Lost("connection closed".into()),
                }
            }
            _ = ping.tick(), if ping_every.is_some() => {
                let every = ping_every.unwrap_or_default();
                if last_heard.elapsed() > every * 3 {
                    break End::Lost("no traffic for three ping intervals".into());
                }
                let sent = tokio::time::timeout(io_timeout, sink.send(Message::Ping(Default::default()))).await;
                if !matches!(sent, Ok(Ok(()))) {
                    break End::Lost("ping failed".into());
                }
            }
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(e) = joined {
                    if e.is_panic() { tracing::error!("client background task panicked"); }
                }
            }
        }
    };
    drop(rx);
    drop(tasks);
    end
}

/// Starts a `session.resume` for a gap or a reconnect; its answer goes through the sequencer.
fn spawn_fill(
    tasks: &mut JoinSet<()>,
    inner: &Arc<Inner>,
    tx: &mpsc::UnboundedSender<Message>,
    session_id: String,
    after_seq: u64,
) {
    let inner = inner.clone();
    let tx = tx.clone();
    tasks.spawn(async move {
        let params = json!({ "sessionId": session_id, "afterSeq": after_seq });
        let call = inner.request_on(&tx, "session.resume", params);
        let result = tokio::time::timeout(inner.opts.call_timeout, call)
            .await
            .unwrap_or(Err(Error::Timeout));
        inner.on_fill(&session_id, result);
    });
}

/// Handles one text frame: a response, a notification, a server→client request, or a batch.
fn on_text(
    inner: &Arc<Inner>,
    tasks: &mut JoinSet<()>,
    tx: &mpsc::UnboundedSender<Message>,
    text: &str,
) {
    let message: Value = match serde_json::from_str(text) {
        Ok(message) => message,
        Err(error) => {
            tracing::warn!(%error, "ignoring an unparsable frame from the daemon");
            return;
        }
    };
    match message {
        Value::Array(batch) => {
            for message in batch {
                on_message(inner, tasks, tx, message);
            }
        }
        message => on_message(inner, tasks, tx, message),
    }
}

fn on_message(
    inner: &Arc<Inner>,
    tasks: &mut JoinSet<()>,
    tx: &mpsc::UnboundedSender<Message>,
    message: Value,
) {
    let Value::Object(mut message) = message else {
        tracing::warn!("ignoring a JSON-RPC message that is not an object");
        return;
    };
    let id = message.remove("id").filter(|id| !id.is_null());
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let params = message.remove("params").unwrap_or(Value::Null);
    match (method, id) {
        (Some(method), None) => {
            if let Some((session_id, after_seq)) = inner.on_notification(method, params) {
                spawn_fill(tasks, inner, tx, session_id, after_seq);
            }
        }
        (Some(method), Some(id)) => answer_request(inner, tasks, tx, method, id, params),
        (None, Some(id)) => {
            let Some(id) = id.as_u64() else {
                tracing::warn!(%id, "ignoring a response with a foreign id");
                return;
            };
            let outcome = match (message.remove("result"), message.remove("error")) {
                (_, Some(error)) => Err(Error::Rpc(RpcError::from_value(&error))),
                (Some(result), None) => Ok(result),
                (None, None) => Err(Error::Protocol("response without result or error".into())),
            };
            if !inner.complete(id, outcome) {
                tracing::debug!(id, "response to a call nobody waits for (timed out?)");
            }
        }
        (None, None) => tracing::warn!("ignoring a message with neither method nor id"),
    }
}

/// Runs the handler of a server→client request on its own task and sends its answer.
fn answer_request(
    inner: &Arc<Inner>,
    tasks: &mut JoinSet<()>,
    tx: &mpsc::UnboundedSender<Message>,
    method: String,
    id: Value,
    params: Value,
) {
    let handler = inner.handler(&method);
    let tx = tx.clone();
    let closing = inner.cancel.clone();
    tasks.spawn(async move {
        let outcome = match handler {
            None => Err(RpcError::method_not_found(&method)),
            Some(handler) => match AssertUnwindSafe(async { handler(params).await })
                .catch_unwind()
                .await
            {
                Ok(outcome) => outcome,
                Err(_) => {
                    tracing::error!(%method, "request handler panicked");
                    Err(RpcError::with_code(
                        "internal",
                        "client request handler panicked",
                    ))
                }
            },
        };
        if closing.is_cancelled() {
            // `Client::close`: the server sees the connection close instead of an answer the
            // handler gave only because it was stopped (a host tool then fails "host gone").
            tracing::debug!(%method, "client closing; request left unanswered");
            return;
        }
        let reply = match outcome {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.to_value() }),
        };
        if tx.send(Message::text(reply.to_string())).is_err() {
            tracing::debug!(%method, "connection gone before the request was answered");
        }
    });
}
