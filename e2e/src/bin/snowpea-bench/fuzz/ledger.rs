//! The answers one connection owes: every message's [`Expect`] goes in before it is sent,
//! every frame that comes back is matched against them. A response nobody asked for, a
//! second response to one id, a response that is not well-formed JSON-RPC 2.0 (or names an
//! error code the protocol does not define), and at the end every answer still owed, are
//! failures.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::frames::Expect;

/// Failures kept word for word (the rest are only counted).
const KEPT_FAILURES: usize = 40;

/// A request waiting for its answer.
#[derive(Debug)]
struct Pending {
    label: String,
    /// The start of the request, for the report of an `internal` answer.
    request: String,
    sent: Instant,
    /// The batch it belongs to (its first id), if any.
    batch: Option<String>,
}

/// A batch waiting for its array.
#[derive(Debug)]
struct PendingBatch {
    ids: HashSet<String>,
    nulls: usize,
    sent: Instant,
}

/// Per-method figures.
#[derive(Debug, Default, Clone)]
pub struct MethodStats {
    /// Messages sent.
    pub sent: u64,
    /// Answers with a `result`.
    pub ok: u64,
    /// Answers with an `error`, by `error.data.code` (or the JSON-RPC code).
    pub errors: BTreeMap<String, u64>,
    /// Slowest answer.
    pub slowest: Duration,
}

/// The answers one connection owes and what came back.
#[derive(Debug)]
pub struct Ledger {
    error_codes: HashSet<String>,
    pending: HashMap<String, Pending>,
    batches: HashMap<String, PendingBatch>,
    nulls_owed: usize,
    answered: HashSet<String>,
    /// Figures by method (or `batch`, `garbage`, …).
    pub stats: BTreeMap<String, MethodStats>,
    /// Frames received: responses, notifications, server→client requests.
    pub received: u64,
    /// Failures, word for word (the first [`KEPT_FAILURES`]).
    pub failures: Vec<String>,
    /// All failures.
    pub failure_count: u64,
    /// Requests answered `internal`, with the answer (the first [`KEPT_FAILURES`]).
    pub internal: Vec<String>,
}

impl Ledger {
    /// A ledger checking error codes against `error_codes` (the protocol's).
    pub fn new(error_codes: HashSet<String>) -> Self {
        Ledger {
            error_codes,
            pending: HashMap::new(),
            batches: HashMap::new(),
            nulls_owed: 0,
            answered: HashSet::new(),
            stats: BTreeMap::new(),
            received: 0,
            failures: Vec::new(),
            failure_count: 0,
            internal: Vec::new(),
        }
    }

    /// Records a failure.
    pub fn fail(&mut self, what: String) {
        self.failure_count += 1;
        if self.failures.len() < KEPT_FAILURES {
            self.failures.push(what);
        }
    }

    /// True while the request with this id (JSON text) waits for its answer.
    pub fn is_pending(&self, key: &str) -> bool {
        self.pending.contains_key(key)
    }

    /// Answers still owed (requests, batches, null answers).
    pub fn owed(&self) -> usize {
        self.pending.len() - self.batch_members() + self.batches.len() + self.nulls_owed
    }

    fn batch_members(&self) -> usize {
        self.pending.values().filter(|p| p.batch.is_some()).count()
    }

    /// Records a message about to be sent (`request`: its start, for the report);
    /// returns how many answers it is owed (0 or 1).
    pub fn expect(&mut self, expect: &Expect, label: &str, request: &str) -> usize {
        self.stats.entry(label.to_owned()).or_default().sent += 1;
        let now = Instant::now();
        match expect {
            Expect::One(k) => {
                self.pending.insert(
                    k.clone(),
                    Pending {
                        label: label.to_owned(),
                        request: request.to_owned(),
                        sent: now,
                        batch: None,
                    },
                );
                1
            }
            Expect::Null => {
                self.nulls_owed += 1;
                1
            }
            Expect::Nothing => 0,
            Expect::Batch { ids, nulls } => {
                let Some(first) = ids.first() else {
                    // Only null members: cannot be told apart from other batches' arrays.
                    return 0;
                };
                for k in ids {
                    self.pending.insert(
                        k.clone(),
                        Pending {
                            label: "batch".into(),
                            request: request.to_owned(),
                            sent: now,
                            batch: Some(first.clone()),
                        },
                    );
                }
                self.batches.insert(
                    first.clone(),
                    PendingBatch {
                        ids: ids.iter().cloned().collect(),
                        nulls: *nulls,
                        sent: now,
                    },
                );
                1
            }
        }
    }

    /// Takes one response (object or array); returns how many owed answers it settled and,
    /// for a settled request, its method and answer (to harvest ids from).
    pub fn on_response(&mut self, v: &Value) -> (usize, Option<(String, Value)>) {
        self.received += 1;
        match v {
            Value::Array(items) => (self.on_batch(items), None),
            _ => {
                if let Err(e) = self.well_formed(v) {
                    self.fail(format!("ill-formed response ({e}): {}", clip(v)));
                    return (0, None);
                }
                let id = &v["id"];
                if id.is_null() {
                    if self.nulls_owed == 0 {
                        self.fail(format!(
                            "a response with id null nobody asked for: {}",
                            clip(v)
                        ));
                        return (0, None);
                    }
                    self.nulls_owed -= 1;
                    self.count("(null id)", v, None);
                    return (1, None);
                }
                let k = id.to_string();
                match self.pending.remove(&k) {
                    Some(p) if p.batch.is_none() => {
                        self.answered.insert(k);
                        self.count(&p.label, v, Some(p.sent));
                        self.note_internal(&p.request, v);
                        (1, Some((p.label, v.clone())))
                    }
                    Some(p) => {
                        self.fail(format!("member {k} of a batch answered alone: {}", clip(v)));
                        self.pending.insert(k, p);
                        (0, None)
                    }
                    None if self.answered.contains(&k) => {
                        self.fail(format!("a second response to id {k}: {}", clip(v)));
                        (0, None)
                    }
                    None => {
                        self.fail(format!("a response to id {k} nobody sent: {}", clip(v)));
                        (0, None)
                    }
                }
            }
        }
    }

    fn on_batch(&mut self, items: &[Value]) -> usize {
        let first = items
            .iter()
            .find(|m| !m["id"].is_null())
            .map(|m| m["id"].to_string());
        let Some(batch_key) = first
            .as_ref()
            .and_then(|k| self.pending.get(k))
            .and_then(|p| p.batch.clone())
        else {
            self.fail(format!(
                "an array answer matching no batch sent: {}",
                clip(&Value::Array(items.to_vec()))
            ));
            return 0;
        };
        let Some(b) = self.batches.remove(&batch_key) else {
            return 0;
        };
        let mut seen = HashSet::new();
        let mut nulls = 0;
        let mut busy = 0;
        for m in items {
            if let Err(e) = self.well_formed(m) {
                self.fail(format!("ill-formed batch member ({e}): {}", clip(m)));
                continue;
            }
            if m["error"]["data"]["details"]["reason"] == "busy" {
                busy += 1;
            }
            if m["id"].is_null() {
                nulls += 1;
                continue;
            }
            let k = m["id"].to_string();
            if !b.ids.contains(&k) || !seen.insert(k.clone()) {
                self.fail(format!("batch answer with a stray or repeated id {k}"));
                continue;
            }
            if let Some(p) = self.pending.remove(&k) {
                self.note_internal(&p.request, m);
            }
            self.answered.insert(k);
            self.count("batch", m, Some(b.sent));
        }
        // A batch refused `busy` as a whole answers only its requests (gateway `admit`).
        let all_busy = busy == items.len();
        if seen.len() != b.ids.len() || (nulls != b.nulls && !all_busy) {
            self.fail(format!(
                "batch answer with {} of {} ids and {nulls} of {} null members",
                seen.len(),
                b.ids.len(),
                b.nulls
            ));
            for k in b.ids.difference(&seen) {
                self.pending.remove(k);
            }
        }
        1
    }

    /// Keeps the request and answer of an `internal` error (a client's input should never
    /// cause one; reported, not failed).
    fn note_internal(&mut self, request: &str, v: &Value) {
        if v["error"]["data"]["code"] == "internal" && self.internal.len() < KEPT_FAILURES {
            self.internal.push(format!("{request} → {}", clip(v)));
        }
    }

    fn count(&mut self, label: &str, v: &Value, sent: Option<Instant>) {
        let s = self.stats.entry(label.to_owned()).or_default();
        if let Some(t) = sent {
            s.slowest = s.slowest.max(t.elapsed());
        }
        if v.get("result").is_some() {
            s.ok += 1;
        } else {
            let code = v["error"]["data"]["code"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| v["error"]["code"].to_string());
            *s.errors.entry(code).or_default() += 1;
        }
    }

    /// JSON-RPC 2.0 §5: `jsonrpc: "2.0"`, an `id`, exactly one of `result`/`error`; an error
    /// has an integer `code` and a string `message`; a protocol error (not -32700/-32600)
    /// names a code of the protocol in `error.data.code`.
    pub fn well_formed(&self, v: &Value) -> Result<(), String> {
        if v["jsonrpc"] != "2.0" {
            return Err("jsonrpc is not \"2.0\"".into());
        }
        if v.get("id").is_none() {
            return Err("no id".into());
        }
        match (v.get("result"), v.get("error")) {
            (Some(_), None) => Ok(()),
            (None, Some(e)) => {
                let code = e["code"].as_i64().ok_or("error.code is not an integer")?;
                if !e["message"].is_string() {
                    return Err("error.message is not a string".into());
                }
                if code == -32700 || code == -32600 {
                    return Ok(());
                }
                match e["data"]["code"].as_str() {
                    Some(c) if self.error_codes.contains(c) => Ok(()),
                    Some(c) => Err(format!("error.data.code {c:?} is not a protocol code")),
                    None => Err("error.data.code missing".into()),
                }
            }
            _ => Err("not exactly one of result and error".into()),
        }
    }

    /// At the end: every answer still owed is a failure.
    pub fn close(&mut self) {
        let mut owed: Vec<(String, String)> = self
            .pending
            .iter()
            .filter(|(_, p)| p.batch.is_none())
            .map(|(k, p)| (k.clone(), p.label.clone()))
            .collect();
        owed.sort();
        for (k, label) in owed {
            self.fail(format!("no answer to id {k} ({label})"));
        }
        for k in self.batches.keys().cloned().collect::<Vec<_>>() {
            self.fail(format!("no answer to the batch with id {k}"));
        }
        if self.nulls_owed > 0 {
            let n = self.nulls_owed;
            self.fail(format!("{n} framing errors never answered (id null)"));
        }
        self.pending.clear();
        self.batches.clear();
        self.nulls_owed = 0;
    }
}

/// A value's JSON, cut to 300 bytes for a report.
pub fn clip(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= 300 {
        return s;
    }
    let mut end = 300;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ledger() -> Ledger {
        Ledger::new(["invalid_params".to_owned()].into_iter().collect())
    }

    #[test]
    fn one_answer_per_id_and_none_missing() {
        let mut l = ledger();
        l.expect(&Expect::One("1".into()), "memory.search", "");
        l.expect(&Expect::One("2".into()), "memory.write", "");
        let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
        assert_eq!(l.on_response(&ok).0, 1);
        assert_eq!(l.failure_count, 0);
        l.on_response(&ok);
        assert_eq!(l.failure_count, 1, "{:?}", l.failures);
        assert!(l.failures[0].contains("second response"));
        l.close();
        assert_eq!(l.failure_count, 2);
        assert!(l.failures[1].contains("no answer to id 2"));
    }

    #[test]
    fn ill_formed_and_unknown_codes_fail() {
        let mut l = ledger();
        l.expect(&Expect::One("\"a\"".into()), "x", "");
        l.on_response(&json!({"jsonrpc": "2.0", "id": "a", "error": {"code": -32000, "message": "m", "data": {"code": "made_up"}}}));
        l.on_response(&json!({"jsonrpc": "2.0", "id": "a", "result": 1, "error": {}}));
        assert_eq!(l.failure_count, 2, "{:?}", l.failures);
        l.on_response(&json!({"jsonrpc": "2.0", "id": "a", "error": {"code": -32602, "message": "m", "data": {"code": "invalid_params"}}}));
        assert_eq!(l.failure_count, 2);
        assert_eq!(l.owed(), 0);
    }

    #[test]
    fn batches_and_null_ids() {
        let mut l = ledger();
        l.expect(
            &Expect::Batch {
                ids: vec!["1".into(), "2".into()],
                nulls: 1,
            },
            "batch",
            "",
        );
        l.expect(&Expect::Null, "garbage", "");
        assert_eq!(l.owed(), 2);
        let parse =
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "p"}});
        l.on_response(&parse);
        let arr = json!([
            {"jsonrpc": "2.0", "id": 2, "result": {}},
            parse,
            {"jsonrpc": "2.0", "id": 1, "result": {}}
        ]);
        l.on_response(&arr);
        assert_eq!(l.failure_count, 0, "{:?}", l.failures);
        assert_eq!(l.owed(), 0);
        l.on_response(&parse);
        assert_eq!(l.failure_count, 1);
    }
}
