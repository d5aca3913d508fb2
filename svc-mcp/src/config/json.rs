//! An order-preserving JSON value for rewriting `.mcp.json` and `settings.json` (issue 6:
//! writes keep entries and keys the daemon does not know about, in their order).
//!
//! The workspace's `serde_json` is built without `preserve_order`; turning that feature on
//! from this crate would change `serde_json::Map` for every crate in the workspace (feature
//! unification) and build two copies of it. This small value type keeps object keys in file
//! order instead; known entries are converted to and from `serde_json::Value` at the edges.

use std::fmt;

use indexmap::IndexMap;
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Number;

/// A JSON value whose objects keep their key order.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Json {
    /// `null`.
    #[default]
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, as serde_json holds it.
    Number(Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, keys in file order.
    Object(IndexMap<String, Json>),
}

impl Json {
    /// An empty object.
    pub fn object() -> Json {
        Json::Object(IndexMap::new())
    }

    /// The object's map, if this is an object.
    pub fn as_object(&self) -> Option<&IndexMap<String, Json>> {
        match self {
            Json::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The object's map, mutably, if this is an object.
    pub fn as_object_mut(&mut self) -> Option<&mut IndexMap<String, Json>> {
        match self {
            Json::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The value at `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.as_object().and_then(|m| m.get(key))
    }

    /// The object at `key`, created (appended) when missing or not an object.
    pub fn object_at(&mut self, key: &str) -> &mut IndexMap<String, Json> {
        if !matches!(self, Json::Object(_)) {
            *self = Json::object();
        }
        let Json::Object(m) = self else {
            unreachable!("made an object above")
        };
        let slot = m.entry(key.to_owned()).or_insert_with(Json::object);
        if !matches!(slot, Json::Object(_)) {
            *slot = Json::object();
        }
        match slot {
            Json::Object(inner) => inner,
            _ => unreachable!("made an object above"),
        }
    }

    /// Converts to a `serde_json::Value` (object keys end up sorted).
    pub fn to_value(&self) -> serde_json::Value {
        match self {
            Json::Null => serde_json::Value::Null,
            Json::Bool(b) => serde_json::Value::Bool(*b),
            Json::Number(n) => serde_json::Value::Number(n.clone()),
            Json::String(s) => serde_json::Value::String(s.clone()),
            Json::Array(a) => serde_json::Value::Array(a.iter().map(Json::to_value).collect()),
            Json::Object(m) => serde_json::Value::Object(
                m.iter().map(|(k, v)| (k.clone(), v.to_value())).collect(),
            ),
        }
    }

    /// Converts from a `serde_json::Value`.
    pub fn from_value(v: &serde_json::Value) -> Json {
        match v {
            serde_json::Value::Null => Json::Null,
            serde_json::Value::Bool(b) => Json::Bool(*b),
            serde_json::Value::Number(n) => Json::Number(n.clone()),
            serde_json::Value::String(s) => Json::String(s.clone()),
            serde_json::Value::Array(a) => Json::Array(a.iter().map(Json::from_value).collect()),
            serde_json::Value::Object(m) => Json::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), Json::from_value(v)))
                    .collect(),
            ),
        }
    }

    /// Sets `key` in an object to `value`, keeping the key's position when it exists
    /// (appending otherwise); `None` removes the key (keeping the others' order).
    pub fn set_or_remove(map: &mut IndexMap<String, Json>, key: &str, value: Option<Json>) {
        match value {
            Some(v) => {
                if let Some(slot) = map.get_mut(key) {
                    *slot = v;
                } else {
                    map.insert(key.to_owned(), v);
                }
            }
            None => {
                map.shift_remove(key);
            }
        }
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(v) => s.serialize_str(v),
            Json::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Json::Object(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, v) in m {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
                Ok(Json::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Json, E> {
                Ok(Number::from_f64(n).map_or(Json::Null, Json::Number))
            }
            fn visit_str<E>(self, s: &str) -> Result<Json, E> {
                Ok(Json::String(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Json, E> {
                Ok(Json::String(s))
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_none<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
                Json::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element()? {
                    out.push(v);
                }
                Ok(Json::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut out = IndexMap::new();
                while let Some((k, v)) = map.next_entry::<String, Json>()? {
                    out.insert(k, v);
                }
                Ok(Json::Object(out))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_survives_a_round_trip() {
        let text = r#"{"zeta":1,"alpha":{"y":true,"b":[1,2.5,"x",null]},"mid":"m"}"#;
        let v: Json = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), text);
    }

    #[test]
    fn set_keeps_position_and_remove_keeps_others() {
        let mut v: Json = serde_json::from_str(r#"{"c":1,"a":2,"b":3}"#).unwrap();
        let m = v.as_object_mut().unwrap();
        Json::set_or_remove(m, "a", Some(Json::Bool(true)));
        Json::set_or_remove(m, "c", None);
        Json::set_or_remove(m, "d", Some(Json::Null));
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"a":true,"b":3,"d":null}"#
        );
    }
}
