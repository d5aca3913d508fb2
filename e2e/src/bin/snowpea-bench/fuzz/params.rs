//! Params from a method's JSON Schema: valid-shaped with random values (enums from the
//! schema, ids the suite handed out, the suite's workdir for paths), or broken in one of the
//! ways a hostile client breaks them — a wrong type somewhere, a required field missing, an
//! unknown field, params that are not an object, one string at the size limit, nesting
//! as deep as the JSON parser takes.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::Rng;
use serde_json::{json, Map, Value};

use super::values::{self, IdPool};

/// The field every [`super::catalog::Policy::SchemaOnly`] call carries: no params object of
/// the protocol has it, so the gateway refuses the call before it reaches its service.
pub const UNKNOWN_FIELD: &str = "fuzzUnknownField";

/// Deepest nesting the fuzz builds as a value (the JSON parser takes 128 levels with the
/// request's own two; deeper nesting is sent as text and must be refused `-32700`).
pub const MAX_VALUE_DEPTH: usize = 100;

/// What params generation needs besides the schema.
pub struct Gen<'a> {
    /// The connection's seeded generator.
    pub rng: &'a mut StdRng,
    /// Ids the suite returned so far.
    pub pool: &'a IdPool,
    /// The suite's temp project folder (the only real path the fuzz names).
    pub workdir: &'a str,
    /// Whether strings may be megabytes long in this call.
    pub huge: bool,
}

/// One way to break params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// A value of another type at one field.
    WrongType,
    /// A required field left out.
    MissingRequired,
    /// An extra field no schema has.
    UnknownField,
    /// `null`, an array, a number or a string instead of the params object.
    NotAnObject,
    /// One string field as long as [`values::STRING_PARAM`] (or one byte longer).
    HugeString,
    /// One field nested [`MAX_VALUE_DEPTH`] arrays deep.
    DeepNesting,
    /// Every optional field explicitly `null` / `{}` / `[]` (cleared fields).
    ClearEverything,
}

/// Every [`Break`].
pub const BREAKS: &[Break] = &[
    Break::WrongType,
    Break::MissingRequired,
    Break::UnknownField,
    Break::NotAnObject,
    Break::HugeString,
    Break::DeepNesting,
    Break::ClearEverything,
];

impl Gen<'_> {
    /// Valid-shaped params for `schema` (an object schema, or `Null` for none).
    pub fn valid(&mut self, schema: &Value) -> Value {
        if schema.is_null() {
            return json!({});
        }
        self.value(schema, "params", 0)
    }

    /// Params broken in the way `b`.
    pub fn broken(&mut self, schema: &Value, b: Break) -> Value {
        let mut p = self.valid(schema);
        match b {
            Break::WrongType => {
                if let Some(obj) = p.as_object_mut() {
                    let keys: Vec<String> = props(schema).map(|(k, _)| k.clone()).collect();
                    if let Some(k) = keys.choose(self.rng) {
                        let expected = types(&schema["properties"][k]);
                        obj.insert(k.clone(), self.other_type(&expected));
                    } else {
                        obj.insert("anything".into(), self.any(0));
                    }
                }
            }
            Break::MissingRequired => {
                let required: Vec<&str> = schema["required"]
                    .as_array()
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if let (Some(k), Some(obj)) = (required.choose(self.rng), p.as_object_mut()) {
                    obj.remove(*k);
                }
            }
            Break::UnknownField => {
                if let Some(obj) = p.as_object_mut() {
                    let v = self.any(0);
                    obj.insert(UNKNOWN_FIELD.into(), v);
                }
            }
            Break::NotAnObject => {
                p = match self.rng.random_range(0..5) {
                    0 => Value::Null,
                    1 => json!([p]),
                    2 => json!(42),
                    3 => json!("params"),
                    _ => json!(true),
                };
            }
            Break::HugeString => {
                let n = if self.rng.random_bool(0.5) {
                    values::STRING_PARAM
                } else {
                    values::STRING_PARAM + 1
                };
                let unit = *["z", "a", "é"].choose(self.rng).expect("non-empty");
                let s = values::run_of(unit, n / unit.len() + usize::from(unit.len() > 1));
                self.set_random_field(schema, &mut p, Value::String(s));
            }
            Break::DeepNesting => {
                let depth = self.rng.random_range(1..=MAX_VALUE_DEPTH);
                let mut v = json!("deep");
                for _ in 0..depth {
                    v = if self.rng.random_bool(0.5) {
                        json!([v])
                    } else {
                        json!({ "k": v })
                    };
                }
                self.set_random_field(schema, &mut p, v);
            }
            Break::ClearEverything => {
                if let Some(obj) = p.as_object_mut() {
                    let required: Vec<&str> = schema["required"]
                        .as_array()
                        .map(|r| r.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    for (k, s) in props(schema) {
                        if !required.contains(&k.as_str()) {
                            let t = types(s);
                            let cleared = if t.contains(&"array") {
                                json!([])
                            } else if t.contains(&"object") {
                                json!({})
                            } else {
                                Value::Null
                            };
                            obj.insert(k.clone(), cleared);
                        }
                    }
                }
            }
        }
        p
    }

    /// Puts `v` at a random declared field of `p` (or a new one when there is none).
    fn set_random_field(&mut self, schema: &Value, p: &mut Value, v: Value) {
        if let Some(obj) = p.as_object_mut() {
            let keys: Vec<String> = props(schema).map(|(k, _)| k.clone()).collect();
            let k = keys
                .choose(self.rng)
                .cloned()
                .unwrap_or_else(|| "text".into());
            obj.insert(k, v);
        }
    }

    /// A valid-shaped value for `schema` under field `key`.
    fn value(&mut self, schema: &Value, key: &str, depth: usize) -> Value {
        let t = types(schema);
        if t.contains(&"null") && self.rng.random_bool(0.15) {
            return Value::Null;
        }
        let concrete: Vec<&str> = t.iter().copied().filter(|t| *t != "null").collect();
        match concrete.choose(self.rng).copied() {
            Some("string") => self.string(schema, key),
            Some("integer") => {
                if key == "limit" || self.rng.random_bool(0.7) {
                    json!(self.rng.random_range(0..100))
                } else {
                    values::integer(self.rng)
                }
            }
            Some("number") => json!(self.rng.random_range(-1e6..1e6)),
            Some("boolean") => json!(self.rng.random_bool(0.5)),
            Some("array") => {
                let n = if self.rng.random_bool(0.05) {
                    self.rng.random_range(0..512)
                } else {
                    self.rng.random_range(0..4)
                };
                let items = &schema["items"];
                (0..n)
                    .map(|_| {
                        if items.is_object() && depth < 8 {
                            self.value(items, key, depth + 1)
                        } else {
                            self.any(depth + 1)
                        }
                    })
                    .collect()
            }
            Some("object") if depth < 8 => {
                let mut m = Map::new();
                let required: Vec<&str> = schema["required"]
                    .as_array()
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                for (k, s) in props(schema) {
                    if required.contains(&k.as_str()) || self.rng.random_bool(0.5) {
                        let v = self.value(s, k, depth + 1);
                        m.insert(k.clone(), v);
                    }
                }
                // A map or free-form object (`Struct`): a few entries of anything.
                if schema.get("properties").is_none()
                    || schema["additionalProperties"].is_object()
                    || schema["additionalProperties"] == json!(true)
                {
                    for _ in 0..self.rng.random_range(0..4) {
                        let k = values::string(self.rng, false);
                        let v = match &schema["additionalProperties"] {
                            s @ Value::Object(_) => self.value(s, &k, depth + 1),
                            _ => self.any(depth + 1),
                        };
                        m.insert(k, v);
                    }
                }
                Value::Object(m)
            }
            Some(_) => json!({}),
            None => self.any(depth),
        }
    }

    fn string(&mut self, schema: &Value, key: &str) -> Value {
        if let Some(e) = schema["enum"].as_array().filter(|e| !e.is_empty()) {
            if self.rng.random_bool(0.85) {
                return e.choose(self.rng).cloned().unwrap_or(Value::Null);
            }
        }
        let lower = key.to_ascii_lowercase();
        if values::is_id_key(key) && self.rng.random_bool(0.6) {
            if let Some(id) = self.pool.pick(key, self.rng) {
                return Value::String(id);
            }
        }
        if (lower.contains("workdir") || lower.contains("path") || lower == "cwd" || lower == "dir")
            && self.rng.random_bool(0.5)
        {
            let sub = ["", "/a.txt", "/sub", "/../x", "/\u{0}"]
                .choose(self.rng)
                .expect("non-empty");
            return Value::String(format!("{}{sub}", self.workdir));
        }
        Value::String(values::string(self.rng, self.huge))
    }

    /// Any JSON value (bounded depth and size).
    pub fn any(&mut self, depth: usize) -> Value {
        let pick = if depth > 4 {
            self.rng.random_range(0..4)
        } else {
            self.rng.random_range(0..6)
        };
        match pick {
            0 => Value::Null,
            1 => json!(self.rng.random_bool(0.5)),
            2 => values::integer(self.rng),
            3 => Value::String(values::string(self.rng, false)),
            4 => (0..self.rng.random_range(0..4))
                .map(|_| self.any(depth + 1))
                .collect(),
            _ => {
                let mut m = Map::new();
                for _ in 0..self.rng.random_range(0..4) {
                    let k = values::string(self.rng, false);
                    m.insert(k, self.any(depth + 1));
                }
                Value::Object(m)
            }
        }
    }

    /// A value of a type `expected` does not allow.
    fn other_type(&mut self, expected: &[&str]) -> Value {
        let candidates: Vec<Value> = [
            ("string", json!("wrong")),
            ("integer", json!(7)),
            ("number", json!(1.5)),
            ("boolean", json!(false)),
            ("array", json!([1, "x"])),
            ("object", json!({"x": 1})),
            ("null", Value::Null),
        ]
        .into_iter()
        .filter(|(t, _)| !(expected.contains(t) || *t == "number" && expected.contains(&"integer")))
        .map(|(_, v)| v)
        .collect();
        candidates.choose(self.rng).cloned().unwrap_or(json!([]))
    }
}

/// The declared properties of an object schema.
fn props(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema["properties"].as_object().into_iter().flatten()
}

/// The `type` of a schema as a list (`"string"` or `["string", "null"]`).
fn types(schema: &Value) -> Vec<&str> {
    match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn schema() -> Value {
        json!({"type": "object", "additionalProperties": false, "required": ["query"],
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"},
                "mode": {"type": "string", "enum": ["plan", "auto"]},
                "namespace": {"type": ["string", "null"]}}})
    }

    /// Valid-shaped params always hold the required fields with the declared types.
    #[test]
    fn valid_params_follow_the_schema() {
        let mut rng = StdRng::seed_from_u64(3);
        let pool = IdPool::default();
        let mut g = Gen {
            rng: &mut rng,
            pool: &pool,
            workdir: "/tmp/w",
            huge: false,
        };
        for _ in 0..500 {
            let p = g.valid(&schema());
            assert!(p["query"].is_string(), "{p}");
            assert!(p.get("limit").is_none_or(Value::is_i64), "{p}");
            assert!(p.as_object().unwrap().keys().all(|k| k != UNKNOWN_FIELD));
        }
    }

    #[test]
    fn each_break_breaks() {
        let mut rng = StdRng::seed_from_u64(4);
        let pool = IdPool::default();
        let mut g = Gen {
            rng: &mut rng,
            pool: &pool,
            workdir: "/tmp/w",
            huge: false,
        };
        let s = schema();
        assert!(g.broken(&s, Break::MissingRequired).get("query").is_none());
        assert!(g
            .broken(&s, Break::UnknownField)
            .get(UNKNOWN_FIELD)
            .is_some());
        assert!(!g.broken(&s, Break::NotAnObject).is_object());
        let huge = g.broken(&s, Break::HugeString);
        let longest = huge
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_str)
            .map(str::len)
            .max();
        assert!(longest >= Some(values::STRING_PARAM), "{longest:?}");
    }
}
