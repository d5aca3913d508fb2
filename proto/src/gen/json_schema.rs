//! `docs/protocol.json` (served at `GET /protocol.json`): the protocol as data, with a JSON
//! Schema (draft 2020-12 style) for every params, result, notification and event payload.
//!
//! Messages are closed objects (`additionalProperties: false`, like the gateway's validation);
//! string unions are `enum`; `T | null` adds `"null"` to `type`; integers are `integer`;
//! `Struct` is `{"type": "object"}`, `Value` is `{}`, maps use `additionalProperties`. Object
//! keys are sorted at every level so the file is byte-stable. Each method carries
//! `implemented` from [`crate::implemented`] (the declaration the gateway answers
//! `not_implemented` from); `capabilities` is the protocol's whole list, of which system.hello
//! advertises the subset the running daemon implements.

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{json, Map, Value};

use super::types::{first_sentence, one_line, own_doc, sorted_fields};
use super::TRANSPORT;
use crate::implemented::is_implemented;
use crate::schema::{field_rules, Direction, Schema};
use crate::{PROTOCOL_VERSION, WS_PATH};

/// The whole `docs/protocol.json` document.
pub fn render(schema: &Schema) -> Value {
    let mut methods = Map::new();
    for m in schema.methods.values() {
        let mut entry = Map::new();
        entry.insert("direction".into(), json!(direction_name(m.direction)));
        entry.insert("summary".into(), json!(first_sentence(&m.description())));
        entry.insert("description".into(), json!(one_line(&m.description())));
        if let Some(since) = &m.since {
            entry.insert("since".into(), json!(since));
        }
        entry.insert("owner".into(), json!(m.owner));
        entry.insert("implemented".into(), json!(is_implemented(&m.name)));
        entry.insert("params".into(), message_schema(schema, &m.input(), true));
        entry.insert("result".into(), message_schema(schema, &m.output(), true));
        methods.insert(m.name.clone(), Value::Object(entry));
    }

    let mut notifications = Map::new();
    for (name, m) in &schema.notifications {
        let mut entry = Map::new();
        if let Some(doc) = own_doc(schema, m) {
            entry.insert("description".into(), json!(doc));
        }
        entry.insert("params".into(), message_schema(schema, m, false));
        notifications.insert(name.clone(), Value::Object(entry));
    }

    let event_kinds: Map<String, Value> = schema
        .event_kinds
        .iter()
        .map(|(kind, m)| (kind.clone(), message_schema(schema, m, true)))
        .collect();

    let error_codes: Map<String, Value> = schema
        .error_codes
        .iter()
        .map(|c| {
            (
                c.wire.clone(),
                json!({"jsonrpcCode": c.jsonrpc_code, "meaning": one_line(&c.description())}),
            )
        })
        .collect();

    let http: Vec<Value> = TRANSPORT
        .iter()
        .filter(|t| t.scheme == "http")
        .map(|t| json!({"method": "GET", "path": t.path, "purpose": t.purpose}))
        .collect();

    sort_keys(json!({
        "protocolVersion": PROTOCOL_VERSION,
        "transport": {"wsPath": WS_PATH, "http": http},
        "capabilities": schema.capabilities,
        "methods": methods,
        "notifications": notifications,
        "sessionEventKinds": event_kinds,
        "errorCodes": error_codes,
    }))
}

/// The wire name of a direction in `protocol.json`.
pub fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::ClientToServer => "clientToServer",
        Direction::ServerToClient => "serverToClient",
        Direction::ClientNotification => "clientNotification",
    }
}

/// The JSON Schema of a message: a closed object. `with_doc` adds the message's own
/// description (nested messages are described by the field that holds them).
pub fn message_schema(schema: &Schema, m: &MessageDescriptor, with_doc: bool) -> Value {
    message_schema_in(schema, m, with_doc, &mut Vec::new())
}

fn message_schema_in(
    schema: &Schema,
    m: &MessageDescriptor,
    with_doc: bool,
    stack: &mut Vec<String>,
) -> Value {
    match m.full_name() {
        "google.protobuf.Struct" => return json!({"type": "object"}),
        "google.protobuf.Value" => return json!({}),
        "google.protobuf.ListValue" => return json!({"type": "array"}),
        _ => {}
    }
    if stack.iter().any(|s| s == m.full_name()) {
        return json!({});
    }
    stack.push(m.full_name().to_owned());
    let mut properties = Map::new();
    let mut required = Vec::new();
    for f in sorted_fields(m) {
        let mut s = field_schema(schema, &f, stack);
        let doc = one_line(&schema.field_doc(&f));
        if !doc.is_empty() {
            if let Value::Object(o) = &mut s {
                o.insert("description".into(), json!(doc));
            }
        }
        if field_rules(&f).required {
            required.push(f.json_name().to_owned());
        }
        properties.insert(f.json_name().to_owned(), s);
    }
    stack.pop();
    let mut out = Map::new();
    out.insert("type".into(), json!("object"));
    out.insert("properties".into(), Value::Object(properties));
    out.insert("required".into(), json!(required));
    out.insert("additionalProperties".into(), json!(false));
    if with_doc {
        if let Some(doc) = own_doc(schema, m) {
            out.insert("description".into(), json!(doc));
        }
    }
    Value::Object(out)
}

/// The schema of one field: its value type, wrapped in an array/map, nullable when allowed.
fn field_schema(schema: &Schema, f: &FieldDescriptor, stack: &mut Vec<String>) -> Value {
    let rules = field_rules(f);
    let base = if f.is_map() {
        let Kind::Message(entry) = f.kind() else {
            unreachable!("map fields are map-entry messages")
        };
        let value = entry.map_entry_value_field();
        let values = field_rules(&value).values;
        json!({
            "type": "object",
            "additionalProperties": element_schema(schema, &value, &values, stack),
        })
    } else if rules.json_object {
        // Free-form JSON carried as text: the same schema as a `google.protobuf.Struct`.
        json!({"type": "object"})
    } else if f.is_list() {
        json!({"type": "array", "items": element_schema(schema, f, &rules.values, stack)})
    } else {
        element_schema(schema, f, &rules.values, stack)
    };
    if rules.nullable {
        nullable(base)
    } else {
        base
    }
}

fn element_schema(
    schema: &Schema,
    f: &FieldDescriptor,
    values: &[String],
    stack: &mut Vec<String>,
) -> Value {
    match f.kind() {
        Kind::String if !values.is_empty() => json!({"type": "string", "enum": values}),
        Kind::String => json!({"type": "string"}),
        Kind::Bytes => json!({"type": "string", "contentEncoding": "base64"}),
        Kind::Bool => json!({"type": "boolean"}),
        Kind::Double | Kind::Float => json!({"type": "number"}),
        Kind::Int32
        | Kind::Int64
        | Kind::Uint32
        | Kind::Uint64
        | Kind::Sint32
        | Kind::Sint64
        | Kind::Fixed32
        | Kind::Fixed64
        | Kind::Sfixed32
        | Kind::Sfixed64 => json!({"type": "integer"}),
        Kind::Enum(e) => {
            let names: Vec<String> = e.values().map(|v| v.name().to_owned()).collect();
            json!({"type": "string", "enum": names})
        }
        Kind::Message(m) => message_schema_in(schema, &m, false, stack),
    }
}

/// Lets a schema also accept `null`: adds `"null"` to `type` (and to `enum`); `{}` already
/// accepts it.
fn nullable(mut s: Value) -> Value {
    let Value::Object(o) = &mut s else {
        return s;
    };
    if let Some(Value::String(t)) = o.get("type").cloned() {
        o.insert("type".into(), json!([t, "null"]));
    }
    if let Some(Value::Array(values)) = o.get_mut("enum") {
        values.push(Value::Null);
    }
    s
}

/// Rebuilds a value with every object's keys in sorted order (whatever `serde_json`'s map
/// ordering feature is), so the serialised file is deterministic.
pub fn sort_keys(v: Value) -> Value {
    match v {
        Value::Object(o) => {
            let mut entries: Vec<(String, Value)> = o.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}
