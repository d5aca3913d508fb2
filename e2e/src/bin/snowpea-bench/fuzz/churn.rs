//! Short-lived connections beside the fuzzing ones, one every [`CHURN_EVERY`]: calls before
//! `system.hello` (each must be refused `unauthorized`), a hello with a wrong token or an
//! incompatible protocol major, a connection dropped with requests in flight, a message
//! one byte over the gateway's limit (closed with 1009), and messages of millions of tiny
//! values — params of 8 MiB of `0,` and a batch of 16 MiB of `{}` members (issue 40: 286 MB
//! and 19 GB in the gateway) — each of which must get exactly one well-formed answer. Connections come and go for the
//! whole run, so what the gateway keeps per connection shows in its memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

use super::conn::{connect, hello, say_hello};

/// Time between two short-lived connections.
pub const CHURN_EVERY: Duration = Duration::from_millis(500);
/// Largest WebSocket message the gateway takes (`snowpea_proto::limits::WS_MESSAGE`).
pub const WS_MESSAGE: usize = 16 << 20;
/// Longest wait for one answer or the close.
const WAIT: Duration = Duration::from_secs(30);
/// Failures kept word for word.
const KEPT: usize = 20;

/// What the short-lived connections saw.
#[derive(Debug, Default)]
pub struct ChurnReport {
    /// Connections opened.
    pub connections: u64,
    /// Failures, word for word (the first [`KEPT`]).
    pub failures: Vec<String>,
    /// All failures.
    pub failure_count: u64,
}

impl ChurnReport {
    fn fail(&mut self, what: String) {
        self.failure_count += 1;
        if self.failures.len() < KEPT {
            self.failures.push(what);
        }
    }
}

/// Opens short-lived connections until `until` (or `abort`).
pub async fn run(
    port: u16,
    token: String,
    version: String,
    seed: u64,
    until: Instant,
    abort: Arc<AtomicBool>,
) -> ChurnReport {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc4u64 << 32);
    let mut report = ChurnReport::default();
    let mut n = 0u64;
    while Instant::now() < until && !abort.load(Ordering::SeqCst) {
        tokio::time::sleep(CHURN_EVERY).await;
        n += 1;
        report.connections += 1;
        // The 16 MiB messages are costly: each kind one in 40.
        let kind = match n % 40 {
            0 => 4,
            13 => 5,
            26 => 6,
            _ => rng.random_range(0..4),
        };
        if let Err(e) = once(kind, port, &token, &version, &mut rng, &mut report).await {
            report.fail(format!("short-lived connection ({kind}): {e:#}"));
        }
    }
    report
}

async fn once(
    kind: u32,
    port: u16,
    token: &str,
    version: &str,
    rng: &mut StdRng,
    report: &mut ChurnReport,
) -> anyhow::Result<()> {
    let mut ws = connect(port).await?;
    match kind {
        0 => {
            for (i, m) in ["session.list", "memory.search", "no.such", "system.health"]
                .iter()
                .enumerate()
            {
                let req = json!({"jsonrpc": "2.0", "id": i, "method": m, "params": {"query": "z"}});
                let r = say_hello(&mut ws, &req).await?;
                if r["error"]["data"]["code"] != "unauthorized" {
                    report.fail(format!(
                        "{m} before hello was not refused unauthorized: {r}"
                    ));
                }
            }
        }
        1 => {
            let mut h = hello(token, version, 9);
            h["params"]["token"] = json!(if rng.random_bool(0.5) { "wrong" } else { "" });
            let r = say_hello(&mut ws, &h).await?;
            if r["error"]["data"]["code"] != "unauthorized" {
                report.fail(format!(
                    "a hello with a wrong token was not refused unauthorized: {r}"
                ));
            }
        }
        2 => {
            let h = hello(token, "999.0.0", 9);
            let r = say_hello(&mut ws, &h).await?;
            if r["error"]["data"]["code"] != "protocol_incompatible" {
                report.fail(format!(
                    "a hello of protocol 999 was not refused protocol_incompatible: {r}"
                ));
            }
        }
        3 => {
            let r = say_hello(&mut ws, &hello(token, version, 9)).await?;
            anyhow::ensure!(r.get("result").is_some(), "hello failed: {r}");
            // Requests in flight, then gone without a close frame.
            for i in 0..rng.random_range(1..20) {
                let m = ["session.list", "memory.search", "system.info", "job.list"][i % 4];
                let req = json!({"jsonrpc": "2.0", "id": i + 100, "method": m, "params": {"query": "zz"}});
                ws.send(Message::text(req.to_string())).await?;
            }
            drop(ws);
            return Ok(());
        }
        5 | 6 => {
            let r = say_hello(&mut ws, &hello(token, version, 9)).await?;
            anyhow::ensure!(r.get("result").is_some(), "hello failed: {r}");
            let text = if kind == 5 {
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":\"wide\",\"method\":\"memory.write\",\"params\":{{\"text\":\"x\",\"tags\":[{}0]}}}}",
                    "0,".repeat(4 << 20)
                )
            } else {
                format!(
                    "[{{\"jsonrpc\":\"2.0\",\"id\":\"wide\",\"method\":\"system.health\"}}{}]",
                    ",{}".repeat((WS_MESSAGE - 256) / 3)
                )
            };
            ws.send(Message::text(text)).await?;
            let answer = next_json(&mut ws).await;
            let one = match &answer {
                Some(Value::Object(o)) => {
                    o.get("id").is_some_and(|id| id.is_null() || id == "wide")
                }
                Some(Value::Array(a)) => a.iter().any(|m| m["id"] == "wide"),
                _ => false,
            };
            if !one
                || answer
                    .as_ref()
                    .is_some_and(|a| a["jsonrpc"] != "2.0" && !a.is_array())
            {
                report.fail(format!(
                    "a message of millions of tiny values ({}) got no proper answer: {}",
                    if kind == 5 { "params" } else { "batch" },
                    answer
                        .map(|a| super::ledger::clip(&a))
                        .unwrap_or_else(|| "none".into())
                ));
            }
        }
        _ => {
            let r = say_hello(&mut ws, &hello(token, version, 9)).await?;
            anyhow::ensure!(r.get("result").is_some(), "hello failed: {r}");
            let text = format!("{{\"x\":\"{}\"}}", "z".repeat(WS_MESSAGE));
            // The gateway may close while the message is still going out.
            let _ = tokio::time::timeout(WAIT, ws.send(Message::text(text))).await;
            let code = close_code(&mut ws).await;
            if code != Some(CloseCode::Size) {
                report.fail(format!(
                    "a message over {WS_MESSAGE} bytes was not closed with 1009: {code:?}"
                ));
            }
            return Ok(());
        }
    }
    let _ = tokio::time::timeout(WAIT, ws.close(None)).await;
    Ok(())
}

/// The next JSON message that is not a notification (bounded wait; `None` on timeout,
/// close or EOF).
async fn next_json(ws: &mut super::conn::Ws) -> Option<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, ws.next()).await.ok()?? {
            Ok(Message::Text(t)) => {
                let v: Value = serde_json::from_str(&t).ok()?;
                if v.get("method").is_none() {
                    return Some(v);
                }
            }
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

/// The close code the gateway sends next (bounded wait; `None` on timeout or EOF).
async fn close_code(ws: &mut super::conn::Ws) -> Option<CloseCode> {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, ws.next()).await.ok()?? {
            Ok(Message::Close(c)) => return c.map(|c| c.code),
            Ok(_) => continue,
            Err(_) => return None,
        }
    }
}
