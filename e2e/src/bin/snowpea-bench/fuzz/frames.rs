//! One WebSocket message of the fuzz and the answer JSON-RPC 2.0 (and DESIGN.md §4) says it
//! must get: a request, a notification, a batch mixing requests, notifications and invalid
//! members, or garbage — malformed JSON, invalid UTF-8, ids of the wrong type, nesting
//! deeper than the parser takes, answers to requests nobody sent.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::Rng;
use serde_json::{json, Value};

/// The answer a message must get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Exactly one response object with this id (the id's JSON text).
    One(String),
    /// Exactly one response object with `id: null` (a framing error whose id is lost).
    Null,
    /// No answer at all (a notification, an answer to an unknown server request).
    Nothing,
    /// Exactly one array holding a response for each of these ids once and `nulls`
    /// responses with `id: null`.
    Batch {
        /// The ids' JSON texts.
        ids: Vec<String>,
        /// Members answered with `id: null`.
        nulls: usize,
    },
}

/// A message to send.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Sent as a binary message (else text; the bytes are then UTF-8).
    pub binary: bool,
    /// What must come back.
    pub expect: Expect,
    /// The method it calls, for the report (`-` for garbage).
    pub label: String,
}

/// Hands out the request ids of one connection: numbers and strings, never reused.
#[derive(Debug)]
pub struct Ids {
    conn: usize,
    next: u64,
}

impl Ids {
    /// Ids of connection number `conn`.
    pub fn new(conn: usize) -> Self {
        Ids { conn, next: 1 }
    }

    /// A fresh id.
    pub fn next(&mut self, rng: &mut StdRng) -> Value {
        self.next += 1;
        match rng.random_range(0..4) {
            0 => json!(format!("c{}-{}", self.conn, self.next)),
            1 => json!(format!("{} ✓ {}", self.next, "x".repeat(self.conn))),
            _ => json!(self.conn as u64 * 1_000_000_000_000 + self.next),
        }
    }
}

/// The JSON text of an id as it must come back.
pub fn key(id: &Value) -> String {
    id.to_string()
}

/// A request of `method` with `params` (`Null` = the member left out).
pub fn request(id: &Value, method: &str, params: &Value) -> Value {
    if params.is_null() {
        json!({"jsonrpc": "2.0", "id": id, "method": method})
    } else {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }
}

/// A text message.
pub fn text(v: &Value, expect: Expect, label: &str) -> Outgoing {
    Outgoing {
        bytes: v.to_string().into_bytes(),
        binary: false,
        expect,
        label: label.to_owned(),
    }
}

/// A batch of `members` (each a value and what it contributes to the answer).
pub fn batch(members: Vec<(Value, Expect)>) -> Outgoing {
    let (mut ids, mut nulls) = (Vec::new(), 0);
    for (_, e) in &members {
        match e {
            Expect::One(k) => ids.push(k.clone()),
            Expect::Null => nulls += 1,
            _ => {}
        }
    }
    let expect = if ids.is_empty() && nulls == 0 {
        Expect::Nothing
    } else {
        Expect::Batch { ids, nulls }
    };
    let arr: Vec<Value> = members.into_iter().map(|(v, _)| v).collect();
    text(&Value::Array(arr), expect, "batch")
}

/// A malformed or odd message that needs no method (see the module docs).
pub fn garbage(rng: &mut StdRng, ids: &mut Ids) -> Outgoing {
    let id = ids.next(rng);
    let k = key(&id);
    let raw = |s: String, expect: Expect| Outgoing {
        bytes: s.into_bytes(),
        binary: false,
        expect,
        label: "garbage".into(),
    };
    match rng.random_range(0..16) {
        0 => {
            let full = request(&id, "system.health", &json!({})).to_string();
            let mut cut = rng.random_range(0..full.len());
            while !full.is_char_boundary(cut) {
                cut -= 1;
            }
            raw(full[..cut].to_owned(), Expect::Null)
        }
        1 => raw(
            [
                "{",
                "",
                "nul",
                "{\"jsonrpc\":",
                "[1,",
                "}{",
                "\"\\u12\"",
                "{\"a\":1}}",
            ]
            .choose(rng)
            .expect("non-empty")
            .to_string(),
            Expect::Null,
        ),
        2 => raw(
            ["[]", "42", "\"x\"", "null", "true"]
                .choose(rng)
                .expect("non-empty")
                .to_string(),
            Expect::Null,
        ),
        3 => raw(
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"system.health\"}}",
                [
                    "{\"a\":1}",
                    "[1]",
                    "1e30",
                    "true",
                    "123456789012345678901234567890"
                ]
                .choose(rng)
                .expect("non-empty")
            ),
            Expect::Null,
        ),
        4 => raw(
            format!("{{\"jsonrpc\":\"1.0\",\"id\":{k},\"method\":\"system.health\"}}"),
            Expect::One(k),
        ),
        5 => raw(
            format!("{{\"id\":{k},\"method\":\"system.health\"}}"),
            Expect::One(k),
        ),
        6 => raw(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{k},\"method\":7}}"),
            Expect::One(k),
        ),
        7 => raw(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{k}}}"),
            Expect::One(k),
        ),
        8 => raw(
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":\"srv-{}\",\"result\":{{\"decision\":\"allow\"}}}}",
                rng.random_range(0..1_000_000u32) + 1_000_000
            ),
            Expect::Nothing,
        ),
        9 => raw(
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"system.health\"}".into(),
            Expect::Null,
        ),
        10 => {
            let d = rng.random_range(200..100_000);
            raw(
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{k},\"method\":\"memory.write\",\"params\":{{\"text\":{}{}}}}}",
                    "[".repeat(d),
                    "]".repeat(d)
                ),
                Expect::Null,
            )
        }
        11 => {
            let n = *[1 << 10, 1 << 16, 1 << 20].choose(rng).expect("non-empty");
            raw(" ".repeat(n), Expect::Null)
        }
        12 => {
            let pad = " \n\t".repeat(rng.random_range(0..4096));
            let body = request(&id, "system.health", &json!({}));
            raw(format!("{pad}{body}{pad}"), Expect::One(k))
        }
        13 => Outgoing {
            bytes: request(&id, "system.info", &json!({}))
                .to_string()
                .into_bytes(),
            binary: true,
            expect: Expect::One(k),
            label: "binary".into(),
        },
        14 => {
            let mut bytes = request(&id, "system.health", &json!({}))
                .to_string()
                .into_bytes();
            let at = rng.random_range(0..bytes.len());
            // 0xfe and 0xff never occur in UTF-8 (a continuation byte could complete a
            // valid character, e.g. ✓'s 0x9c → 0x80 is "–", and the request would pass).
            bytes[at] = *[0xff, 0xfe].choose(rng).expect("non-empty");
            Outgoing {
                bytes,
                binary: true,
                // Invalid UTF-8 anywhere is a parse error.
                expect: Expect::Null,
                label: "binary".into(),
            }
        }
        _ => {
            // A notification of a method that does not exist: never answered.
            raw(
                json!({"jsonrpc": "2.0", "method": "no.such.method", "params": {}}).to_string(),
                Expect::Nothing,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Every garbage message that expects its id back names an id the message carries.
    #[test]
    fn garbage_expectations_name_the_sent_id() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut ids = Ids::new(1);
        for _ in 0..2000 {
            let g = garbage(&mut rng, &mut ids);
            if let Expect::One(k) = &g.expect {
                let text = String::from_utf8_lossy(&g.bytes);
                assert!(text.contains(k.as_str()), "{text} / {k}");
            }
            // A binary message expected to fail parsing is never valid UTF-8.
            if g.binary && g.expect == Expect::Null {
                assert!(std::str::from_utf8(&g.bytes).is_err());
            }
        }
    }

    #[test]
    fn a_batch_counts_its_members() {
        let b = batch(vec![
            (
                json!({"jsonrpc": "2.0", "id": 1, "method": "x"}),
                Expect::One("1".into()),
            ),
            (json!(1), Expect::Null),
            (json!({"jsonrpc": "2.0", "method": "x"}), Expect::Nothing),
        ]);
        assert_eq!(
            b.expect,
            Expect::Batch {
                ids: vec!["1".into()],
                nulls: 1
            }
        );
    }
}
