//! `serde_json::Value` ⇄ `google.protobuf.Struct` / `Value` conversions for services
//! that carry free-form JSON (event payloads, tool arguments) in typed prost messages.

use prost_types::{value::Kind, ListValue, Struct, Value};
use serde_json::{Map, Value as Json};

/// JSON → `google.protobuf.Value`.
pub fn to_value(json: &Json) -> Value {
    let kind = match json {
        Json::Null => Kind::NullValue(0),
        Json::Bool(b) => Kind::BoolValue(*b),
        Json::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Json::String(s) => Kind::StringValue(s.clone()),
        Json::Array(a) => Kind::ListValue(ListValue {
            values: a.iter().map(to_value).collect(),
        }),
        Json::Object(o) => Kind::StructValue(to_struct_map(o)),
    };
    Value { kind: Some(kind) }
}

/// JSON object → `google.protobuf.Struct` (a non-object becomes an empty Struct).
pub fn to_struct(json: &Json) -> Struct {
    match json {
        Json::Object(o) => to_struct_map(o),
        _ => Struct::default(),
    }
}

fn to_struct_map(o: &Map<String, Json>) -> Struct {
    Struct {
        fields: o.iter().map(|(k, v)| (k.clone(), to_value(v))).collect(),
    }
}

/// `google.protobuf.Value` → JSON (integral numbers become JSON integers).
pub fn from_value(v: &Value) -> Json {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Json::Null,
        Some(Kind::BoolValue(b)) => Json::Bool(*b),
        Some(Kind::NumberValue(n)) => crate::json::number(*n),
        Some(Kind::StringValue(s)) => Json::String(s.clone()),
        Some(Kind::ListValue(l)) => Json::Array(l.values.iter().map(from_value).collect()),
        Some(Kind::StructValue(s)) => from_struct(s),
    }
}

/// `google.protobuf.Struct` → JSON object.
pub fn from_struct(s: &Struct) -> Json {
    // A `Struct` holds a hash map: the wire order must not depend on hashing.
    Json::Object(crate::json::sorted_keys(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), from_value(v)))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_integers_integral() {
        let j = serde_json::json!({"a": 1, "b": [true, null, "x", 2.5], "c": {"d": -3}});
        assert_eq!(from_struct(&to_struct(&j)), j);
    }
}
