//! Service-level tests of `file.complete`: ranking, listings, hidden entries, ignore rules
//! inside and outside git, the always-skipped directories, limits and refused queries.

use std::path::Path;

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use crate::testkit::Harness;
use snowpea_session_error::Error;

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

fn pct(sorted: &[std::time::Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// docs/PERFORMANCE.md "file.complete": a tree of `SNOWPEA_BENCH_FILES` (default 100,000)
/// files in 1,000 directories; the first (cold) call and 400 warm calls of mixed queries,
/// outside git (ignore walk) and then inside a repository (`git ls-files`).
#[tokio::test]
#[ignore = "benchmark: cargo test --release -p snowpea-svc-session --lib bench_ -- --ignored --nocapture"]
async fn bench_file_complete_on_a_100k_file_tree() {
    use std::time::{Duration, Instant};
    let n: usize = std::env::var("SNOWPEA_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let h = Harness::new(json!({})).await;
    let root = h.workdir.join("tree");
    let words = [
        "main", "mod", "lib", "util", "config", "handler", "model", "view", "test", "api",
    ];
    for i in 0..n {
        let dir = root.join(format!("pkg{:03}/sub{:02}", (i / 100) % 100, i / 10_000));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(dir.join(format!("{}_{i}.rs", words[i % words.len()])), "").unwrap();
    }
    let queries = [
        "m",
        "mod",
        "handler_7",
        "pkg012/",
        "pkg012/sub03/ma",
        "hndlr",
        "zzz",
        "conf",
        "api_9999",
        "s",
    ];
    let run = |label: &'static str| {
        let h = &h;
        let root = root.clone();
        async move {
            let t = Instant::now();
            let first = complete(h, &root, "main", Some(30)).await.unwrap();
            let cold = t.elapsed();
            let mut lat: Vec<Duration> = vec![];
            for round in 0..40 {
                for q in queries {
                    let t = Instant::now();
                    complete(h, &root, q, Some(30)).await.unwrap();
                    if round > 0 {
                        lat.push(t.elapsed());
                    }
                }
            }
            lat.sort();
            println!(
                "file.complete, {n} files, {label}: cold (listing) {:.0} ms; warm p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} calls ({} first entries)",
                cold.as_secs_f64() * 1000.0,
                pct(&lat, 0.5),
                pct(&lat, 0.99),
                lat.last().unwrap().as_secs_f64() * 1000.0,
                lat.len(),
                first.entries.len()
            );
        }
    };
    run("outside git (ignore walk)").await;
    let git_root = h.workdir.join("tree");
    git(&git_root, &["init", "-q"]);
    git(&git_root, &["add", "-A"]);
    // A new Files component: nothing cached from the walk.
    let h2 = crate::file::Files::new(h.app.sessions.registry().clone());
    let t = Instant::now();
    let p = |q: &str| pb::FileCompleteParams {
        limit: Some(30),
        query: q.into(),
        session_id: None,
        workdir: Some(git_root.to_string_lossy().into_owned()),
    };
    h2.complete(p("main")).await.unwrap();
    let cold = t.elapsed();
    let mut lat: Vec<Duration> = vec![];
    for round in 0..40 {
        for q in queries {
            let t = Instant::now();
            h2.complete(p(q)).await.unwrap();
            if round > 0 {
                lat.push(t.elapsed());
            }
        }
    }
    lat.sort();
    println!(
        "file.complete, {n} files, inside git (git ls-files): cold (listing) {:.0} ms; warm p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} calls",
        cold.as_secs_f64() * 1000.0,
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        lat.last().unwrap().as_secs_f64() * 1000.0,
        lat.len()
    );
}

/// The cache answers from its listing and picks up created and removed files in the
/// background (here checked on every call), without a restart and without waiting on the
/// request path.
#[tokio::test]
async fn created_and_removed_files_show_up_after_a_background_check() {
    use snowpea_testkit::assert_eventually;
    let h = Harness::new(json!({})).await;
    let w = h.workdir.join("live");
    touch(&w, "src/a.rs", "x");
    let files = crate::file::Files::with_timing(
        h.app.sessions.registry().clone(),
        crate::file::cache::Timing {
            check_every: std::time::Duration::ZERO,
            ..Default::default()
        },
    );
    let names = |q: &'static str| {
        let files = &files;
        let w = w.clone();
        async move {
            files
                .complete(pb::FileCompleteParams {
                    query: q.into(),
                    workdir: Some(w.to_string_lossy().into_owned()),
                    ..Default::default()
                })
                .await
                .unwrap()
                .entries
                .into_iter()
                .map(|e| e.path)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names("src/").await, ["src/a.rs"]);
    touch(&w, "src/b.rs", "x");
    assert_eventually!(names("src/").await == ["src/a.rs", "src/b.rs"]);
    std::fs::remove_file(w.join("src/a.rs")).unwrap();
    touch(&w, "lib/c.rs", "x");
    assert_eventually!(names("src/").await == ["src/b.rs"]);
    assert_eventually!(names("c.r").await == ["lib/c.rs", "src/b.rs"]);
}
