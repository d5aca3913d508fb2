//! The spec's TypeScript-ish field types and table rows, derived from the descriptor.
//!
//! The spec (`snowpea-protocol-1.25.0.md`) prints every field as `field / type / required /
//! description`, with types such as `string | null`, `"a" | "b"`, `T[]`,
//! `Record<string, unknown>` and nested messages inlined as `{ a?: T; b: U; }`. This module
//! renders exactly that notation (used verbatim by the Markdown and the TypeScript output), and
//! prefers a field's `// spec type:` comment when it has one (Struct, Value and map fields, whose
//! proto type loses the spec's precision).

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

use crate::schema::{field_rules, Schema};

/// One row of a spec field table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// JSON field name (camelCase).
    pub field: String,
    /// TypeScript-ish type, as the spec prints it.
    pub ty: String,
    /// The spec's "required" column.
    pub required: bool,
    /// Description (the field's leading comment, joined into one line).
    pub description: String,
}

/// The message's documented fields in the spec's order: sorted by JSON name (byte order).
/// `wire_only` fields (sent, but not in the spec's tables) are left out.
pub fn sorted_fields(m: &MessageDescriptor) -> Vec<FieldDescriptor> {
    let mut fields: Vec<FieldDescriptor> =
        m.fields().filter(|f| !field_rules(f).wire_only).collect();
    fields.sort_by(|a, b| a.json_name().cmp(b.json_name()));
    fields
}

/// The table rows of a params/result/notification/event message (nested messages inline).
pub fn rows(schema: &Schema, m: &MessageDescriptor) -> Vec<Row> {
    rows_named(schema, m, None)
}

/// Full proto name → TypeScript name of the messages rendered by name instead of inline
/// (the SDK's named domain types, e.g. `snowpea.scheduler.v1.Job` → `Job`).
pub type Names = std::collections::BTreeMap<String, String>;

/// [`rows`], with the messages in `names` written by their name.
pub fn rows_named(schema: &Schema, m: &MessageDescriptor, names: Option<&Names>) -> Vec<Row> {
    sorted_fields(m)
        .iter()
        .map(|f| Row {
            field: f.json_name().to_owned(),
            ty: ts_type_in(schema, f, &mut Vec::new(), names),
            required: field_rules(f).required,
            description: one_line(&schema.field_doc(f)),
        })
        .collect()
}

/// The TypeScript type of a field, `| null` included when the field is nullable.
pub fn ts_type(schema: &Schema, f: &FieldDescriptor) -> String {
    ts_type_in(schema, f, &mut Vec::new(), None)
}

fn ts_type_in(
    schema: &Schema,
    f: &FieldDescriptor,
    stack: &mut Vec<String>,
    names: Option<&Names>,
) -> String {
    if let Some(verbatim) = schema.spec_type_of(f) {
        return verbatim;
    }
    let rules = field_rules(f);
    let base = if f.is_map() {
        let Kind::Message(entry) = f.kind() else {
            unreachable!("map fields are map-entry messages")
        };
        let value = entry.map_entry_value_field();
        format!(
            "Record<string, {}>",
            element_type(schema, &value, &field_rules(&value).values, stack, names)
        )
    } else if rules.json_object {
        "Record<string, unknown>".to_owned()
    } else {
        let elem = match (names, &rules.value_set) {
            // A named value list is written by its name where domain types are (the SDK).
            (Some(_), Some(set)) => value_set_name(set).to_owned(),
            _ => element_type(schema, f, &rules.values, stack, names),
        };
        if f.is_list() {
            array_of(&elem)
        } else {
            elem
        }
    };
    if rules.nullable {
        format!("{base} | null")
    } else {
        base
    }
}

/// `T[]` for a plain identifier, `(T)[]` for anything compound — the spec's spelling.
fn array_of(elem: &str) -> String {
    if elem.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        format!("{elem}[]")
    } else {
        format!("({elem})[]")
    }
}

/// The TypeScript name of a named value list: the enum's own name
/// (`snowpea.session.v1.PermissionMode` → `PermissionMode`).
pub fn value_set_name(full: &str) -> &str {
    full.rsplit('.').next().unwrap_or(full)
}

/// A string union `"a" | "b"`.
pub fn string_union(values: &[String]) -> String {
    values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The type of one value of a field (the element of a list, ignoring nullability).
fn element_type(
    schema: &Schema,
    f: &FieldDescriptor,
    values: &[String],
    stack: &mut Vec<String>,
    names: Option<&Names>,
) -> String {
    match f.kind() {
        Kind::String if !values.is_empty() => string_union(values),
        Kind::String | Kind::Bytes => "string".to_owned(),
        Kind::Bool => "boolean".to_owned(),
        Kind::Double
        | Kind::Float
        | Kind::Int32
        | Kind::Int64
        | Kind::Uint32
        | Kind::Uint64
        | Kind::Sint32
        | Kind::Sint64
        | Kind::Fixed32
        | Kind::Fixed64
        | Kind::Sfixed32
        | Kind::Sfixed64 => "number".to_owned(),
        Kind::Enum(e) => {
            let names: Vec<String> = e.values().map(|v| v.name().to_owned()).collect();
            string_union(&names)
        }
        Kind::Message(m) => match names.and_then(|n| n.get(m.full_name())) {
            Some(name) => name.clone(),
            None => message_type(schema, &m, stack, names),
        },
    }
}

/// The inline type of a message: well-known types by their JSON shape, everything else as
/// `{ a?: T; b: U; }` (recursively, fields sorted like the spec).
fn message_type(
    schema: &Schema,
    m: &MessageDescriptor,
    stack: &mut Vec<String>,
    names: Option<&Names>,
) -> String {
    match m.full_name() {
        "google.protobuf.Struct" => return "Record<string, unknown>".to_owned(),
        "google.protobuf.Value" => return "unknown".to_owned(),
        "google.protobuf.ListValue" => return "unknown[]".to_owned(),
        "google.protobuf.Empty" => return "Record<string, never>".to_owned(),
        _ => {}
    }
    if stack.iter().any(|s| s == m.full_name()) {
        // A recursive message cannot be inlined; the spec has none, so stay sound.
        return "unknown".to_owned();
    }
    stack.push(m.full_name().to_owned());
    let mut out = String::from("{ ");
    for f in sorted_fields(m) {
        let optional = if field_rules(&f).required { "" } else { "?" };
        let ty = ts_type_in(schema, &f, stack, names);
        out.push_str(&format!("{}{optional}: {ty}; ", f.json_name()));
    }
    out.push('}');
    stack.pop();
    out
}

/// A description on one line (paragraph breaks become spaces), as the spec's tables print it.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first sentence of a description (the whole text when it has only one).
///
/// A sentence ends at `. ` followed by an upper-case letter; `e.g. ` and `i.e. ` do not end one.
pub fn first_sentence(text: &str) -> String {
    let text = one_line(text);
    let bytes = text.as_bytes();
    for (i, _) in text.match_indices(". ") {
        let before = &text[..i];
        if before.ends_with("e.g") || before.ends_with("i.e") {
            continue;
        }
        if bytes.get(i + 2).is_some_and(u8::is_ascii_uppercase) {
            return text[..=i].to_owned();
        }
    }
    text
}

/// PascalCase of a dotted protocol name: `session.create` → `SessionCreate`,
/// `job.nextRunForClient` → `JobNextRunForClient`, `team.task.update` → `TeamTaskUpdate`.
pub fn pascal(name: &str) -> String {
    name.split(['.', '_', '-'])
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(c) => c.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// A message's own description, or `None` when it is only spec2proto's boilerplate
/// ("Params of `x`.", "Result of `x`.", "Payload of the `x` session event.").
pub fn own_doc(schema: &Schema, m: &MessageDescriptor) -> Option<String> {
    let doc = one_line(&schema.message_doc(m));
    let boilerplate = ["Params of ", "Result of ", "Payload of the "]
        .iter()
        .any(|p| doc.starts_with(p) && doc.matches('`').count() == 2 && !doc.contains(". "));
    (!doc.is_empty() && !boilerplate).then_some(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sentence_skips_abbreviations() {
        assert_eq!(
            first_sentence("Continue a chat, e.g. after a hand-back (1.8.0). A running turn."),
            "Continue a chat, e.g. after a hand-back (1.8.0)."
        );
        assert_eq!(first_sentence("One sentence only."), "One sentence only.");
    }

    #[test]
    fn pascal_joins_segments() {
        assert_eq!(pascal("job.nextRunForClient"), "JobNextRunForClient");
        assert_eq!(pascal("team.task.update"), "TeamTaskUpdate");
    }

    #[test]
    fn arrays_parenthesise_compound_elements() {
        assert_eq!(array_of("string"), "string[]");
        assert_eq!(array_of("\"a\" | \"b\""), "(\"a\" | \"b\")[]");
        assert_eq!(array_of("{ a: string; }"), "({ a: string; })[]");
    }
}
