//! Counting the JSON values of a client's message before its tree is built (issue 40 §3):
//! a `serde_json::Value` costs 32 bytes and more per value, so a 16 MiB message of
//! `[0,0,…]` becomes a 286 MB tree and one of `[{},{},…]` a batch of 5.6 million members.
//! [`over_budget`] walks the message with a visitor that allocates nothing and stops at the
//! first value past the budget ([`snowpea_proto::limits::JSON_VALUES`]), remembering the
//! request's `id` when it is a scalar at the top level so the refusal can name it.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// What the scan found when the message holds more than the budget.
#[derive(Debug, Clone, PartialEq)]
pub struct OverBudget {
    /// The top-level object's `id` if it is a string, number or null (else `Null`).
    pub id: Value,
}

/// `Some` when `bytes` holds more than `budget` JSON values. A message with fewer bytes
/// than `budget` cannot (every value takes a byte) and is not scanned. Malformed JSON is
/// `None`: the parser reports it, and builds at most `budget` values before the error.
pub fn over_budget(bytes: &[u8], budget: usize) -> Option<OverBudget> {
    if bytes.len() <= budget {
        return None;
    }
    let scan = Scan {
        left: Cell::new(budget),
        exceeded: Cell::new(false),
        id: RefCell::new(None),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let _ = Count {
        scan: &scan,
        top: true,
    }
    .deserialize(&mut de);
    scan.exceeded.get().then(|| OverBudget {
        id: scan.id.take().unwrap_or(Value::Null),
    })
}

struct Scan {
    left: Cell<usize>,
    exceeded: Cell<bool>,
    id: RefCell<Option<Value>>,
}

impl Scan {
    fn take<E: de::Error>(&self) -> Result<(), E> {
        match self.left.get() {
            0 => {
                self.exceeded.set(true);
                Err(E::custom("too many JSON values"))
            }
            n => {
                self.left.set(n - 1);
                Ok(())
            }
        }
    }
}

/// Counts one value and everything inside it.
#[derive(Clone, Copy)]
struct Count<'a> {
    scan: &'a Scan,
    /// The message itself (its `id` member is remembered).
    top: bool,
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

macro_rules! count_scalar {
    ($($f:ident: $t:ty),*) => {$(
        fn $f<E: de::Error>(self, _: $t) -> Result<(), E> {
            self.scan.take()
        }
    )*};
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    count_scalar!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scan.take()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.scan.take()?;
        let inner = Count {
            scan: self.scan,
            top: false,
        };
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.scan.take()?;
        let inner = Count {
            scan: self.scan,
            top: false,
        };
        while let Some(is_id) = map.next_key_seed(Key(self.scan))? {
            if self.top && is_id {
                let id = map.next_value_seed(Id(inner))?;
                *self.scan.id.borrow_mut() = id;
            } else {
                map.next_value_seed(inner)?;
            }
        }
        Ok(())
    }
}

/// Counts an object key; true when it is `id`.
struct Key<'a>(&'a Scan);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, k: &str) -> Result<bool, E> {
        self.0.take()?;
        Ok(k == "id")
    }
}

/// The top-level `id`: kept when it is a scalar, counted like any value.
struct Id<'a>(Count<'a>);

impl<'de> DeserializeSeed<'de> for Id<'_> {
    type Value = Option<Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Id<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a request id")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<Value>, E> {
        self.0.scan.take().map(|()| None)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<Value>, E> {
        self.0.scan.take().map(|()| Some(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<Value>, E> {
        self.0.scan.take().map(|()| Some(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<Value>, E> {
        // Echoed only when it comes back exactly (`jsonrpc::valid_id`).
        let id = (v.abs() < 9_007_199_254_740_992.0).then(|| v.into());
        self.0.scan.take().map(|()| id)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<Value>, E> {
        self.0.scan.take().map(|()| Some(v.into()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<Value>, E> {
        self.0.scan.take().map(|()| Some(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<Value>, A::Error> {
        self.0.visit_seq(seq).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<Value>, A::Error> {
        self.0.visit_map(map).map(|()| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn count(v: &Value) -> usize {
        match v {
            Value::Array(a) => 1 + a.iter().map(count).sum::<usize>(),
            Value::Object(m) => 1 + m.values().map(|x| 1 + count(x)).sum::<usize>(),
            _ => 1,
        }
    }

    /// The scan's count is the tree's: a message with exactly `budget` values passes, one
    /// more is over, whatever its shape.
    #[test]
    fn counts_every_value_of_every_shape() {
        let msgs = [
            json!({"jsonrpc": "2.0", "id": 7, "method": "m", "params": {"tags": [0, 1, "x", null, true, 1.5]}}),
            json!([{"jsonrpc": "2.0", "id": "a", "method": "m"}, {}, [], [[{"k": {}}]]]),
            json!({"jsonrpc": "2.0", "id": "é\"", "method": "m", "params": {"a\nb": "\u{0}"}}),
        ];
        for m in msgs {
            let n = count(&m);
            // Pad with whitespace so the byte length does not skip the scan.
            let text = format!("{m}{}", " ".repeat(n + 10));
            assert_eq!(over_budget(text.as_bytes(), n), None, "{m}");
            let over = over_budget(text.as_bytes(), n - 1).expect("over by one");
            let id = if m.is_object() {
                m["id"].clone()
            } else {
                Value::Null
            };
            assert_eq!(over.id, id, "{m}");
        }
    }

    #[test]
    fn a_wide_message_is_over_and_names_its_id() {
        let text = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"memory.write\",\"params\":{{\"tags\":[{}0]}}}}",
            "0,".repeat(200_000)
        );
        assert_eq!(
            over_budget(text.as_bytes(), 100_000),
            Some(OverBudget { id: json!(42) })
        );
        let batch = format!("[{}{{}}]", "{},".repeat(200_000));
        assert_eq!(
            over_budget(batch.as_bytes(), 100_000),
            Some(OverBudget { id: Value::Null })
        );
        // Short messages and malformed ones are left to the parser.
        assert_eq!(over_budget(b"[0,0,0]", 10), None);
        let broken = format!("[{}", "0,".repeat(50));
        assert_eq!(over_budget(broken.as_bytes(), 60), None);
    }
}
