use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::*;
use crate::permissions::decide;

const PERMISSIONS: [Permission; 8] = [
    Permission::Read,
    Permission::Write,
    Permission::Exec,
    Permission::Network,
    Permission::Send,
    Permission::Config,
    Permission::Delegate,
    Permission::Secret,
];

const PATTERNS: [&str; 9] = [
    "cargo test",
    "echo",
    "git log*",
    "npm run *",
    "ls -la",
    "tool:tool_x",
    "tool:*_x",
    "tool:write_file",
    "rm -rf",
];

/// Simple commands the generator composes, as argv.
const COMMANDS: [&[&str]; 8] = [
    &["cargo", "test"],
    &["cargo", "test", "--release"],
    &["echo", "hi"],
    &["rm", "-rf", "/tmp/x"],
    &["curl", "https://evil.example"],
    &["ls", "-la", "src"],
    &["git", "log", "--oneline"],
    &["npm", "run", "build"],
];

/// A generated command line and what the generator knows about it.
struct Generated {
    text: String,
    /// Every simple command it runs (substitutions included).
    argvs: Vec<Vec<String>>,
    /// It contains something no pattern may cover (file redirection, assignment, subshell,
    /// process substitution, a non-literal command name).
    unsafe_construct: bool,
}

fn simple(rng: &mut StdRng, depth: usize) -> Generated {
    let argv: Vec<String> = COMMANDS[rng.random_range(0..COMMANDS.len())]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut g = Generated {
        text: argv.join(" "),
        argvs: vec![argv],
        unsafe_construct: false,
    };
    match rng.random_range(0..12) {
        0 => {
            g.text.push_str(" > out.txt");
            g.unsafe_construct = true;
        }
        1 => {
            g.text = format!("FOO=1 {}", g.text);
            g.unsafe_construct = true;
        }
        2 => {
            g.text = format!("({})", g.text);
            g.unsafe_construct = true;
        }
        3 => {
            g.text.push_str(" <(curl x)");
            g.unsafe_construct = true;
        }
        4 if depth < 2 => {
            let inner = simple(rng, depth + 1);
            g.text = format!("{} $({})", g.text, inner.text);
            g.argvs.extend(inner.argvs);
            g.unsafe_construct |= inner.unsafe_construct;
        }
        5 if depth < 2 => {
            let inner = simple(rng, depth + 1);
            g.text = format!("{} `{}`", g.text, inner.text);
            g.argvs.extend(inner.argvs);
            g.unsafe_construct |= inner.unsafe_construct;
        }
        6 => g.text.push_str(" 2>&1"),
        7 => {
            g.text = format!("$(echo x) {}", g.text);
            g.argvs.push(vec!["echo".into(), "x".into()]);
            // The command name is only known at run time.
            g.unsafe_construct = true;
        }
        _ => {}
    }
    g
}

fn command(rng: &mut StdRng) -> Generated {
    let mut g = simple(rng, 0);
    for _ in 0..rng.random_range(0..3) {
        let op = [";", "&&", "||", "|", "&", "\n"][rng.random_range(0..6)];
        let next = simple(rng, 0);
        g.text = format!("{} {op} {}", g.text, next.text);
        g.argvs.extend(next.argvs);
        g.unsafe_construct |= next.unsafe_construct;
    }
    g
}

/// The oracle: does a literal command pattern cover this argv (word equality, a trailing
/// `*` matching any rest of the word)?
fn covers(pattern: &str, argv: &[String]) -> bool {
    if pattern.starts_with("tool:") {
        return false;
    }
    let words: Vec<&str> = pattern.split_whitespace().collect();
    words.len() <= argv.len()
        && words
            .iter()
            .zip(argv)
            .all(|(w, a)| match w.strip_suffix('*') {
                Some(prefix) => a.starts_with(prefix),
                None => w == a,
            })
}

/// The no-bypass property over modes × denyExec × permissions × allowlists × commands: a
/// call the mode matrix does not allow runs only when it was an "ask" the allowlist may
/// promote (not plan, not config/secret, inside the workdir) and every simple command it
/// runs is covered by a pattern; and a plain covered command is promoted.
#[test]
fn no_call_that_needs_an_approval_runs_without_one_whatever_the_allowlist_holds() {
    let seed = std::env::var("SNOWPEA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(17u64);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut promoted = 0;
    for case in 0..4000 {
        let mode = [Mode::Plan, Mode::Accept, Mode::Auto][rng.random_range(0..3)];
        let deny_exec = rng.random_bool(0.2);
        let shell = rng.random_bool(0.6);
        let (tool, permission) = if shell {
            ("shell", Permission::Exec)
        } else {
            (
                ["tool_x", "write_file", "other"][rng.random_range(0..3)],
                PERMISSIONS[rng.random_range(0..PERMISSIONS.len())],
            )
        };
        let outside = rng.random_bool(0.15);
        let plan = ToolPlan {
            permission,
            outside_workdir: if outside {
                vec![PathBuf::from("/etc/passwd")]
            } else {
                vec![]
            },
            summary: String::new(),
        };
        let held: Vec<&str> = PATTERNS
            .iter()
            .copied()
            .filter(|_| rng.random_bool(0.4))
            .collect();
        let patterns: Vec<Pattern> = held.iter().map(|p| Pattern::parse(p).unwrap()).collect();
        let g = command(&mut rng);
        let args = json!({"command": g.text});

        let verdict = decide(mode, &plan, deny_exec);
        let runs = match verdict {
            Verdict::Allow => true,
            Verdict::Deny => false,
            Verdict::Ask => promotable(mode, verdict, &plan) && allowed_by(&patterns, tool, &args),
        };
        let ctx = format!(
            "seed {seed} case {case}: mode {} denyExec {deny_exec} tool {tool} ({}) outside {outside} patterns {held:?} command {:?}",
            mode.as_str(),
            permission.as_str(),
            g.text
        );
        if runs && verdict != Verdict::Allow {
            promoted += 1;
            assert_eq!(verdict, Verdict::Ask, "{ctx}");
            assert_ne!(mode, Mode::Plan, "plan mode promoted: {ctx}");
            assert!(
                !deny_exec || permission != Permission::Exec,
                "denyExec promoted: {ctx}"
            );
            assert!(
                !matches!(permission, Permission::Config | Permission::Secret),
                "config/secret promoted: {ctx}"
            );
            assert!(!outside, "outside-workdir call promoted: {ctx}");
            if shell {
                assert!(!g.unsafe_construct, "unsafe construct promoted: {ctx}");
                for argv in &g.argvs {
                    assert!(
                        held.iter().any(|p| covers(p, argv)),
                        "{argv:?} ran without a pattern: {ctx}"
                    );
                }
            } else {
                assert!(
                    held.iter().any(|p| p
                        .strip_prefix("tool:")
                        .is_some_and(|n| n == tool || (n == "*_x" && tool.ends_with("_x")))),
                    "{ctx}"
                );
            }
        }
        // Completeness: a covered command without unsafe constructs is promoted.
        if shell
            && verdict == Verdict::Ask
            && promotable(mode, verdict, &plan)
            && !g.unsafe_construct
            && g.argvs
                .iter()
                .all(|argv| held.iter().any(|p| covers(p, argv)))
        {
            assert!(runs, "covered but asked: {ctx}");
        }
    }
    assert!(
        promoted > 50,
        "the generator promoted only {promoted} calls"
    );
}

#[test]
fn scopes_parse_and_print() {
    for s in [Scope::Session, Scope::Project, Scope::Always] {
        assert_eq!(Scope::parse(s.as_str()), Some(s));
    }
    assert_eq!(Scope::parse("site"), None);
}

#[test]
fn settings_file_entries_keep_other_keys_and_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".snowpea").join("settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        r#"{"model": {"default": "x"}, "allowlist": [{"id": "al-host", "pattern": "tool:repl", "origin": "https://a.example", "hostToolsFrom": "b1"}]}"#,
    )
    .unwrap();
    let id = add_to_file(&path, "cargo test").unwrap();
    assert_eq!(
        add_to_file(&path, "cargo test").unwrap(),
        id,
        "a duplicate keeps its id"
    );
    let doc = snowpea_common::settings::load_file(&path).unwrap();
    assert_eq!(doc["model"]["default"], "x");
    let entries = entries_of(&doc, Scope::Project);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].extra["origin"], "https://a.example");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(!remove_from_file(&path, "al-host", Some("other-browser")).unwrap());
    assert!(remove_from_file(&path, &id, None).unwrap());
    assert!(!remove_from_file(&path, &id, None).unwrap());
    let doc = snowpea_common::settings::load_file(&path).unwrap();
    assert_eq!(doc["model"]["default"], "x");
    assert_eq!(entries_of(&doc, Scope::Project).len(), 1);
    // A malformed file is never overwritten.
    std::fs::write(&path, "{not json").unwrap();
    assert!(add_to_file(&path, "echo").is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
}
