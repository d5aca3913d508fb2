//! `docs/ARCHITECTURE.md` "Where a method lives" (issue 34 "one hop"): every JSON-RPC method
//! of `snowpea.session.v1` has a row (the longest matching one: an exact name, else
//! `family.*`), no row matches nothing, and every row's module exists inside the package
//! the row names.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One row of the table: method pattern, crate, module path (from the repository root).
struct Row {
    pattern: String,
    krate: String,
    module: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("svc-session has a parent")
        .to_path_buf()
}

/// The rows of the section "### Where a method lives".
fn rows(doc: &str) -> Vec<Row> {
    let start = doc
        .find("### Where a method lives")
        .expect("docs/ARCHITECTURE.md has the section \"Where a method lives\"");
    let section = &doc[start..];
    let end = section[4..].find("\n#").map_or(section.len(), |i| i + 4);
    let cell = |c: &str| c.trim().trim_matches('`').to_owned();
    section[..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim().trim_matches('|').split('|').collect();
            assert_eq!(cells.len(), 3, "a row has three cells: {l}");
            Row {
                pattern: cell(cells[0]),
                krate: cell(cells[1]),
                module: cell(cells[2]),
            }
        })
        .collect()
}

/// True when `pattern` (`a.b` or `a.*`) matches `method`; the length ranks the match.
fn matches(pattern: &str, method: &str) -> Option<usize> {
    match pattern.strip_suffix('*') {
        Some(prefix) => method.starts_with(prefix).then_some(prefix.len()),
        None => (pattern == method).then_some(usize::MAX),
    }
}

/// The package name of the nearest `Cargo.toml` at or above `dir` (inside the repository).
fn package_of(root: &Path, mut dir: &Path) -> String {
    loop {
        let manifest = root.join(dir).join("Cargo.toml");
        if let Ok(text) = std::fs::read_to_string(&manifest) {
            if let Some(name) = text.lines().find_map(|l| {
                l.strip_prefix("name = \"")
                    .and_then(|r| r.strip_suffix('"'))
            }) {
                return name.to_owned();
            }
        }
        dir = dir
            .parent()
            .unwrap_or_else(|| panic!("no package above {}", dir.display()));
    }
}

#[test]
fn every_session_method_has_one_home_that_exists() {
    let root = repo_root();
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let rows = rows(&doc);
    assert!(!rows.is_empty(), "the table has rows");
    let methods: Vec<&str> = snowpea_proto::schema::schema()
        .methods
        .values()
        .filter(|m| m.owner == "session")
        .map(|m| m.name.as_str())
        .collect();
    assert!(methods.contains(&"session.prompt"), "{methods:?}");

    let mut used = BTreeSet::new();
    let mut missing = Vec::new();
    for method in &methods {
        let best = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| matches(&r.pattern, method).map(|n| (n, i)))
            .max();
        match best {
            Some((_, i)) => {
                used.insert(i);
            }
            None => missing.push(*method),
        }
    }
    assert!(missing.is_empty(), "methods without a row: {missing:?}");

    let mut problems = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if !used.contains(&i) {
            problems.push(format!("`{}` is the home of no method", r.pattern));
        }
        let path = root.join(&r.module);
        if !path.exists() {
            problems.push(format!("`{}`: {} does not exist", r.pattern, r.module));
            continue;
        }
        let dir = Path::new(&r.module)
            .parent()
            .expect("a module path has a folder");
        let package = package_of(&root, dir);
        if package != r.krate {
            problems.push(format!(
                "`{}`: {} is in {package}, not {}",
                r.pattern, r.module, r.krate
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
