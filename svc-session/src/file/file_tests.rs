//! Service-level tests of `file.complete`: ranking, listings, hidden entries, ignore rules
//! inside and outside git, the always-skipped directories, limits and refused queries.

use std::path::Path;

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use crate::error::Error;
use crate::testkit::Harness;

fn touch(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

async fn complete(
    h: &Harness,
    dir: &Path,
    query: &str,
    limit: Option<i64>,
) -> Result<pb::FileCompleteResult, Error> {
    h.app
        .files
        .complete(pb::FileCompleteParams {
            limit,
            query: query.into(),
            session_id: None,
            workdir: Some(dir.to_string_lossy().into_owned()),
        })
        .await
}

async fn paths(h: &Harness, dir: &Path, query: &str) -> Vec<String> {
    complete(h, dir, query, None)
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.path)
        .collect()
}

#[tokio::test]
async fn fuzzy_ranking_is_prefix_then_contains_then_subsequence_shorter_first() {
    let h = Harness::new(json!({})).await;
    let w = h.workdir.clone();
    for f in [
        "app.py",
        "api.py",
        "lib/apple.txt",
        "zap.py",
        "snap/x.rs",
        "a/p/q.txt",
        "other.md",
    ] {
        touch(&w, f, "x");
    }
    assert_eq!(
        paths(&h, &w, "ap").await,
        vec![
            "api.py",
            "app.py",
            "lib/apple.txt",
            "snap/",
            "zap.py",
            "a/p/",
            "a/p/q.txt",
            "snap/x.rs"
        ]
    );
    // Case-insensitive; sizes for files; kinds.
    let r = complete(&h, &w, "APP", None).await.unwrap();
    assert_eq!(r.entries[0].path, "app.py");
    assert_eq!(r.entries[0].kind, "file");
    assert_eq!(r.entries[0].size, Some(1));
    let dir = complete(&h, &w, "sna", None).await.unwrap();
    assert_eq!(
        (
            dir.entries[0].path.as_str(),
            dir.entries[0].kind.as_str(),
            dir.entries[0].size
        ),
        ("snap/", "dir", None)
    );
}

#[tokio::test]
async fn listings_hidden_entries_limits_and_sessions() {
    let h = Harness::new(json!({})).await;
    let w = h.workdir.clone();
    for f in [
        "b.txt",
        "a.txt",
        "src/main.rs",
        "src/mod.rs",
        "src/lib/x.rs",
        ".env",
        "src/.hidden",
    ] {
        touch(&w, f, "x");
    }
    // Empty query: the top level, directories first, hidden left out.
    assert_eq!(paths(&h, &w, "").await, vec!["src/", "a.txt", "b.txt"]);
    // A directory's children filtered by prefix.
    assert_eq!(
        paths(&h, &w, "src/").await,
        vec!["src/lib/", "src/main.rs", "src/mod.rs"]
    );
    assert_eq!(
        paths(&h, &w, "src/m").await,
        vec!["src/main.rs", "src/mod.rs"]
    );
    assert_eq!(paths(&h, &w, "./src/../src/ma").await, vec!["src/main.rs"]);
    // Hidden entries only when the last segment starts with a dot.
    assert_eq!(paths(&h, &w, "env").await, Vec::<String>::new());
    assert_eq!(paths(&h, &w, ".env").await, vec![".env"]);
    assert_eq!(paths(&h, &w, "./").await, vec!["src/", "a.txt", "b.txt"]);
    assert_eq!(paths(&h, &w, "./a").await, vec!["a.txt"]);
    assert_eq!(
        paths(&h, &w, "src/lib/..").await,
        vec!["src/lib/", "src/main.rs", "src/mod.rs"]
    );
    assert_eq!(paths(&h, &w, "src/.").await, vec!["src/.hidden"]);
    // Absolute queries inside the workdir complete like relative ones.
    assert_eq!(
        paths(&h, &w, &format!("{}/src/mo", w.display())).await,
        vec!["src/mod.rs"]
    );
    // limit and truncated; limit is clamped to 1..=200.
    let r = complete(&h, &w, "s", Some(2)).await.unwrap();
    assert_eq!((r.entries.len(), r.truncated), (2, true));
    let r = complete(&h, &w, "s", Some(0)).await.unwrap();
    assert_eq!((r.entries.len(), r.truncated), (1, true));
    let r = complete(&h, &w, "", Some(1000)).await.unwrap();
    assert_eq!((r.entries.len(), r.truncated), (3, false));
    // Through a session: its workdir.
    let sid = h.create("accept").await;
    let r = h
        .app
        .files
        .complete(pb::FileCompleteParams {
            query: "mai".into(),
            session_id: Some(sid),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.entries[0].path, "src/main.rs");
}

#[tokio::test]
async fn ignore_rules_inside_and_outside_git_and_skipped_directories() {
    let h = Harness::new(json!({})).await;
    // Inside a repository: tracked and untracked files, not ignored ones.
    let repo = h.workdir.join("repo");
    for f in [
        ".gitignore",
        "keep.rs",
        "build/out.bin",
        "node_modules/dep/index.js",
        "__pycache__/m.pyc",
        ".venv/bin/python",
    ] {
        touch(
            &repo,
            f,
            if f == ".gitignore" {
                "build/\n*.log\n"
            } else {
                "x"
            },
        );
    }
    git(&repo, &["init", "-q"]);
    git(
        &repo,
        &[
            "add",
            "-f",
            "keep.rs",
            ".gitignore",
            "node_modules/dep/index.js",
        ],
    );
    git(&repo, &["commit", "-qm", "init"]);
    touch(&repo, "untracked.rs", "x");
    touch(&repo, "debug.log", "x");
    assert_eq!(paths(&h, &repo, "").await, vec!["keep.rs", "untracked.rs"]);
    assert_eq!(paths(&h, &repo, "out").await, Vec::<String>::new());
    assert_eq!(
        paths(&h, &repo, "index").await,
        Vec::<String>::new(),
        "node_modules is skipped even when tracked"
    );
    // Outside a repository: .gitignore still applies, the skipped names too.
    let plain = h.workdir.join("plain");
    for f in [
        ".gitignore",
        "main.py",
        "dist/bundle.js",
        "node_modules/x.js",
        "__pycache__/a.pyc",
        ".venv/lib.py",
        "notes.tmp",
    ] {
        touch(
            &plain,
            f,
            if f == ".gitignore" {
                "dist/\n*.tmp\n"
            } else {
                "x"
            },
        );
    }
    assert_eq!(paths(&h, &plain, "").await, vec!["main.py"]);
    assert_eq!(paths(&h, &plain, ".git").await, vec![".gitignore"]);
}

#[tokio::test]
async fn escaping_queries_and_bad_targets_are_refused_naming_the_field() {
    let h = Harness::new(json!({})).await;
    let w = h.workdir.clone();
    touch(&w, "a/b.txt", "x");
    let field = |e: Error| match e {
        Error::InvalidParams { field, .. } => field,
        other => panic!("{other:?}"),
    };
    for q in ["..", "../", "../etc", "a/../../x", "/etc/pa"] {
        assert_eq!(
            field(complete(&h, &w, q, None).await.unwrap_err()),
            "params.query",
            "{q}"
        );
    }
    // Staying inside is fine.
    assert_eq!(paths(&h, &w, "a/../a/").await, vec!["a/b.txt"]);
    let none = h
        .app
        .files
        .complete(pb::FileCompleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(field(none), "params.sessionId");
    let rel = h
        .app
        .files
        .complete(pb::FileCompleteParams {
            workdir: Some("relative/dir".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(field(rel), "params.workdir");
    let missing = h
        .app
        .files
        .complete(pb::FileCompleteParams {
            session_id: Some("nope".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(missing, Error::NotFound(_)), "{missing:?}");
}
