use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use snowpea_common::home::Home;
use snowpea_testkit::{assert_eventually, fake_lsp, within};

use super::catalog::{self, Catalog};
use super::*;

const LONG: Duration = Duration::from_secs(60);

struct Env {
    _tmp: tempfile::TempDir,
    lsp: Arc<Lsp>,
    work: PathBuf,
}

fn env(mode: &str, times: LspTimes) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.ensure_dirs().unwrap();
    let settings = json!({"lsp": {"servers": {"fake": {
        "command": fake_lsp::command(mode),
        "extensions": [".fk"],
        "languageIds": ["fake"],
        "rootMarkers": ["fake.toml"]
    }}}});
    std::fs::write(home.settings_path(), settings.to_string()).unwrap();
    let work = std::fs::canonicalize(tmp.path()).unwrap().join("work");
    std::fs::create_dir_all(work.join("proj/src")).unwrap();
    std::fs::write(work.join("proj/fake.toml"), "").unwrap();
    Env {
        lsp: Lsp::new(home, None, times),
        work,
        _tmp: tmp,
    }
}

fn fast() -> LspTimes {
    LspTimes {
        idle: Duration::from_secs(600),
        init: Duration::from_secs(10),
        diagnostics: Duration::from_secs(10),
    }
}

fn alive(pid: i64) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

fn row(lsp: &Lsp) -> snowpea_proto::session::v1::lsp_status_result::Server {
    let rows = lsp.status().unwrap().servers;
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0].clone()
}

async fn write(e: &Env, rel: &str, text: &str) -> Option<Report> {
    let path = e.work.join(rel);
    std::fs::write(&path, text).unwrap();
    within(
        LONG,
        "after_write",
        e.lsp.after_write(&e.work, &path, rel, text),
    )
    .await
}

#[tokio::test]
async fn diagnostics_after_a_write_come_from_the_server_of_the_nearest_root() {
    let e = env("normal", fast());
    assert!(
        e.lsp.status().unwrap().servers.is_empty(),
        "nothing starts before an edit"
    );
    let r = write(&e, "proj/src/a.fk", "ok\nx = ERR\ny = WARN\n")
        .await
        .unwrap();
    assert_eq!((r.count, r.errors, r.warnings), (2, 1, 1), "{r:?}");
    assert!(
        r.text.contains("ERROR [2:5] fake err here (fake)"),
        "{}",
        r.text
    );
    assert!(r.text.contains("WARN [3:5]"), "{}", r.text);
    let s = row(&e.lsp);
    assert_eq!(s.state, "ready");
    assert_eq!(s.root, e.work.join("proj").display().to_string());
    assert_eq!(s.language_id, "fake");
    // The next edit goes to the same server and clears the error.
    let pid = s.pid.unwrap();
    let r = write(&e, "proj/src/a.fk", "ok\n").await.unwrap();
    assert_eq!(r.count, 0, "{r:?}");
    assert_eq!(row(&e.lsp).pid, Some(pid));
    // More than 20 problems: 20 lines and a count of the rest.
    let many: String = (0..30).map(|_| "ERR\n").collect();
    let r = write(&e, "proj/src/a.fk", &many).await.unwrap();
    assert_eq!(r.errors, 30);
    assert_eq!(r.text.matches("\nERROR").count(), 20, "{}", r.text);
    assert!(r.text.contains("10 more"), "{}", r.text);
    // A file no server serves gets nothing.
    assert!(write(&e, "proj/notes.txt", "ERR").await.is_none());
    e.lsp.shutdown().await;
    assert!(!alive(pid));
}

#[tokio::test]
async fn a_crash_restarts_the_server_once_then_it_is_broken() {
    let e = env("crash", fast());
    write(&e, "proj/src/a.fk", "ERR\n").await.unwrap();
    let first = row(&e.lsp).pid.unwrap();
    // didChange crashes it: restarted once (a new process, ready again).
    write(&e, "proj/src/a.fk", "again\n").await;
    assert_eventually!(
        {
            let r = row(&e.lsp);
            r.state == "ready" && r.pid.is_some_and(|p| p != first)
        },
        "restarted once"
    );
    // The restarted server gets the document again on the next edit, then crashes: broken.
    write(&e, "proj/src/a.fk", "one\n").await;
    write(&e, "proj/src/a.fk", "two\n").await;
    assert_eventually!(
        row(&e.lsp).state == "broken",
        "broken after the second crash"
    );
    assert_eq!(row(&e.lsp).pid, None);
    // Broken stays broken: no new process, and an edit still completes.
    assert!(write(&e, "proj/src/a.fk", "three\n").await.is_none());
    assert_eq!(row(&e.lsp).state, "broken");
}

#[tokio::test]
async fn an_idle_server_is_stopped_and_starts_again_on_use() {
    let e = env(
        "normal",
        LspTimes {
            idle: Duration::from_secs(2),
            ..fast()
        },
    );
    write(&e, "proj/src/a.fk", "ERR\n").await.unwrap();
    let pid = row(&e.lsp).pid.unwrap();
    assert_eventually!(row(&e.lsp).state == "stopped", "stopped when idle");
    assert_eventually!(!alive(pid), "the idle server's process is gone");
    let r = write(&e, "proj/src/a.fk", "ERR\n").await.unwrap();
    assert_eq!(r.errors, 1);
    assert_eq!(row(&e.lsp).state, "ready");
    e.lsp.shutdown().await;
}

#[tokio::test]
async fn a_server_that_never_answers_costs_a_bounded_wait_then_is_broken() {
    let e = env(
        "silent",
        LspTimes {
            init: Duration::from_millis(500),
            ..fast()
        },
    );
    // Two bounded initialize attempts, then the edit goes on without diagnostics.
    let r = write(&e, "proj/src/a.fk", "ERR\n").await;
    assert!(r.is_none(), "{r:?}");
    assert_eq!(row(&e.lsp).state, "broken");
}

#[test]
fn catalog_has_the_reference_servers_and_settings_change_it() {
    let ids: Vec<String> = catalog::builtin().into_iter().map(|s| s.id).collect();
    for id in [
        "typescript",
        "pyright",
        "rust-analyzer",
        "gopls",
        "clangd",
        "ruff",
        "ty",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing");
    }
    let c = Catalog::from_settings(&json!({}));
    let off: Vec<_> = c
        .servers
        .iter()
        .filter(|s| s.disabled)
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(off, ["ty", "ruff"]);
    let c = Catalog::from_settings(
        &json!({"lsp": {"disabled": ["pyright"], "servers": {"pyright": {"command": ["my-pyright"]}}}}),
    );
    let py = c.servers.iter().find(|s| s.id == "pyright").unwrap();
    assert!(py.disabled);
    assert_eq!(py.command, ["my-pyright"]);
    assert!(c.for_file(Path::new("/x/a.py")).is_empty());
    let c = Catalog::from_settings(&json!({"lsp": {"enabled": false}}));
    assert!(c.for_file(Path::new("/x/a.rs")).is_empty());
}

/// docs/PERFORMANCE.md "Language servers": time from an edit to its diagnostics with
/// pyright (`npm ci --prefix e2e/tests/lsp-servers` first). Run with
/// `cargo test -p snowpea-svc-session --lib bench_edit_to_diagnostics -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "benchmark: prints figures, asserts nothing about time"]
async fn bench_edit_to_diagnostics() {
    let pyright = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../e2e/tests/lsp-servers/node_modules/.bin/pyright-langserver");
    assert!(pyright.exists(), "npm ci --prefix e2e/tests/lsp-servers");
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.ensure_dirs().unwrap();
    let settings = json!({"lsp": {"servers": {"pyright": {"command": [pyright.display().to_string(), "--stdio"]}}, "diagnosticsWaitSeconds": 60}});
    std::fs::write(home.settings_path(), settings.to_string()).unwrap();
    let work = std::fs::canonicalize(tmp.path()).unwrap().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let lsp = Lsp::new(home, None, LspTimes::default());
    let path = work.join("main.py");
    let mut ms = Vec::new();
    for i in 0..21 {
        let text = if i % 2 == 0 {
            format!("x: int = \"{i}\"\n")
        } else {
            format!("x: int = {i}\n")
        };
        std::fs::write(&path, &text).unwrap();
        let t = std::time::Instant::now();
        let r = lsp
            .after_write(&work, &path, "main.py", &text)
            .await
            .unwrap();
        let took = t.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(r.errors, if i % 2 == 0 { 1 } else { 0 }, "{r:?}");
        if i == 0 {
            println!("BENCH lsp cold (start + initialize + first diagnostics) {took:8.1} ms");
        } else {
            ms.push(took);
        }
    }
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "BENCH lsp warm edit → diagnostics p50 {:7.1} ms  p90 {:7.1} ms  (n={})",
        ms[ms.len() / 2],
        ms[(ms.len() - 1) * 9 / 10],
        ms.len()
    );
    lsp.shutdown().await;
}
