use serde_json::json;

use super::*;
use crate::tools::test_context;

fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let wd = std::fs::canonicalize(dir.path()).unwrap();
    let files = [
        ("Cargo.toml", "[package]\nname = \"demo\"\n"),
        ("src/main.rs", "fn main() {\n    helper();\n}\n"),
        ("src/lib/helper.rs", "pub fn helper() {}\n// TODO: more\n"),
        ("src/notes.md", "helper docs\n"),
        ("target/debug/gen.rs", "fn helper() {}\n"),
        ("build.log", "helper log\n"),
        (".hidden/secret.rs", "fn helper() {}\n"),
        (".env", "helper=1\n"),
    ];
    for (path, text) in files {
        let p = wd.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::write(wd.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::write(wd.join("src/blob.bin"), b"helper\0\x01\x02").unwrap();
    (dir, wd)
}

async fn run(tool: &dyn Tool, wd: &Path, args: Value) -> ToolOutput {
    let (ctx, _rx) = test_context(wd, 100_000);
    tool.run(args, ctx).await
}

#[test]
fn path_glob_semantics() {
    let g = PathGlob::new("*.rs").unwrap();
    assert!(g.is_match(Path::new("a.rs")));
    assert!(g.is_match(Path::new("src/deep/a.rs")));
    assert!(!g.is_match(Path::new("a.rsx")));
    let g = PathGlob::new("src/*.rs").unwrap();
    assert!(g.is_match(Path::new("src/a.rs")));
    assert!(!g.is_match(Path::new("src/x/a.rs")));
    let g = PathGlob::new("**/*.rs").unwrap();
    assert!(g.is_match(Path::new("a.rs")));
    assert!(g.is_match(Path::new("x/y/a.rs")));
    let g = PathGlob::new("./src/**").unwrap();
    assert!(g.is_match(Path::new("src/x/a.rs")));
    assert!(PathGlob::new("a[").is_err());
    assert!(PathGlob::new("  ").is_err());
}

#[tokio::test]
async fn glob_respects_gitignore_and_hidden() {
    let (_d, wd) = project();
    let out = run(&Glob, &wd, json!({"pattern": "**/*.rs"})).await;
    assert!(out.ok, "{out:?}");
    assert_eq!(out.content, "src/lib/helper.rs\nsrc/main.rs");
    assert_eq!(out.meta["count"], 2);
    assert_eq!(out.meta["truncated"], false);

    let out = run(&Glob, &wd, json!({"pattern": "*.log"})).await;
    assert!(out.ok);
    assert!(out.content.starts_with("No files match"), "{}", out.content);

    let out = run(&Glob, &wd, json!({"pattern": "src/*"})).await;
    assert_eq!(out.content, "src/blob.bin\nsrc/main.rs\nsrc/notes.md");
}

#[tokio::test]
async fn glob_caps_results() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..(MAX_GLOB_RESULTS + 5) {
        std::fs::write(dir.path().join(format!("f{i:05}.txt")), "").unwrap();
    }
    let out = run(&Glob, dir.path(), json!({"pattern": "*.txt"})).await;
    assert!(out.ok);
    assert_eq!(out.meta["count"], MAX_GLOB_RESULTS);
    assert_eq!(out.meta["truncated"], true);
    assert!(out.content.contains("[truncated"));
}

#[tokio::test]
async fn glob_bad_pattern() {
    let (_d, wd) = project();
    assert!(Glob
        .plan(&json!({"pattern": "a["}), &wd)
        .unwrap_err()
        .contains("invalid glob"));
    assert_eq!(
        Glob.plan(&json!({}), &wd).unwrap_err(),
        "missing required argument `pattern`"
    );
    let out = run(&Glob, &wd, json!({"pattern": "a["})).await;
    assert!(!out.ok);
    let p = Glob.plan(&json!({"pattern": "*.rs"}), &wd).unwrap();
    assert_eq!(
        (p.permission, p.summary.as_str()),
        (Permission::Read, "glob *.rs")
    );
}

#[tokio::test]
async fn grep_finds_matches() {
    let (_d, wd) = project();
    let out = run(&Grep, &wd, json!({"pattern": "helper"})).await;
    assert!(out.ok, "{out:?}");
    assert_eq!(
        out.content,
        "src/lib/helper.rs:1:pub fn helper() {}\nsrc/main.rs:2:    helper();\nsrc/notes.md:1:helper docs"
    );
    assert_eq!(out.meta["matches"], 3);
    assert_eq!(out.meta["files"], 3);
}

#[tokio::test]
async fn grep_with_glob_filter_and_regex() {
    let (_d, wd) = project();
    let out = run(
        &Grep,
        &wd,
        json!({"pattern": "help(er)?\\(", "glob": "*.rs"}),
    )
    .await;
    assert!(out.ok, "{out:?}");
    assert_eq!(
        out.content,
        "src/lib/helper.rs:1:pub fn helper() {}\nsrc/main.rs:2:    helper();"
    );

    let out = run(
        &Grep,
        &wd,
        json!({"pattern": "(?i)todo", "glob": "src/lib/**"}),
    )
    .await;
    assert_eq!(out.content, "src/lib/helper.rs:2:// TODO: more");

    let out = run(&Grep, &wd, json!({"pattern": "nothing-like-this"})).await;
    assert!(out.ok);
    assert!(out.content.starts_with("No matches"));
}

#[tokio::test]
async fn grep_caps_output() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..500).map(|i| format!("match {i}\n")).collect();
    std::fs::write(dir.path().join("a.txt"), text).unwrap();
    let (ctx, _rx) = test_context(dir.path(), 1000);
    let out = Grep.run(json!({"pattern": "match"}), ctx).await;
    assert!(out.ok);
    assert_eq!(out.meta["truncated"], true);
    assert!(out.content.len() < 1200, "{}", out.content.len());
    assert!(out
        .content
        .starts_with("a.txt:1:match 0\na.txt:2:match 1\n"));
    assert!(out.content.contains("[truncated"));
}

#[tokio::test]
async fn grep_argument_errors() {
    let (_d, wd) = project();
    assert!(Grep
        .plan(&json!({"pattern": "("}), &wd)
        .unwrap_err()
        .contains("invalid regular expression"));
    assert_eq!(
        Grep.plan(&json!({"pattern": "a", "glob": 1}), &wd)
            .unwrap_err(),
        "argument `glob` must be a string"
    );
    let p = Grep
        .plan(&json!({"pattern": "fn", "glob": "*.rs"}), &wd)
        .unwrap();
    assert_eq!(
        (p.permission, p.summary.as_str()),
        (Permission::Read, "grep fn in *.rs")
    );
    let out = run(&Grep, &wd, json!({"pattern": "("})).await;
    assert!(!out.ok);
}

#[tokio::test]
async fn search_stops_when_cancelled() {
    let (_d, wd) = project();
    let (ctx, _rx) = test_context(&wd, 1000);
    ctx.cancel.cancel();
    let out = Grep.run(json!({"pattern": "helper"}), ctx).await;
    assert!(!out.ok);
    assert_eq!(out.meta["interrupted"], true);
}
