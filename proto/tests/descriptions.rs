//! Every field and message of the public protocol has a description, so the SDK's doc
//! comments and `docs/protocol.json` describe every shape (issue 13 §1).
//!
//! "Public" is every message reachable from a method's params or result, a notification or
//! a `session.event` kind. A field the spec's table leaves undescribed still gets a comment,
//! marked `(snowpea.rpc.v1.spec_undescribed) = true` so `docs/protocol.md` keeps the spec's
//! empty cell.

use std::collections::BTreeSet;

use prost_reflect::{Kind, MessageDescriptor};
use snowpea_proto::schema::{schema, Schema};

/// Every message reachable from a method's params/result, a notification or an event kind.
fn public_messages(s: &Schema) -> Vec<MessageDescriptor> {
    let mut roots: Vec<MessageDescriptor> = Vec::new();
    for m in s.methods.values() {
        roots.push(m.input());
        roots.push(m.output());
    }
    roots.extend(s.notifications.values().cloned());
    roots.extend(s.event_kinds.values().cloned());
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    while let Some(m) = roots.pop() {
        if m.full_name().starts_with("google.protobuf.") || !seen.insert(m.full_name().to_owned()) {
            continue;
        }
        for f in m.fields() {
            if let Kind::Message(inner) = f.kind() {
                if inner.is_map_entry() {
                    if let Kind::Message(v) = inner.map_entry_value_field().kind() {
                        roots.push(v);
                    }
                } else {
                    roots.push(inner);
                }
            }
        }
        out.push(m);
    }
    out.sort_by(|a, b| a.full_name().cmp(b.full_name()));
    out
}

/// spec2proto's placeholder for a nested message: not a description.
fn is_placeholder(doc: &str) -> bool {
    doc.trim().is_empty() || doc.starts_with("Inline object of ")
}

#[test]
fn every_public_field_and_message_is_described() {
    let s = schema();
    let mut missing = Vec::new();
    let mut fields = 0usize;
    for m in public_messages(s) {
        if is_placeholder(&s.message_doc(&m)) {
            missing.push(format!("message {}", m.full_name()));
        }
        for f in m.fields() {
            fields += 1;
            if s.field_doc(&f).trim().is_empty() {
                missing.push(format!("field {}", f.full_name()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {fields} public fields and their messages have no description: give each a leading \
         comment from the spec's tables (the field that holds a nested message describes it):\n{}",
        missing.len(),
        missing.join("\n")
    );
}
