//! Typed notifications and `session.event` payloads (issue 13 §2).
//!
//! `build.rs` implements [`Notification`] for every message with the
//! `snowpea.rpc.v1.notification` option and [`SessionEventPayload`] for every message with
//! the `snowpea.rpc.v1.event_kind` option, so a notification or event is built as its
//! generated prost message — a misspelt or missing field is a compile error — and encoded
//! here to the protocol's JSON:
//!
//! * field names in camelCase (`json_name`), 64-bit integers as JSON numbers, doubles as
//!   serde writes an `f64` (`12.5`, `100.0`), free-form `Struct`/`Value` fields as their JSON
//!   with integral numbers as integers;
//! * a field that holds no value follows its `snowpea.rpc.v1.unset` option
//!   ([`Unset`]): by default a field with presence is left out and any other field is
//!   written with its default; `UNSET_OMIT` leaves it out, `UNSET_NULL` writes `null`.
//!
//! A free-form field (`Struct`/`Value`, e.g. a tool call's `args`) whose value the daemon
//! already holds as JSON is written verbatim with the `*_with` encoders ([`FreeForm`]): a
//! `Struct` keeps numbers as `f64`, so integers beyond 2^53 and `2.0` would not survive a
//! round trip through it.
//! A `json_object` field (option `snowpea.rpc.v1.json_object`, free-form JSON carried as its
//! text) needs none of that: it is written as the object its text holds, exactly.
//!
//! [`NOTIFICATIONS`] and [`EVENT_KINDS`] list every implementation (one per declared
//! notification and event kind); a test walks the descriptor against them.

use std::sync::LazyLock;

use prost_reflect::{DynamicMessage, ExtensionDescriptor, FieldDescriptor, ReflectMessage};
use serde_json::{Map, Value as Json};

use crate::descriptor_pool;
use crate::json::{value_to_json, Style};

/// The params of a server→client JSON-RPC notification (a message with the
/// `snowpea.rpc.v1.notification` option). Implemented by `build.rs` for each one.
pub trait Notification: prost::Message + Default {
    /// JSON-RPC method, e.g. `job.event`.
    const METHOD: &'static str;
    /// Full proto name of the params message, e.g. `snowpea.scheduler.v1.JobEventNotification`.
    const MESSAGE: &'static str;

    /// The params object as the protocol writes it (see the module docs).
    fn to_params(&self) -> Json {
        encode(self, Self::MESSAGE)
    }

    /// [`Notification::to_params`] with the free-form fields of `free` written verbatim.
    fn to_params_with(&self, free: FreeForm<'_>) -> Json {
        encode_with(self, Self::MESSAGE, free)
    }
}

/// The params of a server→client JSON-RPC request (the input of an rpc with direction
/// `SERVER_TO_CLIENT`, e.g. `approval.request`). Implemented by `build.rs` for each one.
pub trait ServerRequest: prost::Message + Default {
    /// JSON-RPC method, e.g. `approval.request`.
    const METHOD: &'static str;
    /// Full proto name of the params message, e.g. `snowpea.session.v1.ApprovalRequest`.
    const MESSAGE: &'static str;

    /// The params object as the protocol writes it (see the module docs), with the
    /// free-form fields of `free` written verbatim.
    fn to_request_params(&self, free: FreeForm<'_>) -> Json {
        encode_with(self, Self::MESSAGE, free)
    }
}

/// The payload of a `session.event` kind (a message with the `snowpea.rpc.v1.event_kind`
/// option). Implemented by `build.rs` for each one.
pub trait SessionEventPayload: prost::Message + Default {
    /// Event kind, e.g. `turn.done`.
    const KIND: &'static str;
    /// Full proto name of the payload message, e.g. `snowpea.session.v1.TurnDoneEvent`.
    const MESSAGE: &'static str;

    /// The payload object as the protocol writes it (see the module docs).
    fn to_payload(&self) -> Json {
        encode(self, Self::MESSAGE)
    }

    /// [`SessionEventPayload::to_payload`] with the free-form fields of `free` written
    /// verbatim.
    fn to_payload_with(&self, free: FreeForm<'_>) -> Json {
        encode_with(self, Self::MESSAGE, free)
    }
}

/// Free-form fields written verbatim: `(pointer, value)` pairs, the pointer naming the
/// field by its JSON names from the message's root, e.g. `/args` or `/request/args`. Each
/// must name a `google.protobuf.Struct`/`Value`/`ListValue` field or a `json_object` field
/// (see [`encode_with`]).
pub type FreeForm<'a> = &'a [(&'static str, Json)];

/// One typed notification or event kind, as listed in [`NOTIFICATIONS`] / [`EVENT_KINDS`].
#[derive(Debug, Clone, Copy)]
pub struct Constructor {
    /// JSON-RPC method (notifications) or event kind (session events).
    pub name: &'static str,
    /// Full proto name of the message.
    pub message: &'static str,
    /// Encodes the message's default value through its trait implementation.
    pub encode_default: fn() -> Json,
}

/// [`Notification::to_params`] of `N::default()` (for [`NOTIFICATIONS`]).
pub fn encode_default_notification<N: Notification>() -> Json {
    N::default().to_params()
}

/// [`SessionEventPayload::to_payload`] of `E::default()` (for [`EVENT_KINDS`]).
pub fn encode_default_event<E: SessionEventPayload>() -> Json {
    E::default().to_payload()
}

include!(concat!(env!("OUT_DIR"), "/snowpea_typed.rs"));

/// How a field that holds no value is written (option `snowpea.rpc.v1.unset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unset {
    /// With presence: left out; without: written with its default.
    Default,
    /// Left out.
    Omit,
    /// Written as `null`.
    Null,
}

/// The `snowpea.rpc.v1.unset` rule of a field.
pub fn unset_rule(field: &FieldDescriptor) -> Unset {
    static EXT: LazyLock<Option<ExtensionDescriptor>> =
        LazyLock::new(|| descriptor_pool().get_extension_by_name("snowpea.rpc.v1.unset"));
    let Some(ext) = EXT.as_ref() else {
        return Unset::Default;
    };
    let options = field.options();
    if !options.has_extension(ext) {
        return Unset::Default;
    }
    match options.get_extension(ext).as_enum_number() {
        Some(1) => Unset::Omit,
        Some(2) => Unset::Null,
        _ => Unset::Default,
    }
}

/// Encodes a generated prost message, whose proto full name is `message`, as the
/// protocol's JSON (see the module docs).
///
/// # Panics
/// When `message` is not in the embedded descriptor or does not describe `msg`: both come
/// from the same `.proto` through `build.rs`, so this is a build defect, not input.
pub fn encode<M: prost::Message>(msg: &M, message: &str) -> Json {
    let desc = descriptor_pool()
        .get_message_by_name(message)
        .unwrap_or_else(|| panic!("{message} is in the embedded descriptor"));
    let dynamic = DynamicMessage::decode(desc, msg.encode_to_vec().as_slice())
        .unwrap_or_else(|e| panic!("{message} decodes from its own prost encoding: {e}"));
    wire_json(&dynamic)
}

/// [`encode`], then each free-form field of `free` set to its JSON verbatim (see
/// [`FreeForm`]; a message field on the way that was left out is written as an object).
///
/// # Panics
/// When a pointer of `free` does not name a free-form field of `message` through singular
/// message fields: the pointers are literals of the calling code, so this is a defect of
/// that code, caught by its tests.
pub fn encode_with<M: prost::Message>(msg: &M, message: &str, free: FreeForm<'_>) -> Json {
    let mut out = encode(msg, message);
    let root = descriptor_pool()
        .get_message_by_name(message)
        .unwrap_or_else(|| panic!("{message} is in the embedded descriptor"));
    for (pointer, value) in free {
        let mut desc = root.clone();
        let mut at = &mut out;
        let segments: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
        for (i, segment) in segments.iter().enumerate() {
            let field = desc
                .get_field_by_json_name(segment)
                .unwrap_or_else(|| panic!("{message} has no field {segment:?} ({pointer})"));
            if i + 1 == segments.len() && crate::schema::field_rules(&field).json_object {
                let obj = at.as_object_mut().unwrap_or_else(|| {
                    panic!("{message}{pointer}: parent of {segment:?} is an object")
                });
                obj.insert(field.json_name().to_owned(), value.clone());
                break;
            }
            let prost_reflect::Kind::Message(m) = field.kind() else {
                panic!("{message}{pointer}: {segment:?} is not a message field");
            };
            assert!(
                !field.is_list() && !field.is_map(),
                "{message}{pointer}: {segment:?} is a list or map"
            );
            let obj = at.as_object_mut().unwrap_or_else(|| {
                panic!("{message}{pointer}: parent of {segment:?} is an object")
            });
            if i + 1 == segments.len() {
                assert!(
                    matches!(
                        m.full_name(),
                        "google.protobuf.Struct"
                            | "google.protobuf.Value"
                            | "google.protobuf.ListValue"
                    ),
                    "{message}{pointer} is not a free-form field"
                );
                obj.insert(field.json_name().to_owned(), value.clone());
                break;
            }
            at = obj
                .entry(field.json_name().to_owned())
                .or_insert_with(|| Json::Object(Map::new()));
            desc = m;
        }
    }
    out
}

/// A dynamic message as notification/event JSON (see the module docs).
pub fn wire_json(msg: &DynamicMessage) -> Json {
    let desc = msg.descriptor();
    if desc.full_name().starts_with("google.protobuf.") {
        return crate::json::to_json(msg);
    }
    let mut out = Map::new();
    for field in desc.fields() {
        let json_object = crate::schema::is_json_object(&field);
        if json_object {
            // Free-form JSON carried as text: written as the object it holds, verbatim.
            let value = msg.get_field(&field);
            if let Some(json) = value.as_str().and_then(crate::json::json_object_value) {
                out.insert(field.json_name().to_owned(), json);
                continue;
            }
        }
        if json_object || !msg.has_field(&field) {
            match unset_rule(&field) {
                Unset::Omit => continue,
                Unset::Null => {
                    out.insert(field.json_name().to_owned(), Json::Null);
                    continue;
                }
                // Empty text is an unset field: left out, like an unset `Struct`.
                Unset::Default if json_object || field.supports_presence() => continue,
                Unset::Default => {}
            }
        }
        let value = msg.get_field(&field);
        out.insert(
            field.json_name().to_owned(),
            value_to_json(&field, &value, Style::Wire),
        );
    }
    Json::Object(out)
}

#[cfg(test)]
#[path = "typed_tests.rs"]
mod tests;
