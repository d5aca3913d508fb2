//! JSON ⇄ protobuf mapping for the gateway (DESIGN.md §3–4).
//!
//! [`to_message`] validates a JSON-RPC `params` object against a message descriptor
//! — types, required fields, allowed string values, unknown fields — and builds the
//! dynamic message; every error names the offending field as a dotted path
//! (`params.mode`, `params.items[2].name`). [`to_json`] writes a message back as the
//! protocol's JSON: camelCase names, 64-bit integers as JSON numbers, integral doubles
//! as integers, unset optional fields omitted.

use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage, Value,
};
use serde_json::{Map, Number, Value as Json};

use crate::schema::field_rules;

/// A params validation failure (answered as `invalid_params`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParamError {
    /// Dotted path of the offending field, e.g. `params.mode`.
    pub field: String,
    /// Human-readable reason, naming the field.
    pub message: String,
}

impl ParamError {
    fn new(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        ParamError {
            field: field.to_owned(),
            message: format!("{field}: {message}"),
        }
    }
}

const WKT_STRUCT: &str = "google.protobuf.Struct";
const WKT_VALUE: &str = "google.protobuf.Value";
const WKT_LIST: &str = "google.protobuf.ListValue";
const WKT_EMPTY: &str = "google.protobuf.Empty";

/// Validates `json` (a params object; `null`/absent is treated as `{}`) against `desc`
/// and builds the message. `path` is the prefix used in error messages, e.g. `params`.
pub fn to_message(
    desc: &MessageDescriptor,
    json: &Json,
    path: &str,
) -> Result<DynamicMessage, ParamError> {
    let msg = root_to_message(desc, json, path, None)?;
    check_encoded_size(&msg, path)?;
    Ok(msg)
}

/// A forwarded call's params, from one walk of the JSON (issue 34): the message and the
/// paths sent as `null`, `{}` or `[]` (see [`CLEARED_FIELDS_KEY`]).
#[derive(Debug)]
pub struct Request {
    /// The validated message (not yet checked against the encoded size limit: see
    /// [`encode_request`]).
    pub message: DynamicMessage,
    /// JSON paths below the params of the schema fields sent as `null`, `{}` or `[]`,
    /// descending into nested messages but not into lists, maps or free-form JSON
    /// (`Record<string, unknown>` values), e.g. `patch.env`.
    pub cleared: Vec<String>,
}

/// Validates `json` as [`to_message`] does and collects its cleared paths in the same walk;
/// the encoded size is checked by [`encode_request`], which encodes the message once.
pub fn to_request(
    desc: &MessageDescriptor,
    json: &Json,
    path: &str,
) -> Result<Request, ParamError> {
    let mut cleared = Vec::new();
    let mut collect = Cleared {
        out: &mut cleared,
        cut: path.len() + 1,
    };
    let message = root_to_message(desc, json, path, Some(&mut collect))?;
    Ok(Request { message, cleared })
}

/// Encodes `msg` once — the bytes every attempt of a forwarded call sends — and refuses it
/// when it is larger than [`crate::limits::GRPC_REQUEST`], naming its largest field below
/// `path` as [`to_message`] does.
pub fn encode_request(msg: &DynamicMessage, path: &str) -> Result<bytes::Bytes, ParamError> {
    use prost::Message as _;
    let bytes = msg.encode_to_vec();
    if bytes.len() > crate::limits::GRPC_REQUEST {
        return Err(too_big(msg, path));
    }
    Ok(bytes.into())
}

/// Where one walk records cleared fields: `out` gets each path with the first `cut` bytes
/// (the root path and its dot, `params.`) left off.
struct Cleared<'a> {
    out: &'a mut Vec<String>,
    cut: usize,
}

impl Cleared<'_> {
    fn push(&mut self, path: &str) {
        self.out
            .push(path.get(self.cut..).unwrap_or_default().to_owned());
    }
}

fn root_to_message(
    desc: &MessageDescriptor,
    json: &Json,
    path: &str,
    cleared: Option<&mut Cleared>,
) -> Result<DynamicMessage, ParamError> {
    match json {
        Json::Null => object_to_message(desc, &Map::new(), path, cleared),
        Json::Object(map) => object_to_message(desc, map, path, cleared),
        other => Err(ParamError::new(
            path,
            format!("expected an object, got {}", type_name(other)),
        )),
    }
}

/// Refuses a message that encodes larger than [`crate::limits::GRPC_REQUEST`] (what every
/// service decodes), naming its largest field: a request the gateway accepts either reaches
/// its service or is refused here (issue 24 §2).
fn check_encoded_size(msg: &DynamicMessage, path: &str) -> Result<(), ParamError> {
    use prost::Message as _;
    if msg.encoded_len() <= crate::limits::GRPC_REQUEST {
        return Ok(());
    }
    Err(too_big(msg, path))
}

/// The error for a message over [`crate::limits::GRPC_REQUEST`], naming its largest field.
fn too_big(msg: &DynamicMessage, path: &str) -> ParamError {
    use prost::Message as _;
    let max = crate::limits::GRPC_REQUEST;
    let biggest = msg
        .fields()
        .map(|(field, value)| {
            let mut one = DynamicMessage::new(msg.descriptor());
            one.set_field(&field, value.clone());
            (one.encoded_len(), field.json_name().to_owned())
        })
        .max();
    let field = match biggest {
        Some((_, name)) => format!("{path}.{name}"),
        None => path.to_owned(),
    };
    ParamError::new(&field, format!("at most {max} bytes once encoded"))
}

fn type_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn object_to_message(
    desc: &MessageDescriptor,
    map: &Map<String, Json>,
    path: &str,
    mut cleared: Option<&mut Cleared>,
) -> Result<DynamicMessage, ParamError> {
    match desc.full_name() {
        WKT_STRUCT | WKT_VALUE | WKT_LIST | WKT_EMPTY => {
            return wkt_from_json(desc, &Json::Object(map.clone()), path)
        }
        _ => {}
    }
    let mut msg = DynamicMessage::new(desc.clone());
    for (key, value) in map {
        let field = desc
            .get_field_by_json_name(key)
            .or_else(|| desc.get_field_by_name(key));
        let Some(field) = field else {
            let sub = format!("{path}.{key}");
            return Err(ParamError::new(&sub, "unknown field"));
        };
        let sub = format!("{path}.{}", field.json_name());
        if let Some(c) = cleared.as_deref_mut() {
            let empty = match value {
                Json::Null => true,
                Json::Object(m) => m.is_empty(),
                Json::Array(a) => a.is_empty(),
                _ => false,
            };
            if empty {
                c.push(&sub);
            }
        }
        if value.is_null() {
            // `T | null` and absent mean the same on the wire; a required field may not be null.
            if field_rules(&field).required && !field_rules(&field).nullable {
                return Err(ParamError::new(&sub, "is required and may not be null"));
            }
            continue;
        }
        let v = field_value(&field, value, &sub, cleared.as_deref_mut())?;
        msg.set_field(&field, v);
    }
    for field in desc.fields() {
        let rules = field_rules(&field);
        let present = |key: &str| map.get(key).is_some_and(|v| !v.is_null());
        if rules.required && !present(field.json_name()) && !present(field.name()) {
            if rules.nullable && (map.contains_key(field.json_name())) {
                continue;
            }
            return Err(ParamError::new(
                &format!("{path}.{}", field.json_name()),
                "is required",
            ));
        }
    }
    Ok(msg)
}

/// `cleared` follows only into a single nested message (not a list, map or free-form JSON).
fn field_value(
    field: &FieldDescriptor,
    value: &Json,
    path: &str,
    cleared: Option<&mut Cleared>,
) -> Result<Value, ParamError> {
    if field.is_map() {
        let Json::Object(obj) = value else {
            return Err(ParamError::new(
                path,
                format!("expected an object, got {}", type_name(value)),
            ));
        };
        let Kind::Message(entry) = field.kind() else {
            unreachable!("map fields are messages")
        };
        let key_field = entry.map_entry_key_field();
        let value_field = entry.map_entry_value_field();
        let mut out = std::collections::HashMap::new();
        for (k, v) in obj {
            let key = match key_field.kind() {
                Kind::String => MapKey::String(k.clone()),
                Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
                    MapKey::I64(k.parse().map_err(|_| {
                        ParamError::new(path, format!("key {k:?} is not an integer"))
                    })?)
                }
                Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                    MapKey::I32(k.parse().map_err(|_| {
                        ParamError::new(path, format!("key {k:?} is not an integer"))
                    })?)
                }
                Kind::Bool => MapKey::Bool(k == "true"),
                _ => MapKey::String(k.clone()),
            };
            let sub = format!("{path}.{k}");
            out.insert(key, single_value(&value_field, v, &sub, &[], None)?);
        }
        return Ok(Value::Map(out));
    }
    let rules = field_rules(field);
    if rules.json_object {
        return json_object_text(value, path).map(Value::String);
    }
    if field.is_list() {
        let Json::Array(items) = value else {
            return Err(ParamError::new(
                path,
                format!("expected an array, got {}", type_name(value)),
            ));
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let sub = format!("{path}[{i}]");
            out.push(single_value(field, item, &sub, &rules.values, None)?);
        }
        return Ok(Value::List(out));
    }
    single_value(field, value, path, &rules.values, cleared)
}

fn single_value(
    field: &FieldDescriptor,
    value: &Json,
    path: &str,
    allowed: &[String],
    cleared: Option<&mut Cleared>,
) -> Result<Value, ParamError> {
    let wrong =
        |want: &str| ParamError::new(path, format!("expected {want}, got {}", type_name(value)));
    Ok(match field.kind() {
        Kind::String => {
            let Json::String(s) = value else {
                return Err(wrong("a string"));
            };
            if s.len() > crate::limits::STRING_PARAM {
                return Err(ParamError::new(
                    path,
                    format!("at most {} bytes", crate::limits::STRING_PARAM),
                ));
            }
            if !allowed.is_empty() && !allowed.iter().any(|a| a == s) {
                return Err(ParamError::new(
                    path,
                    format!("must be one of {}, got {s:?}", allowed.join(", ")),
                ));
            }
            Value::String(s.clone())
        }
        Kind::Bool => Value::Bool(value.as_bool().ok_or_else(|| wrong("a boolean"))?),
        Kind::Double => Value::F64(value.as_f64().ok_or_else(|| wrong("a number"))?),
        Kind::Float => Value::F32(value.as_f64().ok_or_else(|| wrong("a number"))? as f32),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(integer(value, path)?),
        Kind::Uint64 | Kind::Fixed64 => {
            let i = integer(value, path)?;
            Value::U64(u64::try_from(i).map_err(|_| ParamError::new(path, "must not be negative"))?)
        }
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            let i = integer(value, path)?;
            Value::I32(i32::try_from(i).map_err(|_| ParamError::new(path, "is out of range"))?)
        }
        Kind::Uint32 | Kind::Fixed32 => {
            let i = integer(value, path)?;
            Value::U32(u32::try_from(i).map_err(|_| ParamError::new(path, "is out of range"))?)
        }
        Kind::Bytes => {
            let Json::String(s) = value else {
                return Err(wrong("a string"));
            };
            Value::Bytes(s.clone().into_bytes().into())
        }
        Kind::Enum(e) => match value {
            Json::String(s) => Value::EnumNumber(
                e.get_value_by_name(s)
                    .ok_or_else(|| ParamError::new(path, format!("unknown value {s:?}")))?
                    .number(),
            ),
            Json::Number(n) => Value::EnumNumber(n.as_i64().unwrap_or(0) as i32),
            _ => return Err(wrong("a string")),
        },
        Kind::Message(m) => match m.full_name() {
            WKT_STRUCT | WKT_VALUE | WKT_LIST | WKT_EMPTY => {
                Value::Message(wkt_from_json(&m, value, path)?)
            }
            _ => {
                let Json::Object(obj) = value else {
                    return Err(wrong("an object"));
                };
                Value::Message(object_to_message(&m, obj, path, cleared)?)
            }
        },
    })
}

fn integer(value: &Json, path: &str) -> Result<i64, ParamError> {
    match value {
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                return Ok(i);
            }
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Ok(f as i64),
                _ => Err(ParamError::new(path, "expected an integer")),
            }
        }
        other => Err(ParamError::new(
            path,
            format!("expected an integer, got {}", type_name(other)),
        )),
    }
}

/// gRPC request metadata listing the params a client sent as `null`, `{}` or `[]`
/// (comma-separated JSON paths below `params`, e.g. `patch.env,patch.toolsInclude`).
/// Protobuf cannot tell those from an absent field; a method that must (`mcp.update`
/// clearing a field) reads this.
pub const CLEARED_FIELDS_KEY: &str = "snowpea-cleared-fields";

/// Longest [`CLEARED_FIELDS_KEY`] value the gateway sends, in bytes (paths past it are
/// left out; params this wide are not a real request).
pub const MAX_CLEARED_FIELDS: usize = 2048;

/// Deepest free-form JSON (`Record<string, unknown>` fields: Struct, Value, ListValue) a
/// params object may carry, counted in nested objects and arrays. Each JSON level costs
/// about three protobuf message levels, and services decode with prost's recursion limit
/// of 100: anything deeper would pass here and fail in the service as `internal`.
pub const MAX_JSON_DEPTH: usize = 24;

/// Levels of nested objects/arrays in `v` (a scalar is 0), stopping once past `limit`.
fn json_depth(v: &Json, limit: usize) -> usize {
    let children: Box<dyn Iterator<Item = &Json>> = match v {
        Json::Object(m) => Box::new(m.values()),
        Json::Array(a) => Box::new(a.iter()),
        _ => return 0,
    };
    if limit == 0 {
        return 1;
    }
    1 + children
        .map(|c| json_depth(c, limit - 1))
        .max()
        .unwrap_or(0)
}

/// The text a `json_object` field stores for the params value `value` (an object, checked
/// like a `google.protobuf.Struct`: at most [`MAX_JSON_DEPTH`] levels deep).
fn json_object_text(value: &Json, path: &str) -> Result<String, ParamError> {
    if !value.is_object() {
        return Err(ParamError::new(
            path,
            format!("expected an object, got {}", type_name(value)),
        ));
    }
    if json_depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH {
        return Err(ParamError::new(
            path,
            format!("is nested more than {MAX_JSON_DEPTH} levels deep"),
        ));
    }
    Ok(value.to_string())
}

/// The JSON a `json_object` field holds: `None` when its text is empty (an unset field),
/// else the parsed text, numbers exactly as written. Text that is not JSON (a service
/// defect: services write it with `serde_json`) is written as a JSON string rather than
/// dropped.
pub fn json_object_value(text: &str) -> Option<Json> {
    if text.is_empty() {
        return None;
    }
    Some(serde_json::from_str(text).unwrap_or_else(|_| Json::String(text.to_owned())))
}

/// Builds a well-known-type message (Struct, Value, ListValue, Empty) from JSON.
fn wkt_from_json(
    desc: &MessageDescriptor,
    value: &Json,
    path: &str,
) -> Result<DynamicMessage, ParamError> {
    if json_depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH {
        return Err(ParamError::new(
            path,
            format!("is nested more than {MAX_JSON_DEPTH} levels deep"),
        ));
    }
    match desc.full_name() {
        WKT_STRUCT if !value.is_object() => Err(ParamError::new(
            path,
            format!("expected an object, got {}", type_name(value)),
        )),
        WKT_LIST if !value.is_array() => Err(ParamError::new(
            path,
            format!("expected an array, got {}", type_name(value)),
        )),
        _ => DynamicMessage::deserialize(desc.clone(), value)
            .map_err(|e| ParamError::new(path, e.to_string())),
    }
}

/// Writes a message as protocol JSON. Unset fields with presence are omitted; other
/// fields are written even when default (`ok: false`, `items: []`), so required
/// result fields are always there.
pub fn to_json(msg: &DynamicMessage) -> Json {
    match msg.descriptor().full_name() {
        WKT_STRUCT | WKT_VALUE | WKT_LIST => return wkt_to_json(msg),
        WKT_EMPTY => return Json::Object(Map::new()),
        _ => {}
    }
    let mut out = Map::new();
    for field in msg.descriptor().fields() {
        if field.supports_presence() && !msg.has_field(&field) {
            continue;
        }
        let value = msg.get_field(&field);
        if crate::schema::is_json_object(&field) {
            if let Some(json) = value.as_str().and_then(json_object_value) {
                out.insert(field.json_name().to_owned(), json);
            }
            continue;
        }
        out.insert(
            field.json_name().to_owned(),
            value_to_json(&field, &value, Style::Result),
        );
    }
    Json::Object(out)
}

/// Which writer a value belongs to: a result ([`to_json`]) or a typed notification/event
/// payload ([`crate::typed::wire_json`]). They differ in doubles and nested messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// Doubles integral → integer ([`number`]); nested messages by [`to_json`].
    Result,
    /// Doubles as serde writes an `f64` (`100.0`); nested messages by `wire_json`.
    Wire,
}

/// One field value as JSON in the given [`Style`].
pub(crate) fn value_to_json(field: &FieldDescriptor, value: &Value, style: Style) -> Json {
    match value {
        Value::List(items) => Json::Array(
            items
                .iter()
                .map(|v| value_to_json(field, v, style))
                .collect(),
        ),
        Value::Map(map) => {
            let mut out = Map::new();
            let Kind::Message(entry) = field.kind() else {
                return Json::Null;
            };
            let vf = entry.map_entry_value_field();
            for (k, v) in map {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(i) => i.to_string(),
                    MapKey::I64(i) => i.to_string(),
                    MapKey::U32(i) => i.to_string(),
                    MapKey::U64(i) => i.to_string(),
                };
                out.insert(key, value_to_json(&vf, v, style));
            }
            Json::Object(sorted_keys(out))
        }
        Value::Bool(b) => Json::Bool(*b),
        Value::I32(i) => Json::from(*i),
        Value::I64(i) => Json::from(*i),
        Value::U32(i) => Json::from(*i),
        Value::U64(i) => Json::from(*i),
        Value::F32(f) => double(f64::from(*f), style),
        Value::F64(f) => double(*f, style),
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => Json::String(String::from_utf8_lossy(b).into_owned()),
        Value::EnumNumber(n) => match field.kind() {
            Kind::Enum(e) => e
                .get_value(*n)
                .map(|v| Json::String(v.name().to_owned()))
                .unwrap_or(Json::from(*n)),
            _ => Json::from(*n),
        },
        Value::Message(m) => match style {
            Style::Result => to_json(m),
            Style::Wire => crate::typed::wire_json(m),
        },
    }
}

fn double(f: f64, style: Style) -> Json {
    match style {
        Style::Result => number(f),
        // serde's `f64` form; non-finite becomes null.
        Style::Wire => Number::from_f64(f).map(Json::Number).unwrap_or(Json::Null),
    }
}

/// `m` with its keys in sorted order. Protobuf maps and `Struct`s are hash maps, and
/// `serde_json` keeps insertion order in this workspace (`preserve_order`): without this
/// the wire order of a map's keys would change from one call to the next.
pub(crate) fn sorted_keys(m: Map<String, Json>) -> Map<String, Json> {
    let mut fields: Vec<(String, Json)> = m.into_iter().collect();
    fields.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    fields.into_iter().collect()
}

/// A JSON number, written as an integer when it is integral and exactly representable.
pub fn number(f: f64) -> Json {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        Json::from(f as i64)
    } else {
        Number::from_f64(f).map(Json::Number).unwrap_or(Json::Null)
    }
}

fn wkt_to_json(msg: &DynamicMessage) -> Json {
    let desc = msg.descriptor();
    match desc.full_name() {
        WKT_STRUCT => {
            let mut out = Map::new();
            if let Some(f) = desc.get_field_by_name("fields") {
                if let Value::Map(map) = &*msg.get_field(&f) {
                    for (k, v) in map {
                        if let (MapKey::String(k), Value::Message(v)) = (k, v) {
                            out.insert(k.clone(), wkt_to_json(v));
                        }
                    }
                }
            }
            Json::Object(sorted_keys(out))
        }
        WKT_LIST => {
            let mut out = Vec::new();
            if let Some(f) = desc.get_field_by_name("values") {
                if let Value::List(items) = &*msg.get_field(&f) {
                    for v in items {
                        if let Value::Message(v) = v {
                            out.push(wkt_to_json(v));
                        }
                    }
                }
            }
            Json::Array(out)
        }
        WKT_VALUE => {
            for field in desc.fields() {
                if !msg.has_field(&field) {
                    continue;
                }
                return match (field.name(), &*msg.get_field(&field)) {
                    ("null_value", _) => Json::Null,
                    ("number_value", Value::F64(f)) => number(*f),
                    ("string_value", Value::String(s)) => Json::String(s.clone()),
                    ("bool_value", Value::Bool(b)) => Json::Bool(*b),
                    ("struct_value" | "list_value", Value::Message(m)) => wkt_to_json(m),
                    _ => Json::Null,
                };
            }
            Json::Null
        }
        _ => to_json(msg),
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
