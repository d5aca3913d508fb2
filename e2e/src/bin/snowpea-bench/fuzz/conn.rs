//! One fuzzing connection: says hello, then until the deadline keeps up to `in_flight`
//! answers owed while sending seeded random messages ([`Mix`]), answers the suite's
//! server→client requests (approvals, questions, host tools) with random answers shaped by
//! their result schemas, harvests ids from results, and finally waits (bounded) for every
//! answer still owed. Connection 0 also sends the known svc-memory trigger of issue 40 at
//! the start and every [`TRIGGER_EVERY`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use super::catalog::{Catalog, Method, Policy};
use super::frames::{self, Expect, Ids, Outgoing};
use super::ledger::Ledger;
use super::params::{Break, Gen, BREAKS, UNKNOWN_FIELD};
use super::values::{self, IdPool};

/// How often connection 0 repeats the known trigger.
pub const TRIGGER_EVERY: Duration = Duration::from_secs(60);
/// Longest wait for the connection, the hello, or one send.
const WAIT: Duration = Duration::from_secs(30);
/// The label of the hello a connection sends after a failed one.
const AGAIN: &str = "system.hello (again)";
/// Longest wait for the close at the end.
const END_WAIT: Duration = Duration::from_secs(5);
/// Largest message the fuzz client takes from the gateway (results go up to 64 MiB).
const CLIENT_MAX_MESSAGE: usize = 128 << 20;
/// Largest message a fuzzing connection sends: the gateway's limit
/// (`snowpea_proto::limits::WS_MESSAGE`, 16 MiB).
const MAX_MESSAGE: usize = 16 << 20;
/// Least time between two calls of one connection carrying megabyte strings.
const HUGE_EVERY: Duration = Duration::from_secs(2);

/// What one connection needs.
#[derive(Clone)]
pub struct ConnOpts {
    /// Its number (0 sends the trigger).
    pub index: usize,
    /// The run's seed (each connection derives its own).
    pub seed: u64,
    /// The gateway's port.
    pub port: u16,
    /// The daemon token.
    pub token: String,
    /// The suite's temp project folder.
    pub workdir: String,
    /// The protocol as the suite serves it.
    pub catalog: Arc<Catalog>,
    /// Most answers owed at once.
    pub in_flight: usize,
    /// When to stop sending.
    pub until: Instant,
    /// How long to wait for the answers still owed after `until`.
    pub drain: Duration,
    /// Set to stop early (a process went over the abort limit).
    pub abort: Arc<AtomicBool>,
    /// Only methods starting with one of these (empty: every method).
    pub only: Vec<String>,
    /// Whether connection 0 sends the issue 40 trigger.
    pub trigger: bool,
}

/// What one connection saw.
pub struct ConnReport {
    /// Its answers.
    pub ledger: Ledger,
    /// Messages sent.
    pub sent: u64,
    /// Server→client requests answered.
    pub server_requests: u64,
    /// Notifications received.
    pub notifications: u64,
}

/// The shares of each kind of message, in per mille.
struct Mix;

impl Mix {
    const VALID: u32 = 450;
    const BROKEN: u32 = 250;
    const NOTIFICATION: u32 = 50;
    const BATCH: u32 = 100;
    // The rest (150): garbage.
}

struct Shared {
    ledger: Ledger,
    pool: IdPool,
    rng: StdRng,
}

/// A client WebSocket to the gateway.
pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a WebSocket to the gateway (bounded wait).
pub async fn connect(port: u16) -> anyhow::Result<Ws> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(CLIENT_MAX_MESSAGE))
        .max_frame_size(Some(CLIENT_MAX_MESSAGE));
    let url = format!("ws://127.0.0.1:{port}/ws");
    let (ws, _) = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::connect_async_with_config(url, Some(config), true),
    )
    .await??;
    Ok(ws)
}

/// The hello of a fuzz connection.
pub fn hello(token: &str, version: &str, id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "system.hello", "params": {
        "token": token, "clientVersion": "snowpea-bench fuzz", "protocolVersion": version,
        "clientId": "fuzz", "clientKind": "test"}})
}

/// Sends `hello` on `ws` and waits (bounded) for its answer.
pub async fn say_hello(ws: &mut Ws, hello: &Value) -> anyhow::Result<Value> {
    ws.send(Message::text(hello.to_string())).await?;
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, ws.next())
            .await
            .map_err(|_| anyhow::anyhow!("no answer to system.hello in {WAIT:?}"))?
            .ok_or_else(|| anyhow::anyhow!("closed before answering system.hello"))??;
        if let Message::Text(t) = msg {
            let v: Value = serde_json::from_str(&t)?;
            if v["id"] == hello["id"] {
                return Ok(v);
            }
        }
    }
}

/// Runs one fuzzing connection to the end (see the module docs).
pub async fn run(o: ConnOpts) -> anyhow::Result<ConnReport> {
    let mut ws = connect(o.port).await?;
    let h = say_hello(&mut ws, &hello(&o.token, &o.catalog.protocol_version, 1)).await?;
    anyhow::ensure!(h.get("result").is_some(), "system.hello failed: {h}");
    let (mut sink, mut stream) = ws.split();
    let shared = Arc::new(Mutex::new(Shared {
        ledger: Ledger::new(o.catalog.error_codes.clone()),
        pool: IdPool::default(),
        rng: StdRng::seed_from_u64(o.seed ^ 0x5eed_0000 ^ o.index as u64),
    }));
    let slots = Arc::new(Semaphore::new(o.in_flight));
    let (tx, mut rx) = mpsc::channel::<Message>(64);
    let closed = Arc::new(Mutex::new(None::<String>));
    // Set before this side closes: the gateway's close that follows is no failure.
    let closing = Arc::new(AtomicBool::new(false));

    let writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let stop = matches!(m, Message::Close(_));
            if tokio::time::timeout(WAIT, sink.send(m)).await.is_err() || stop {
                break;
            }
        }
    });
    let reader = {
        let (shared, slots, tx) = (shared.clone(), slots.clone(), tx.clone());
        let (closed, closing) = (closed.clone(), closing.clone());
        let catalog = o.catalog.clone();
        let token = o.token.clone();
        tokio::spawn(async move {
            let (mut requests, mut notes, mut hellos) = (0u64, 0u64, 0u64);
            while let Some(msg) = stream.next().await {
                let text = match msg {
                    Ok(Message::Text(t)) => t.to_string(),
                    Ok(Message::Close(c)) => {
                        if !closing.load(Ordering::SeqCst) {
                            *closed.lock().unwrap_or_else(|e| e.into_inner()) =
                                Some(format!("closed by the gateway: {c:?}"));
                        }
                        break;
                    }
                    Ok(_) => continue,
                    Err(e) => {
                        if !closing.load(Ordering::SeqCst) {
                            *closed.lock().unwrap_or_else(|e| e.into_inner()) =
                                Some(format!("read failed: {e}"));
                        }
                        break;
                    }
                };
                let Ok(v) = serde_json::from_str::<Value>(&text) else {
                    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                    s.ledger
                        .fail(format!("a frame that is not JSON: {:.200}", text));
                    continue;
                };
                if v.get("method").is_some() {
                    if v.get("id").is_some() {
                        requests += 1;
                        let answer = answer_server_request(&v, &catalog, &shared);
                        let _ = tx.send(Message::text(answer.to_string())).await;
                    } else {
                        notes += 1;
                    }
                    continue;
                }
                let (give_back, rehello) = {
                    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                    let (settled, result) = s.ledger.on_response(&v);
                    let mut rehello = None;
                    let mut give_back = settled;
                    if let Some((label, r)) = result {
                        // The fuzz's own hellos took no slot.
                        if label == AGAIN {
                            give_back = 0;
                        }
                        let Shared { pool, rng, ledger } = &mut *s;
                        pool.harvest(&r["result"], rng);
                        // A failed hello leaves the connection unauthenticated (spec
                        // "Handshake"): say hello again, as a client would.
                        if label == "system.hello" && r.get("error").is_some() {
                            hellos += 1;
                            let mut h = hello(&token, &catalog.protocol_version, 0);
                            h["id"] = json!(format!("rehello-{hellos}"));
                            ledger.expect(&Expect::One(h["id"].to_string()), AGAIN, "");
                            rehello = Some(h);
                        }
                    }
                    (give_back, rehello)
                };
                slots.add_permits(give_back);
                if let Some(h) = rehello {
                    let _ = tx.send(Message::text(h.to_string())).await;
                }
            }
            (requests, notes)
        })
    };

    let mut rng = StdRng::seed_from_u64(o.seed.wrapping_mul(1_000_003) ^ o.index as u64);
    let mut ids = Ids::new(o.index);
    let callable: Vec<&Method> = o
        .catalog
        .callable()
        .filter(|m| o.only.is_empty() || o.only.iter().any(|p| m.name.starts_with(p.as_str())))
        .collect();
    anyhow::ensure!(
        !callable.is_empty(),
        "no method starts with any of {:?}",
        o.only
    );
    let mut sent = 0u64;
    let mut next_trigger = Instant::now();
    let mut last_huge = Instant::now() - HUGE_EVERY;
    let send_one = async |out: Outgoing, sent: &mut u64| -> bool {
        let owed = {
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            s.ledger.expect(&out.expect, &out.label, &head(&out.bytes))
        };
        // A slot per owed answer, given back by the reader when it comes.
        if owed > 0 {
            let left = o.until.saturating_duration_since(Instant::now()) + o.drain;
            match tokio::time::timeout(left, slots.acquire()).await {
                Ok(Ok(p)) => p.forget(),
                _ => return false,
            }
        }
        let msg = if out.binary {
            Message::binary(out.bytes)
        } else {
            Message::text(String::from_utf8(out.bytes).unwrap_or_default())
        };
        *sent += 1;
        tx.send(msg).await.is_ok()
    };
    while Instant::now() < o.until && !o.abort.load(Ordering::SeqCst) {
        if closed.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
            break;
        }
        if o.trigger && o.index == 0 && Instant::now() >= next_trigger {
            next_trigger = Instant::now() + TRIGGER_EVERY;
            // One after the other: the searches must find the memory.
            for out in trigger(&mut rng, &mut ids) {
                let Expect::One(key) = out.expect.clone() else {
                    continue;
                };
                if !send_one(out, &mut sent).await {
                    break;
                }
                let wait_until = Instant::now() + o.drain;
                while shared
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .ledger
                    .is_pending(&key)
                    && Instant::now() < wait_until
                    && !o.abort.load(Ordering::SeqCst)
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            continue;
        }
        let huge = last_huge.elapsed() >= HUGE_EVERY;
        let out = {
            let s = shared.lock().unwrap_or_else(|e| e.into_inner());
            let mut g = Gen {
                rng: &mut rng,
                pool: &s.pool,
                workdir: &o.workdir,
                huge,
            };
            message(&mut g, &mut ids, &callable)
        };
        if out.bytes.len() > (1 << 20) {
            last_huge = Instant::now();
        }
        // Over the gateway's message limit the socket is closed (1009): the short-lived
        // connections test that; here the message is replaced by a small one.
        let out = if out.bytes.len() > MAX_MESSAGE {
            let id = ids.next(&mut rng);
            let v = frames::request(&id, "system.health", &json!({}));
            frames::text(&v, Expect::One(frames::key(&id)), "system.health")
        } else {
            out
        };
        if !send_one(out, &mut sent).await {
            break;
        }
    }

    // Drain: wait (bounded) for every answer still owed.
    let drain_until = Instant::now() + o.drain;
    loop {
        let owed = shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ledger
            .owed();
        let gone = closed.lock().unwrap_or_else(|e| e.into_inner()).is_some();
        if owed == 0 || gone || Instant::now() >= drain_until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    closing.store(true, Ordering::SeqCst);
    let _ = tx.send(Message::Close(None)).await;
    drop(tx);
    let writer_abort = writer.abort_handle();
    if tokio::time::timeout(END_WAIT, writer).await.is_err() {
        writer_abort.abort();
    }
    let reader_abort = reader.abort_handle();
    let (server_requests, notifications) = match tokio::time::timeout(END_WAIT, reader).await {
        Ok(Ok(counts)) => counts,
        _ => {
            reader_abort.abort();
            (0, 0)
        }
    };
    // The reader's task was awaited or aborted: give its share back.
    tokio::task::yield_now().await;
    let mut s = Arc::try_unwrap(shared)
        .map_err(|_| anyhow::anyhow!("reader still running"))?
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(why) = closed.lock().unwrap_or_else(|e| e.into_inner()).take() {
        s.ledger.fail(format!("connection {}: {why}", o.index));
    }
    s.ledger.close();
    Ok(ConnReport {
        ledger: s.ledger,
        sent,
        server_requests,
        notifications,
    })
}

/// The first 300 bytes of a message (lossy UTF-8), and its size when longer.
fn head(bytes: &[u8]) -> String {
    let n = bytes.len().min(300);
    let s = String::from_utf8_lossy(&bytes[..n]);
    if bytes.len() > n {
        format!("{s}… ({} bytes)", bytes.len())
    } else {
        s.into_owned()
    }
}

/// The svc-memory trigger of issue 40: a memory of 10,000 × "z", then `memory.search` of
/// 10,000 and of 100,000 × "z".
pub fn trigger(rng: &mut StdRng, ids: &mut Ids) -> Vec<Outgoing> {
    let calls = [
        (
            "memory.write",
            json!({"text": values::run_of("z", 10_000), "tags": ["fuzz"]}),
            "trigger: memory.write 10k×z",
        ),
        (
            "memory.search",
            json!({"query": values::run_of("z", 10_000)}),
            "trigger: memory.search 10k×z",
        ),
        (
            "memory.search",
            json!({"query": values::run_of("z", 100_000)}),
            "trigger: memory.search 100k×z",
        ),
    ];
    calls
        .into_iter()
        .map(|(m, p, label)| {
            let id = ids.next(rng);
            frames::text(
                &frames::request(&id, m, &p),
                Expect::One(frames::key(&id)),
                label,
            )
        })
        .collect()
}

/// One random message (see [`Mix`]).
fn message(g: &mut Gen<'_>, ids: &mut Ids, methods: &[&Method]) -> Outgoing {
    let roll = g.rng.random_range(0..1000);
    let m = *methods.choose(g.rng).expect("methods");
    if roll < Mix::VALID + Mix::BROKEN {
        let id = ids.next(g.rng);
        let params = params_for(g, m, roll >= Mix::VALID);
        return frames::text(
            &frames::request(&id, &m.name, &params),
            Expect::One(frames::key(&id)),
            &m.name,
        );
    }
    // A hello that fails leaves the connection unauthenticated; only a single request's
    // answer is seen (and followed by a good hello), so hellos go alone.
    let health = methods.iter().find(|m| m.name == "system.health").copied();
    let m = if m.name == "system.hello" && roll >= Mix::VALID + Mix::BROKEN {
        health.unwrap_or(m)
    } else {
        m
    };
    if roll < Mix::VALID + Mix::BROKEN + Mix::NOTIFICATION {
        let broken = g.rng.random_bool(0.5);
        let params = params_for(g, m, broken);
        let v = json!({"jsonrpc": "2.0", "method": m.name, "params": params});
        return frames::text(&v, Expect::Nothing, "notification");
    }
    if roll < Mix::VALID + Mix::BROKEN + Mix::NOTIFICATION + Mix::BATCH {
        let n = g.rng.random_range(1..=12);
        let mut members = Vec::with_capacity(n + 1);
        // The first member is a request, so the array answer can be told apart.
        for i in 0..=n {
            let mut m = *methods.choose(g.rng).expect("methods");
            if m.name == "system.hello" {
                m = health.unwrap_or(m);
            }
            let kind = if i == 0 { 0 } else { g.rng.random_range(0..6) };
            members.push(match kind {
                0..=2 => {
                    let id = ids.next(g.rng);
                    let params = params_for(g, m, kind == 2);
                    (
                        frames::request(&id, &m.name, &params),
                        Expect::One(frames::key(&id)),
                    )
                }
                3 => {
                    let params = params_for(g, m, false);
                    (
                        json!({"jsonrpc": "2.0", "method": m.name, "params": params}),
                        Expect::Nothing,
                    )
                }
                4 => (json!(g.rng.random_range(0..10)), Expect::Null),
                _ => {
                    let id = ids.next(g.rng);
                    let k = frames::key(&id);
                    (
                        json!({"jsonrpc": "1.0", "id": id, "method": m.name}),
                        Expect::One(k),
                    )
                }
            });
        }
        return frames::batch(members);
    }
    frames::garbage(g.rng, ids)
}

/// Params for `m`: valid-shaped or broken; for a [`Policy::SchemaOnly`] method always an
/// object with [`UNKNOWN_FIELD`], so the gateway refuses it.
fn params_for(g: &mut Gen<'_>, m: &Method, broken: bool) -> Value {
    let mut p = if broken {
        let b = *BREAKS.choose(g.rng).expect("breaks");
        let b = if !g.huge && b == Break::HugeString {
            Break::UnknownField
        } else {
            b
        };
        g.broken(&m.params, b)
    } else {
        g.valid(&m.params)
    };
    if m.policy == Policy::SchemaOnly {
        if !p.is_object() {
            p = json!({});
        }
        p[UNKNOWN_FIELD] = json!(true);
    }
    p
}

/// A random answer to a server→client request: shaped by its result schema, broken, an
/// error object, or a result of the wrong type.
fn answer_server_request(req: &Value, catalog: &Catalog, shared: &Mutex<Shared>) -> Value {
    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
    let Shared { rng, pool, .. } = &mut *s;
    let schema = catalog
        .answers
        .iter()
        .find(|(n, _)| req["method"] == n.as_str())
        .map(|(_, s)| s.clone())
        .unwrap_or(Value::Null);
    let id = req["id"].clone();
    let roll = rng.random_range(0..10);
    let mut g = Gen {
        rng,
        pool,
        workdir: "/nonexistent",
        huge: false,
    };
    let result = match roll {
        0..=5 => g.valid(&schema),
        6 | 7 => {
            let b = *BREAKS.choose(g.rng).expect("breaks");
            g.broken(&schema, b)
        }
        8 => {
            return json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "fuzz says no"}})
        }
        _ => g.any(0),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}
