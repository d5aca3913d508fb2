//! Unit tests of the skills component: frontmatter rules, name rules, root precedence
//! (write/create and install through the app: svc-session's `rpc/skill_tests.rs`).

use std::path::Path;

use super::loader::{self, Kind, Root, Scope};
use super::{validate_name, validate_skill};

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn frontmatter_rules() {
    let (f, body) = loader::parse("---\nname: a\ndescription: d\nallowed-tools: [read_file, \"grep\"]\nuser-invocable: false\n---\nbody\n").unwrap();
    assert_eq!(f.name.as_deref(), Some("a"));
    assert_eq!(
        f.allowed_tools,
        Some(vec!["read_file".to_string(), "grep".into()])
    );
    assert!(!f.user_invocable);
    assert_eq!(body, "body\n");
    let (f, _) = loader::parse("---\nallowed-tools: read_file, grep\n---\n").unwrap();
    assert_eq!(f.allowed_tools.unwrap().len(), 2);
    let (f, body) = loader::parse("no frontmatter").unwrap();
    assert!(f.user_invocable && body == "no frontmatter");
    assert!(loader::parse("---\nname: a\n")
        .unwrap_err()
        .contains("closing"));
    assert!(loader::parse("---\n- a\n---\n")
        .unwrap_err()
        .contains("mapping"));
    assert!(loader::parse("---\nname: [x\n---\n").is_err());
    assert!(loader::parse("---\nuser-invocable: maybe\n---\n").is_err());
    assert_eq!(loader::substitute("x $ARGUMENTS y", "1 2"), "x 1 2 y");
    assert_eq!(
        loader::substitute("plain", "args"),
        "plain\n\nARGUMENTS: args"
    );
}

#[test]
fn names_and_descriptions_are_validated() {
    assert!(validate_name("ab").is_ok() && validate_name("a.b_c-d9").is_ok());
    for bad in ["a", "-ab", "AB", "a b", "a/b", &"a".repeat(65)] {
        assert!(validate_name(bad).is_err(), "{bad}");
    }
    assert!(validate_skill("x1", "---\nname: x1\ndescription: long enough\n---\n").is_ok());
    assert!(validate_skill("x1", "---\nname: x2\ndescription: long enough\n---\n").is_err());
    assert!(validate_skill("x1", "---\ndescription: short\n---\n").is_err());
    let long = format!("---\ndescription: {}\n---\n", "d".repeat(501));
    assert!(validate_skill("x1", &long).is_err());
}

#[test]
fn a_later_root_wins_and_errors_are_kept() {
    let t = tempfile::tempdir().unwrap();
    let (g, p) = (t.path().join("g"), t.path().join("p"));
    put(
        &g.join("skills/s1/SKILL.md"),
        "---\ndescription: global one\n---\n",
    );
    put(
        &p.join("skills/s1/SKILL.md"),
        "---\ndescription: project one\n---\n",
    );
    put(&p.join("skills/bad/SKILL.md"), "---\nname: [\n---\n");
    put(&p.join("commands/c1.md"), "# Title line\nbody");
    let roots = [
        Root {
            dir: g,
            source: "global".into(),
            scope: Scope::Global,
        },
        Root {
            dir: p,
            source: "project".into(),
            scope: Scope::Project,
        },
    ];
    let all = loader::load(&roots);
    let s1 = all.iter().find(|e| e.name == "s1").unwrap();
    assert_eq!(
        (s1.summary.as_str(), s1.scope),
        ("project one", Scope::Project)
    );
    let bad = all.iter().find(|e| e.name == "bad").unwrap();
    assert!(bad.error.is_some());
    let c1 = all.iter().find(|e| e.kind == Kind::Command).unwrap();
    assert_eq!(
        (c1.name.as_str(), c1.summary.as_str()),
        ("c1", "Title line")
    );
}
