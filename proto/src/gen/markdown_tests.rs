//! Compares the generated `docs/protocol.md` tables with the spec's
//! (`/work/shared/spec/snowpea-protocol-1.25.0.md`, skipped when absent): the four reference
//! methods must match row for row; the overall match rate of every section is printed with
//! each mismatch (`cargo test -p snowpea-proto spec_tables -- --nocapture`).

use std::collections::BTreeMap;

use super::{parse_table_row, render};
use crate::schema::schema;

const SPEC: &str = "/work/shared/spec/snowpea-protocol-1.25.0.md";
/// Methods whose Params and Result tables must equal the spec's exactly.
const REFERENCE_METHODS: [&str; 4] = [
    "session.create",
    "session.resume",
    "approval.list",
    "system.hello",
];

/// A table row as four cells: field, type, required, description ("" when absent).
type Cells = [String; 4];
/// Section name → sub-table name ("Params", "Result" or "" for a single table) → rows.
type Tables = BTreeMap<String, BTreeMap<String, Vec<Cells>>>;

fn cells(mut parts: Vec<String>) -> Cells {
    parts.resize(4, String::new());
    [
        parts[0].trim().to_owned(),
        parts[1].trim().to_owned(),
        parts[2].trim().to_owned(),
        parts[3].trim().to_owned(),
    ]
}

/// The spec's plain-text tables of the region `[start, end)`: a section starts at a line for
/// which `section` returns its name; "Params"/"Result" lines switch sub-table; tab-separated
/// lines are rows.
fn spec_tables(
    text: &str,
    start: &str,
    end: &str,
    section: impl Fn(&[&str], usize) -> Option<String>,
) -> Tables {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines
        .iter()
        .position(|l| *l == start)
        .expect("start heading")
        + 1;
    let to = lines[from..]
        .iter()
        .position(|l| *l == end)
        .map_or(lines.len(), |p| from + p);
    let mut tables = Tables::new();
    let (mut name, mut part) = (String::new(), String::new());
    for (i, line) in lines.iter().enumerate().take(to).skip(from) {
        let line = *line;
        if line.contains('\t') {
            if !line.starts_with("field\ttype") && !name.is_empty() {
                let row = cells(line.split('\t').map(str::to_owned).collect());
                tables
                    .entry(name.clone())
                    .or_default()
                    .entry(part.clone())
                    .or_default()
                    .push(row);
            }
        } else if line == "Params" || line == "Result" {
            part = line.to_owned();
            tables
                .entry(name.clone())
                .or_default()
                .entry(part.clone())
                .or_default();
        } else if let Some(n) = section(&lines, i) {
            name = n;
            part.clear();
            tables.entry(name.clone()).or_default();
        }
    }
    tables
}

/// The generated Markdown's tables in the `## {start}` section, by `### ` heading.
fn md_tables(text: &str, start: &str, strip: &str) -> Tables {
    let mut tables = Tables::new();
    let (mut inside, mut name, mut part) = (false, String::new(), String::new());
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            inside = h == start;
        } else if !inside {
        } else if let Some(h) = line.strip_prefix("### ") {
            name = h.strip_prefix(strip).unwrap_or(h).to_owned();
            part.clear();
            tables.entry(name.clone()).or_default();
        } else if let Some(h) = line.strip_prefix("#### ") {
            part = h.to_owned();
            tables
                .entry(name.clone())
                .or_default()
                .entry(part.clone())
                .or_default();
        } else if line.starts_with('|')
            && !line.starts_with("| field |")
            && !line.starts_with("|---")
        {
            let row = cells(parse_table_row(line));
            tables
                .entry(name.clone())
                .or_default()
                .entry(part.clone())
                .or_default()
                .push(row);
        }
    }
    tables
}

/// Compares two table sets; prints each difference; returns (matching, compared, mismatched names).
fn compare(kind: &str, spec: &Tables, ours: &Tables) -> (usize, usize, Vec<String>) {
    let mut matching = 0;
    let mut bad = Vec::new();
    for (name, spec_parts) in spec {
        let Some(our_parts) = ours.get(name) else {
            println!("[{kind}] {name}: missing from the generated docs");
            bad.push(name.clone());
            continue;
        };
        let mut same = true;
        for (part, spec_rows) in spec_parts {
            let empty = Vec::new();
            let our_rows = our_parts.get(part).unwrap_or(&empty);
            if spec_rows == our_rows {
                continue;
            }
            same = false;
            for row in spec_rows.iter().filter(|r| !our_rows.contains(r)) {
                println!("[{kind}] {name} {part}: spec  {}", row.join(" ‖ "));
                match our_rows.iter().find(|o| o[0] == row[0]) {
                    Some(o) => println!("[{kind}] {name} {part}: ours  {}", o.join(" ‖ ")),
                    None => println!("[{kind}] {name} {part}: ours  (no such field)"),
                }
            }
            for row in our_rows
                .iter()
                .filter(|o| !spec_rows.iter().any(|r| r[0] == o[0]))
            {
                println!("[{kind}] {name} {part}: extra {}", row.join(" ‖ "));
            }
        }
        if same {
            matching += 1;
        } else {
            bad.push(name.clone());
        }
    }
    for name in ours.keys().filter(|n| !spec.contains_key(*n)) {
        println!("[{kind}] {name}: not in the spec");
    }
    let pct = 100.0 * matching as f64 / spec.len().max(1) as f64;
    println!(
        "[{kind}] {matching}/{} sections match the spec exactly ({pct:.1}%)",
        spec.len()
    );
    (matching, spec.len(), bad)
}

#[test]
fn spec_tables_match_for_reference_methods() {
    let Ok(spec) = std::fs::read_to_string(SPEC) else {
        eprintln!("{SPEC} not found; skipping the spec comparison");
        return;
    };
    let md = render(schema());

    let spec_methods = spec_tables(&spec, "Methods", "Notifications", |lines, i| {
        let next = lines.get(i + 2)?;
        (next.starts_with("Direction: ") && !lines[i].is_empty()).then(|| lines[i].to_owned())
    });
    let (_, _, bad) = compare("method", &spec_methods, &md_tables(&md, "Methods", ""));

    let spec_notes = spec_tables(&spec, "Notifications", "session.event kinds", |lines, i| {
        let l = lines[i];
        (!l.is_empty() && !l.contains(' ')).then(|| l.to_owned())
    });
    compare(
        "notification",
        &spec_notes,
        &md_tables(&md, "Notifications", ""),
    );

    let spec_events = spec_tables(&spec, "session.event kinds", "Error codes", |lines, i| {
        lines[i].strip_prefix("kind ").map(str::to_owned)
    });
    compare(
        "event",
        &spec_events,
        &md_tables(&md, "session.event kinds", "kind "),
    );

    let broken: Vec<_> = REFERENCE_METHODS
        .iter()
        .filter(|m| bad.iter().any(|b| b == *m))
        .collect();
    assert!(
        broken.is_empty(),
        "Params/Result tables differ from the spec for {broken:?} (see the printed rows)"
    );
}

#[test]
fn table_rows_round_trip() {
    let mut out = String::new();
    super::table_row(&mut out, &["a", "`\"x\" | null`", "no", "one | two"]);
    assert_eq!(
        parse_table_row(out.trim_end()),
        ["a", "\"x\" | null", "no", "one | two"]
    );
}

/// The method index's status column is rendered from [`crate::implemented::is_implemented`],
/// the declaration the gateway answers `not_implemented` from: one row per schema method,
/// each `implemented` exactly when the declaration says so.
#[test]
fn method_index_status_column_is_the_implemented_declaration() {
    use crate::implemented::{is_implemented, IMPLEMENTED};
    let md = render(schema());
    let mut in_index = false;
    let mut statuses = BTreeMap::new();
    for line in md.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            in_index = h == "Method index";
        } else if in_index && line.starts_with('|') && !line.starts_with("|---") {
            let cells = parse_table_row(line);
            if cells[0] == "method" {
                assert_eq!(cells[2], "status", "header: {line}");
                continue;
            }
            statuses.insert(cells[0].clone(), cells[2].clone());
        }
    }
    assert_eq!(statuses.len(), schema().methods.len(), "one row per method");
    for (name, status) in &statuses {
        let want = if is_implemented(name) {
            super::IMPLEMENTED_STATUS
        } else {
            super::NOT_YET_STATUS
        };
        assert_eq!(status, want, "{name}");
    }
    let implemented = statuses
        .values()
        .filter(|s| *s == super::IMPLEMENTED_STATUS)
        .count();
    assert_eq!(
        implemented,
        IMPLEMENTED.len(),
        "every declared method has a row"
    );
}
