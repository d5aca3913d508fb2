//! `docs/protocol.md`: the human protocol reference, with the same sections and tables as the
//! spec (`snowpea-protocol-1.25.0.md`): Transport, Handshake, capabilities, Method index (plus
//! a status column from [`crate::implemented`]),
//! Methods (Params/Result tables), Notifications, session.event kinds and Error codes.
//!
//! Tables are GitHub pipe tables: `|` inside a cell is written `\|` and types are code spans.
//! [`parse_table_row`] reads a row back, which the spec comparison test relies on.

use std::fmt::Write as _;

use prost_reflect::MessageDescriptor;

use super::types::{one_line, own_doc, rows, sorted_fields, Row};
use super::{TransportSurface, EVENT_KINDS_INTRO, HANDSHAKE_INTRO, TRANSPORT};
use crate::implemented::is_implemented;
use crate::schema::{field_rules, Direction, Schema};
use crate::PROTOCOL_VERSION;

/// Spec text under "Error codes": how the string code travels.
const ERROR_CODES_INTRO: &str =
    "Returned as the string error.data.code of a JSON-RPC error response.";
/// Spec text under "Error codes": the numeric `error.code` mapping.
const ERROR_CODES_NUMERIC: &str = "The numeric error.code: -32601 means only that the method \
does not exist (method_not_found), so a client can feature-detect an older daemon by it; a \
missing session, job, memory, content or other entity is -32004 (not_found, mcp_not_found); \
-32602 invalid params; -32603 internal; -32000 everything else. Before protocol 1.7.0 a missing \
entity also answered -32601.";

/// Text above the capability list: the list is the protocol's, the daemon advertises a subset.
const CAPABILITIES_INTRO: &str = "Server capabilities the protocol defines. The system.hello \
result advertises only the subset the running daemon implements (the services of its suite \
report theirs); a client feature-detects by that list, not by this one. Each entry says what \
the capability means in this daemon; one marked \"Not advertised:\" is never in that list, \
and says why.";
/// Text under "Method index": what the status column means.
const METHOD_STATUS_INTRO: &str = "The status column says whether this build implements the \
method (`snowpea_proto::implemented::IMPLEMENTED`, the same declaration the gateway answers \
from): a method marked not yet answers the error not_implemented.";
/// Status cell of an implemented method.
pub const IMPLEMENTED_STATUS: &str = "implemented";
/// Status cell of a method that answers `not_implemented`.
pub const NOT_YET_STATUS: &str = "not yet";

/// Renders the whole `docs/protocol.md`.
pub fn render(schema: &Schema) -> String {
    let mut out = String::new();
    header(&mut out);
    transport(&mut out);
    handshake(&mut out, schema);
    method_index(&mut out, schema);
    methods(&mut out, schema);
    notifications(&mut out, schema);
    event_kinds(&mut out, schema);
    error_codes(&mut out, schema);
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

fn header(out: &mut String) {
    let _ = writeln!(out, "# Snowpea protocol\n");
    let _ = writeln!(out, "- Protocol version: {PROTOCOL_VERSION} (semver)");
    let _ = writeln!(
        out,
        "- Source of truth: `proto/snowpea/**.proto` (custom options in `proto/snowpea/rpc/v1/options.proto`)"
    );
    let _ = writeln!(out, "- Generator: `{}`", super::FIX_COMMAND);
    let _ = writeln!(
        out,
        "- Bindings: `sdk/src/protocol.ts` (generated alongside this file — never hand-edit)\n"
    );
}

fn transport(out: &mut String) {
    let _ = writeln!(out, "## Transport\n");
    let _ = writeln!(
        out,
        "The daemon listens on a loopback-only port chosen at start-up and records it in \
         $SNOWPEA_HOME/daemon.json as {{port, pid, token, startedAt, protocolVersion}}.\n"
    );
    table_header(out, &["surface", "endpoint", "purpose"]);
    for TransportSurface {
        surface,
        scheme,
        path,
        purpose,
    } in TRANSPORT
    {
        let endpoint = format!("`{scheme}://127.0.0.1:<port>{path}`");
        table_row(out, &[surface, &endpoint, purpose]);
    }
    let _ = writeln!(
        out,
        "\nEvery state-changing method lives on the WebSocket only; the HTTP endpoints are \
         read-only operational helpers.\n"
    );
}

fn handshake(out: &mut String, schema: &Schema) {
    let _ = writeln!(out, "## Handshake\n\n{HANDSHAKE_INTRO}\n");
    let _ = writeln!(out, "```json\n{}\n```\n", super::hello_example());
    let _ = writeln!(out, "{CAPABILITIES_INTRO}\n");
    for cap in &schema.capabilities {
        let _ = writeln!(
            out,
            "- {cap}: {}",
            one_line(&schema.capability_description(cap))
        );
    }
    out.push('\n');
}

fn method_index(out: &mut String, schema: &Schema) {
    let _ = writeln!(out, "## Method index\n\n{METHOD_STATUS_INTRO}\n");
    table_header(out, &["method", "direction", "status", "summary"]);
    for m in schema.methods.values() {
        // The spec's index repeats the whole description as the summary.
        table_row(
            out,
            &[
                &m.name,
                m.direction.arrow(),
                status(&m.name),
                &one_line(&m.description()),
            ],
        );
    }
    out.push('\n');
}

/// The method index's status cell of `method`: [`IMPLEMENTED_STATUS`] or [`NOT_YET_STATUS`],
/// from [`is_implemented`] — the declaration the gateway answers `not_implemented` from.
pub fn status(method: &str) -> &'static str {
    if is_implemented(method) {
        IMPLEMENTED_STATUS
    } else {
        NOT_YET_STATUS
    }
}

fn methods(out: &mut String, schema: &Schema) {
    let _ = writeln!(out, "## Methods\n");
    for m in schema.methods.values() {
        let _ = writeln!(out, "### {}\n", m.name);
        let _ = writeln!(out, "Direction: {}\n", m.direction.arrow());
        if !m.description().is_empty() {
            let _ = writeln!(out, "{}\n", m.description());
        }
        let _ = writeln!(out, "#### Params\n");
        field_table(out, schema, &m.input(), "No params (send {}).");
        let _ = writeln!(out, "#### Result\n");
        let no_result = if m.direction == Direction::ClientNotification {
            "No result: sent as a JSON-RPC notification, never answered."
        } else {
            "No result fields (answers {})."
        };
        field_table(out, schema, &m.output(), no_result);
    }
}

fn notifications(out: &mut String, schema: &Schema) {
    let _ = writeln!(out, "## Notifications\n");
    for (name, m) in &schema.notifications {
        let _ = writeln!(out, "### {name}\n");
        if let Some(doc) = own_doc(schema, m) {
            let _ = writeln!(out, "{doc}\n");
        }
        field_table(out, schema, m, "No params.");
    }
}

fn event_kinds(out: &mut String, schema: &Schema) {
    let _ = writeln!(out, "## session.event kinds\n\n{EVENT_KINDS_INTRO}\n");
    for (kind, m) in &schema.event_kinds {
        let _ = writeln!(out, "### kind {kind}\n");
        if let Some(doc) = own_doc(schema, m) {
            let _ = writeln!(out, "{doc}\n");
        }
        field_table(out, schema, m, "No payload fields.");
    }
}

fn error_codes(out: &mut String, schema: &Schema) {
    let _ = writeln!(out, "## Error codes\n");
    let _ = writeln!(out, "{ERROR_CODES_INTRO}\n\n{ERROR_CODES_NUMERIC}\n");
    table_header(out, &["code", "meaning"]);
    let mut codes: Vec<_> = schema.error_codes.iter().collect();
    codes.sort_by(|a, b| a.wire.cmp(&b.wire));
    for c in codes {
        table_row(out, &[&c.wire, &one_line(&c.description())]);
    }
    out.push('\n');
}

/// The Params/Result/notification/event table of a message, or `empty` when it has no fields.
fn field_table(out: &mut String, schema: &Schema, m: &MessageDescriptor, empty: &str) {
    let rows = rows(schema, m);
    if rows.is_empty() {
        let _ = writeln!(out, "{empty}\n");
        return;
    }
    table_header(out, &["field", "type", "required", "description"]);
    for (
        Row {
            field,
            ty,
            required,
            description,
        },
        f,
    ) in rows.iter().zip(sorted_fields(m))
    {
        let ty = format!("`{ty}`");
        let required = if *required { "yes" } else { "no" };
        // The table mirrors the spec's: a cell the spec leaves empty stays empty.
        let description = if field_rules(&f).spec_undescribed {
            ""
        } else {
            description
        };
        table_row(out, &[field, &ty, required, description]);
    }
    out.push('\n');
}

fn table_header(out: &mut String, columns: &[&str]) {
    table_row(out, columns);
    let _ = writeln!(out, "|{}", "---|".repeat(columns.len()));
}

fn table_row(out: &mut String, cells: &[&str]) {
    out.push('|');
    for cell in cells {
        let _ = write!(out, " {} |", escape_cell(cell));
    }
    out.push('\n');
}

/// Escapes a table cell: `|` is `\|` (also inside code spans, per GFM).
fn escape_cell(cell: &str) -> String {
    cell.replace('|', "\\|")
}

/// Splits a rendered table row back into its cells: unescapes `\|` and strips the code span
/// around a type. The inverse of the renderer's `table_row`.
pub fn parse_table_row(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '|' => cells.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    cells.push(cell);
    cells
        .into_iter()
        .map(|c| {
            let c = c.trim();
            c.strip_prefix('`')
                .and_then(|c| c.strip_suffix('`'))
                .unwrap_or(c)
                .to_owned()
        })
        .collect()
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;
