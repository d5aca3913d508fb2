use serde_json::json;

use super::*;
use crate::tools::test_context;

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let wd = std::fs::canonicalize(dir.path()).unwrap();
    (dir, wd)
}

async fn run(tool: &dyn Tool, wd: &Path, cap: usize, args: Value) -> ToolOutput {
    let (ctx, _rx) = test_context(wd, cap);
    tool.run(args, ctx).await
}

// ---- plan ----

#[test]
fn plans_have_permissions_summaries_and_argument_errors() {
    let (_d, wd) = setup();
    let p = ReadFile.plan(&json!({"path": "a.txt"}), &wd).unwrap();
    assert_eq!(p.permission, Permission::Read);
    assert_eq!(p.summary, "read_file a.txt");
    assert!(p.outside_workdir.is_empty());

    let p = WriteFile
        .plan(&json!({"path": "src/a.rs", "content": ""}), &wd)
        .unwrap();
    assert_eq!(p.permission, Permission::Write);
    assert_eq!(p.summary, "write_file src/a.rs");

    let p = EditFile
        .plan(&json!({"path": "a", "old": "x", "new": "y"}), &wd)
        .unwrap();
    assert_eq!(p.permission, Permission::Write);

    let p = ListDir.plan(&json!({}), &wd).unwrap();
    assert_eq!(p.permission, Permission::Read);
    assert_eq!(p.summary, "list_dir .");

    assert_eq!(
        ReadFile.plan(&json!({}), &wd).unwrap_err(),
        "missing required argument `path`"
    );
    assert_eq!(
        ReadFile.plan(&json!({"path": 3}), &wd).unwrap_err(),
        "argument `path` must be a string"
    );
    assert_eq!(
        WriteFile.plan(&json!({"path": "a"}), &wd).unwrap_err(),
        "missing required argument `content`"
    );
    assert_eq!(
        EditFile
            .plan(
                &json!({"path": "a", "old": "x", "new": "y", "replaceAll": "yes"}),
                &wd
            )
            .unwrap_err(),
        "argument `replaceAll` must be a boolean"
    );
    assert!(EditFile
        .plan(&json!({"path": "a", "old": "", "new": "y"}), &wd)
        .unwrap_err()
        .contains("`old`"));
    assert!(ReadFile
        .plan(&json!({"path": "a", "offset": "x"}), &wd)
        .unwrap_err()
        .contains("`offset`"));
    assert_eq!(
        ReadFile.plan(&json!("a.txt"), &wd).unwrap_err(),
        "arguments must be a JSON object"
    );

    let p = WriteFile
        .plan(&json!({"path": "../out.txt", "content": "x"}), &wd)
        .unwrap();
    assert_eq!(
        p.outside_workdir,
        vec![wd.parent().unwrap().join("out.txt")]
    );
}

#[test]
fn specs_have_schemas_with_required() {
    for tool in [&ReadFile as &dyn Tool, &WriteFile, &EditFile, &ListDir] {
        let spec = tool.spec();
        assert_eq!(spec.name, tool.name());
        assert!(!spec.description.is_empty());
        assert_eq!(spec.parameters["type"], "object");
        assert!(spec.parameters["required"].is_array());
    }
    assert_eq!(
        EditFile.spec().parameters["required"],
        json!(["path", "old", "new"])
    );
}

// ---- write_file ----

#[tokio::test]
async fn write_file_creates_file_with_parents_and_diff() {
    let (_d, wd) = setup();
    let out = run(
        &WriteFile,
        &wd,
        10_000,
        json!({"path": "src/deep/a.rs", "content": "one\ntwo\n"}),
    )
    .await;
    assert!(out.ok, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(wd.join("src/deep/a.rs")).unwrap(),
        "one\ntwo\n"
    );
    let diff = out.diff.unwrap();
    assert!(diff.created);
    assert_eq!(diff.path, "src/deep/a.rs");
    assert_eq!((diff.added, diff.removed), (2, 0));
    assert!(
        diff.diff
            .starts_with("--- a/src/deep/a.rs\n+++ b/src/deep/a.rs\n"),
        "{}",
        diff.diff
    );
    assert!(diff.diff.contains("+one\n+two\n"));
    assert_eq!(out.meta["created"], true);
    // No temp files left behind.
    let names: Vec<_> = std::fs::read_dir(wd.join("src/deep"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1);
}

#[tokio::test]
async fn write_file_replaces_and_diffs() {
    let (_d, wd) = setup();
    std::fs::write(wd.join("f.txt"), "a\nb\nc\n").unwrap();
    let out = run(
        &WriteFile,
        &wd,
        10_000,
        json!({"path": "f.txt", "content": "a\nB\nc\nd\n"}),
    )
    .await;
    assert!(out.ok, "{out:?}");
    let diff = out.diff.unwrap();
    assert!(!diff.created);
    assert_eq!((diff.added, diff.removed), (2, 1));
    assert!(diff.diff.contains("-b\n+B\n"), "{}", diff.diff);
    assert!(diff.diff.contains("+d\n"));
    assert_eq!(
        std::fs::read_to_string(wd.join("f.txt")).unwrap(),
        "a\nB\nc\nd\n"
    );
}

#[tokio::test]
async fn write_file_keeps_permissions_and_refuses_directories() {
    use std::os::unix::fs::PermissionsExt;
    let (_d, wd) = setup();
    std::fs::write(wd.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(wd.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run(
        &WriteFile,
        &wd,
        10_000,
        json!({"path": "run.sh", "content": "#!/bin/sh\necho\n"}),
    )
    .await;
    assert!(out.ok);
    assert_eq!(
        std::fs::metadata(wd.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );

    std::fs::create_dir(wd.join("d")).unwrap();
    let out = run(
        &WriteFile,
        &wd,
        10_000,
        json!({"path": "d", "content": "x"}),
    )
    .await;
    assert!(!out.ok);
    assert!(out.content.contains("directory"));
}

#[tokio::test]
async fn write_file_bad_args_fail_without_panicking() {
    let (_d, wd) = setup();
    let out = run(&WriteFile, &wd, 100, json!({"path": "x"})).await;
    assert!(!out.ok);
    assert!(out.content.contains("`content`"));
    let out = run(&WriteFile, &wd, 100, json!(null)).await;
    assert!(!out.ok);
}

// ---- edit_file ----

#[tokio::test]
async fn edit_file_single_replacement() {
    let (_d, wd) = setup();
    std::fs::write(wd.join("a.rs"), "fn main() {\n    println!(\"hi\");\n}\n").unwrap();
    let out = run(
        &EditFile,
        &wd,
        10_000,
        json!({"path": "a.rs", "old": "println!(\"hi\")", "new": "println!(\"hello\")"}),
    )
    .await;
    assert!(out.ok, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(wd.join("a.rs")).unwrap(),
        "fn main() {\n    println!(\"hello\");\n}\n"
    );
    let diff = out.diff.unwrap();
    assert_eq!((diff.added, diff.removed, diff.created), (1, 1, false));
    assert!(diff.diff.starts_with("--- a/a.rs\n+++ b/a.rs\n"));
    assert_eq!(out.meta["replacements"], 1);
}

#[tokio::test]
async fn edit_file_ambiguous_not_found_and_replace_all() {
    let (_d, wd) = setup();
    std::fs::write(wd.join("a.txt"), "x = 1\nx = 1\nx = 1\n").unwrap();

    let out = run(
        &EditFile,
        &wd,
        10_000,
        json!({"path": "a.txt", "old": "x = 1", "new": "x = 2"}),
    )
    .await;
    assert!(!out.ok);
    assert!(out.content.contains("occurs 3 times"), "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(wd.join("a.txt")).unwrap(),
        "x = 1\nx = 1\nx = 1\n"
    );

    let out = run(
        &EditFile,
        &wd,
        10_000,
        json!({"path": "a.txt", "old": "y = 1", "new": "x = 2"}),
    )
    .await;
    assert!(!out.ok);
    assert!(out.content.contains("not found"), "{}", out.content);

    let out = run(
        &EditFile,
        &wd,
        10_000,
        json!({"path": "a.txt", "old": "x = 1", "new": "x = 2", "replaceAll": true}),
    )
    .await;
    assert!(out.ok, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(wd.join("a.txt")).unwrap(),
        "x = 2\nx = 2\nx = 2\n"
    );
    assert_eq!(out.meta["replacements"], 3);
    let diff = out.diff.unwrap();
    assert_eq!((diff.added, diff.removed), (3, 3));
}

#[tokio::test]
async fn edit_file_missing_file_and_crlf() {
    let (_d, wd) = setup();
    let out = run(
        &EditFile,
        &wd,
        10_000,
        json!({"path": "nope.txt", "old": "a", "new": "b"}),
    )
    .await;
    assert!(!out.ok);
    assert!(out.content.contains("does not exist"), "{}", out.content);

    std::fs::write(wd.join("w.txt"), "one\r\ntwo\r\n").unwrap();
    let out = run(
        &EditFile,
        &wd,
        10_000,
        json!({"path": "w.txt", "old": "one\ntwo", "new": "1\n2"}),
    )
    .await;
    assert!(out.ok, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(wd.join("w.txt")).unwrap(),
        "1\r\n2\r\n"
    );
}

// ---- read_file ----

#[tokio::test]
async fn read_file_plain_and_capped() {
    let (_d, wd) = setup();
    std::fs::write(wd.join("small.txt"), "hello\nworld\n").unwrap();
    let out = run(&ReadFile, &wd, 1000, json!({"path": "small.txt"})).await;
    assert!(out.ok);
    assert_eq!(out.content, "hello\nworld\n");
    assert_eq!(out.meta["truncated"], false);

    let big = "0123456789".repeat(100); // 1000 bytes
    std::fs::write(wd.join("big.txt"), &big).unwrap();
    let out = run(&ReadFile, &wd, 100, json!({"path": "big.txt"})).await;
    assert!(out.ok);
    assert!(out.content.starts_with(&big[..100]));
    assert!(
        out.content
            .ends_with("[truncated: 900 bytes more; use offset/limit to read further]"),
        "{}",
        out.content
    );
    assert_eq!(out.meta["truncated"], true);
    assert_eq!(out.meta["bytes"], 1000);

    // The cap never splits a UTF-8 character.
    std::fs::write(wd.join("utf.txt"), "é".repeat(100)).unwrap();
    let out = run(&ReadFile, &wd, 51, json!({"path": "utf.txt"})).await;
    assert!(out.content.starts_with(&"é".repeat(25)));
    assert!(!out.content.contains('\u{FFFD}'));
    assert!(
        out.content.contains("[truncated: 150 bytes more"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn read_file_offset_and_limit() {
    let (_d, wd) = setup();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(wd.join("l.txt"), text).unwrap();
    let out = run(
        &ReadFile,
        &wd,
        1000,
        json!({"path": "l.txt", "offset": 3, "limit": 2}),
    )
    .await;
    assert!(out.ok);
    assert_eq!(out.content, "line 3\nline 4\n");
    let out = run(&ReadFile, &wd, 1000, json!({"path": "l.txt", "offset": 9})).await;
    assert_eq!(out.content, "line 9\nline 10\n");
    let out = run(&ReadFile, &wd, 1000, json!({"path": "l.txt", "offset": 50})).await;
    assert!(!out.ok);
    assert!(out.content.contains("past the end"), "{}", out.content);
}

#[tokio::test]
async fn read_file_refuses_binary_directories_and_missing() {
    let (_d, wd) = setup();
    std::fs::write(wd.join("bin.dat"), [0x7f, b'E', b'L', b'F', 0, 0, 1, 2]).unwrap();
    let out = run(&ReadFile, &wd, 1000, json!({"path": "bin.dat"})).await;
    assert!(!out.ok);
    assert!(out.content.contains("binary file"), "{}", out.content);

    std::fs::create_dir(wd.join("d")).unwrap();
    let out = run(&ReadFile, &wd, 1000, json!({"path": "d"})).await;
    assert!(!out.ok);
    assert!(out.content.contains("directory"));

    let out = run(&ReadFile, &wd, 1000, json!({"path": "missing.txt"})).await;
    assert!(!out.ok);
    assert!(out.content.contains("does not exist"));

    let out = run(&ReadFile, &wd, 1000, json!({"path": 12})).await;
    assert!(!out.ok);
    assert!(out.content.contains("must be a string"));
}

#[tokio::test]
async fn read_file_empty() {
    let (_d, wd) = setup();
    std::fs::write(wd.join("e.txt"), "").unwrap();
    let out = run(&ReadFile, &wd, 1000, json!({"path": "e.txt"})).await;
    assert!(out.ok);
    assert_eq!(out.content, "(empty file)");
}

// ---- list_dir ----

#[tokio::test]
async fn list_dir_sorted_with_dirs_and_sizes() {
    let (_d, wd) = setup();
    std::fs::create_dir(wd.join("src")).unwrap();
    std::fs::write(wd.join("b.txt"), "12345").unwrap();
    std::fs::write(wd.join("a.txt"), "").unwrap();
    std::fs::write(wd.join(".hidden"), "x").unwrap();
    std::fs::write(wd.join("src/inner.rs"), "x").unwrap();
    let out = run(&ListDir, &wd, 10_000, json!({})).await;
    assert!(out.ok, "{out:?}");
    assert_eq!(
        out.content,
        ".hidden  (1 bytes)\na.txt  (0 bytes)\nb.txt  (5 bytes)\nsrc/"
    );
    assert_eq!(out.meta["entries"], 4);

    let out = run(&ListDir, &wd, 10_000, json!({"path": "src"})).await;
    assert_eq!(out.content, "inner.rs  (1 bytes)");

    let out = run(&ListDir, &wd, 10_000, json!({"path": "a.txt"})).await;
    assert!(!out.ok);
    let out = run(&ListDir, &wd, 10_000, json!({"path": "nope"})).await;
    assert!(!out.ok);
    assert!(out.content.contains("does not exist"));
}

#[tokio::test]
async fn list_dir_caps_and_empty() {
    let (_d, wd) = setup();
    std::fs::create_dir(wd.join("empty")).unwrap();
    let out = run(&ListDir, &wd, 10_000, json!({"path": "empty"})).await;
    assert_eq!(out.content, "(empty directory)");
    for i in 0..50 {
        std::fs::write(wd.join(format!("f{i:02}")), "").unwrap();
    }
    let out = run(&ListDir, &wd, 100, json!({})).await;
    assert!(out.ok);
    assert_eq!(out.meta["truncated"], true);
    assert!(
        out.content.starts_with("empty/\nf00  (0 bytes)\n"),
        "{}",
        out.content
    );
    assert!(out.content.contains("more entries]"));
}
