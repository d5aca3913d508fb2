//! Service-level tests of the checkpoint component: capture through real turns (scripted
//! provider, temp workdirs with and without git) and every restore rule.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::testkit::{of_kind, Harness};
use crate::tools::Writes;
use snowpea_session_error::Error;

fn write(path: &Path, text: &str, mode: u32) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
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

async fn turn(h: &mut Harness, sid: &str, text: &str) -> (String, Vec<Value>) {
    let tid = h.prompt(sid, text).await;
    let ev = h.until_done(&tid, |_| None).await;
    (tid, ev)
}

async fn list(h: &Harness, sid: &str) -> Vec<pb::Checkpoint> {
    h.app
        .checkpoints
        .list(pb::CheckpointListParams {
            session_id: sid.into(),
        })
        .await
        .unwrap()
        .checkpoints
}

fn params(sid: &str, id: &str) -> pb::CheckpointRestoreParams {
    pb::CheckpointRestoreParams {
        session_id: sid.into(),
        id: id.into(),
        ..Default::default()
    }
}

async fn restore(h: &Harness, p: pb::CheckpointRestoreParams) -> pb::CheckpointRestoreResult {
    h.app.checkpoints.restore(p).await.unwrap()
}

fn skipped(r: &pb::CheckpointRestoreResult) -> Vec<(String, String)> {
    r.skipped
        .iter()
        .map(|s| (s.path.clone(), s.reason.clone()))
        .collect()
}

fn file<'a>(c: &'a pb::Checkpoint, path: &str) -> &'a pb::checkpoint::File {
    c.files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("{path} in {c:?}"))
}

fn invalid_field(e: Error) -> String {
    match e {
        Error::InvalidParams { field, .. } => field,
        other => panic!("expected invalid_params, got {other:?}"),
    }
}

#[tokio::test]
async fn a_turn_that_edits_creates_and_deletes_is_restored_exactly_and_the_restore_undone() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "change things", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "a.txt", "content": "changed\n"}},
                {"name": "write_file", "arguments": {"path": "new/c.txt", "content": "new\n"}},
                {"name": "edit_file", "arguments": {"path": "b.txt", "old": "bee", "new": "bzz"}},
                {"name": "shell", "arguments": {"command": "rm b.txt"}}
            ]},
            {"after_tool": "shell", "text": "Done."}
        ]
    }))
    .await;
    let wd = h.workdir.clone();
    write(&wd.join("a.txt"), "one\n", 0o755);
    write(&wd.join("b.txt"), "bee\n", 0o600);
    let sid = h.create("auto").await;
    let (tid, ev) = turn(&mut h, &sid, "change things").await;
    assert_eq!(read(&wd.join("a.txt")).as_deref(), Some("changed\n"));
    assert!(!wd.join("b.txt").exists());
    let updated = of_kind(&ev, "checkpoint.updated");
    assert!(!updated.is_empty(), "checkpoint.updated emitted");
    assert_eq!(updated.last().unwrap()["payload"]["checkpoint"]["id"], tid);

    let cps = list(&h, &sid).await;
    assert_eq!(cps.len(), 1);
    let c = &cps[0];
    assert_eq!((c.id.as_str(), c.kind.as_str()), (tid.as_str(), "turn"));
    assert_eq!(c.turn_id.as_deref(), Some(tid.as_str()));
    assert_eq!(c.prompt, "change things");
    let paths: Vec<_> = c.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "new/c.txt", "b.txt"]);
    assert_eq!(file(c, "a.txt").status, "modified");
    assert_eq!(file(c, "new/c.txt").status, "created");
    assert_eq!(file(c, "b.txt").status, "deleted");
    assert!(c.files.iter().all(|f| f.restorable && f.source == "tool"));
    assert!(file(c, "new/c.txt").before_sha.is_none());
    assert!(file(c, "b.txt").after_sha.is_none());

    let d = h
        .app
        .checkpoints
        .diff(pb::CheckpointDiffParams {
            session_id: sid.clone(),
            id: tid.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let a = d.files.iter().find(|f| f.path == "a.txt").unwrap();
    assert!(
        a.patch.contains("-changed") && a.patch.contains("+one"),
        "{}",
        a.patch
    );
    assert!(a.restorable && !a.changed_since && !a.binary);

    let r = restore(&h, params(&sid, &tid)).await;
    assert_eq!(r.restored, ["a.txt", "new/c.txt", "b.txt"]);
    assert!(r.skipped.is_empty());
    let undo = r.checkpoint_id.clone().expect("undo checkpoint");
    assert!(undo.starts_with("r-") && undo.len() == 14, "{undo}");
    assert_eq!(read(&wd.join("a.txt")).as_deref(), Some("one\n"));
    assert_eq!(mode(&wd.join("a.txt")), 0o755);
    assert_eq!(read(&wd.join("b.txt")).as_deref(), Some("bee\n"));
    assert_eq!(mode(&wd.join("b.txt")), 0o600);
    assert!(!wd.join("new/c.txt").exists());
    h.app.flush().await.unwrap();
    let restored = h
        .app
        .events
        .of_kinds(&sid, &["checkpoint.restored"])
        .await
        .unwrap();
    assert_eq!(restored.len(), 1);
    assert_eq!(restored[0].1["checkpointId"], undo);

    let cps = list(&h, &sid).await;
    assert_eq!(cps.len(), 2);
    assert_eq!(
        (cps[0].id.as_str(), cps[0].kind.as_str()),
        (undo.as_str(), "restore")
    );
    // Restoring the restore puts the turn's result back.
    let r2 = restore(&h, params(&sid, &undo)).await;
    assert_eq!(r2.restored.len(), 3, "{r2:?}");
    assert_eq!(read(&wd.join("a.txt")).as_deref(), Some("changed\n"));
    assert_eq!(mode(&wd.join("a.txt")), 0o755);
    assert_eq!(read(&wd.join("new/c.txt")).as_deref(), Some("new\n"));
    assert!(!wd.join("b.txt").exists());
}

#[tokio::test]
async fn through_spans_later_turns_and_a_user_edit_blocks_restore_without_force() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "turn one", "tool_calls": [{"name": "write_file", "arguments": {"path": "f.txt", "content": "1\n"}}]},
            {"match": "turn two", "tool_calls": [{"name": "write_file", "arguments": {"path": "f.txt", "content": "2\n"}}]},
            {"match": "turn three", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "f.txt", "content": "3\n"}},
                {"name": "write_file", "arguments": {"path": "g.txt", "content": "g\n"}}
            ]}
        ],
        "default": {"text": "ok"}
    }))
    .await;
    let wd = h.workdir.clone();
    let sid = h.create("accept").await;
    let (t1, _) = turn(&mut h, &sid, "turn one").await;
    let (t2, _) = turn(&mut h, &sid, "turn two").await;
    let (_t3, _) = turn(&mut h, &sid, "turn three").await;
    let ids: Vec<_> = list(&h, &sid).await.into_iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[2], t1, "newest first");

    // Turn two alone: turn three changed f.txt after it.
    let r = restore(&h, params(&sid, &t2)).await;
    assert_eq!(
        skipped(&r),
        [("f.txt".to_string(), "changed_since".to_string())]
    );
    assert_eq!(r.checkpoint_id, None);
    assert_eq!(read(&wd.join("f.txt")).as_deref(), Some("3\n"));

    let mut p = params(&sid, &t2);
    p.through = true;
    let d = h
        .app
        .checkpoints
        .diff(pb::CheckpointDiffParams {
            session_id: sid.clone(),
            id: t2.clone(),
            through: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(d.files.len(), 2);
    assert!(d.files.iter().all(|f| !f.changed_since && f.restorable));
    let r = restore(&h, p).await;
    assert_eq!(r.restored, ["f.txt", "g.txt"]);
    assert_eq!(read(&wd.join("f.txt")).as_deref(), Some("1\n"));
    assert!(!wd.join("g.txt").exists());

    // A user edit after turn one blocks its restore unless forced.
    std::fs::write(wd.join("f.txt"), "user\n").unwrap();
    let r = restore(&h, params(&sid, &t1)).await;
    assert_eq!(
        skipped(&r),
        [("f.txt".to_string(), "changed_since".to_string())]
    );
    let mut dry = params(&sid, &t1);
    dry.force = true;
    dry.dry_run = true;
    let before = list(&h, &sid).await.len();
    let r = restore(&h, dry).await;
    assert_eq!(
        (r.restored.clone(), r.checkpoint_id.clone()),
        (vec!["f.txt".to_string()], None)
    );
    assert_eq!(
        read(&wd.join("f.txt")).as_deref(),
        Some("user\n"),
        "dryRun writes nothing"
    );
    assert_eq!(
        list(&h, &sid).await.len(),
        before,
        "dryRun writes no checkpoint"
    );
    let mut forced = params(&sid, &t1);
    forced.force = true;
    let r = restore(&h, forced).await;
    assert_eq!(r.restored, ["f.txt"]);
    assert!(!wd.join("f.txt").exists(), "turn one created it");
    h.app.flush().await.unwrap();
    let restored = h
        .app
        .events
        .of_kinds(&sid, &["checkpoint.restored"])
        .await
        .unwrap();
    assert_eq!(
        restored.len(),
        2,
        "one event per real restore, none for dryRun or no-op"
    );
}

#[tokio::test]
async fn shell_changes_in_git_restore_clean_files_from_head_and_refuse_dirty_ones() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "sed them", "tool_calls": [{"name": "shell", "arguments": {
                "command": "sed -i 's/clean/CLEAN/' t.txt && sed -i 's/dirty/DIRTY/' d.txt && echo new > n.txt && rm gone.txt"
            }}]},
            {"after_tool": "shell", "text": "Done."}
        ]
    }))
    .await;
    let wd = h.workdir.clone();
    write(&wd.join("t.txt"), "clean\n", 0o644);
    write(&wd.join("d.txt"), "base\n", 0o644);
    write(&wd.join("gone.txt"), "keep me\n", 0o755);
    git(&wd, &["init", "-q"]);
    git(&wd, &["add", "."]);
    git(&wd, &["commit", "-q", "-m", "init"]);
    std::fs::write(wd.join("d.txt"), "dirty\n").unwrap();
    let sid = h.create("auto").await;
    let (tid, _) = turn(&mut h, &sid, "sed them").await;
    assert_eq!(read(&wd.join("t.txt")).as_deref(), Some("CLEAN\n"));
    let cps = list(&h, &sid).await;
    assert_eq!(cps.len(), 1, "{cps:?}");
    let c = &cps[0];
    assert!(c.files.iter().all(|f| f.source == "shell"));
    assert!(file(c, "t.txt").restorable);
    assert!(!file(c, "d.txt").restorable);
    assert_eq!(file(c, "n.txt").status, "created");
    assert_eq!(file(c, "gone.txt").status, "deleted");
    let r = restore(&h, params(&sid, &tid)).await;
    assert_eq!(
        skipped(&r),
        [("d.txt".to_string(), "not_restorable".to_string())]
    );
    let mut got = r.restored.clone();
    got.sort();
    assert_eq!(got, ["gone.txt", "n.txt", "t.txt"]);
    assert_eq!(read(&wd.join("t.txt")).as_deref(), Some("clean\n"));
    assert_eq!(read(&wd.join("gone.txt")).as_deref(), Some("keep me\n"));
    assert_eq!(mode(&wd.join("gone.txt")), 0o755);
    assert!(!wd.join("n.txt").exists());
    assert_eq!(
        read(&wd.join("d.txt")).as_deref(),
        Some("DIRTY\n"),
        "never a wrong restore"
    );
}

#[tokio::test]
async fn shell_changes_outside_git_are_found_by_the_scan() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "touch", "tool_calls": [{"name": "shell", "arguments": {
                "command": "echo x >> old.txt && echo made > made.txt && mkdir -p node_modules && echo m > node_modules/m.js"
            }}]},
            {"after_tool": "shell", "text": "Done."}
        ]
    }))
    .await;
    let wd = h.workdir.clone();
    write(&wd.join("old.txt"), "old\n", 0o644);
    let sid = h.create("auto").await;
    let (tid, _) = turn(&mut h, &sid, "touch").await;
    let c = &list(&h, &sid).await[0];
    let paths: Vec<_> = c.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["made.txt", "old.txt"],
        "excluded directories are not scanned"
    );
    assert!(file(c, "made.txt").restorable);
    assert!(!file(c, "old.txt").restorable);
    let r = restore(&h, params(&sid, &tid)).await;
    assert_eq!(r.restored, ["made.txt"]);
    assert_eq!(
        skipped(&r),
        [("old.txt".to_string(), "not_restorable".to_string())]
    );
    assert!(!wd.join("made.txt").exists());
}

#[tokio::test]
async fn too_large_and_excluded_files_are_recorded_but_not_restored() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "big", "tool_calls": [
                {"name": "edit_file", "arguments": {"path": "big.txt", "old": "MARK", "new": "DONE"}},
                {"name": "write_file", "arguments": {"path": "dist/x.js", "content": "x"}},
                {"name": "write_file", "arguments": {"path": "small.txt", "content": "s"}}
            ]},
            {"after_tool": "write_file", "text": "Done."}
        ]
    }))
    .await;
    let wd = h.workdir.clone();
    let mut big = "a".repeat(6 << 20);
    big.push_str("\nMARK\n");
    write(&wd.join("big.txt"), &big, 0o644);
    let sid = h.create("accept").await;
    let (tid, _) = turn(&mut h, &sid, "big").await;
    let c = &list(&h, &sid).await[0];
    assert_eq!(file(c, "big.txt").skipped.as_deref(), Some("too_large"));
    assert!(!file(c, "big.txt").restorable);
    assert_eq!(file(c, "dist/x.js").skipped.as_deref(), Some("excluded"));
    let r = restore(&h, params(&sid, &tid)).await;
    assert_eq!(r.restored, ["small.txt"]);
    assert_eq!(
        skipped(&r),
        [
            ("big.txt".to_string(), "not_restorable".to_string()),
            ("dist/x.js".to_string(), "excluded".to_string())
        ]
    );
    assert!(read(&wd.join("big.txt")).unwrap().ends_with("DONE\n"));
    assert!(wd.join("dist/x.js").exists());
}

#[tokio::test]
async fn checkpoints_beyond_max_turns_are_pruned_oldest_first_with_their_blobs() {
    let mut h = Harness::with_settings(
        json!({
            "steps": [
                {"match": "w1", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "1"}}]},
                {"match": "w2", "tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "2"}}]},
                {"match": "w3", "tool_calls": [{"name": "write_file", "arguments": {"path": "c.txt", "content": "3"}}]}
            ],
            "default": {"text": "ok"}
        }),
        json!({"checkpoints": {"maxTurns": 2}}),
    )
    .await;
    let wd = h.workdir.clone();
    write(&wd.join("a.txt"), "only in turn one\n", 0o644);
    let sid = h.create("accept").await;
    let (t1, _) = turn(&mut h, &sid, "w1").await;
    let objects = h.home.root().join("checkpoints").join(&sid).join("objects");
    let count = walk_files;
    assert_eq!(count(&objects), 1, "a.txt's before-bytes stored");
    let (t2, _) = turn(&mut h, &sid, "w2").await;
    let (t3, _) = turn(&mut h, &sid, "w3").await;
    let ids: Vec<_> = list(&h, &sid).await.into_iter().map(|c| c.id).collect();
    assert_eq!(ids, [t3, t2]);
    assert!(!ids.contains(&t1));
    assert_eq!(count(&objects), 0, "the pruned turn's blob is gone");
}

#[tokio::test]
async fn checkpoints_beyond_max_bytes_are_pruned_oldest_first() {
    let mut h = Harness::with_settings(
        json!({
            "steps": [
                {"match": "w1", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "1"}}]},
                {"match": "w2", "tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "2"}}]}
            ],
            "default": {"text": "ok"}
        }),
        json!({"checkpoints": {"maxBytes": 150}}),
    )
    .await;
    let wd = h.workdir.clone();
    write(&wd.join("a.txt"), &"a".repeat(100), 0o644);
    write(&wd.join("b.txt"), &"b".repeat(100), 0o644);
    let sid = h.create("accept").await;
    let (t1, _) = turn(&mut h, &sid, "w1").await;
    assert_eq!(list(&h, &sid).await.len(), 1);
    let (t2, _) = turn(&mut h, &sid, "w2").await;
    let ids: Vec<_> = list(&h, &sid).await.into_iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        [t2],
        "200 blob bytes > 150: the oldest goes, never the new one"
    );
    assert!(!ids.contains(&t1));
    let objects = h.home.root().join("checkpoints").join(&sid).join("objects");
    assert_eq!(walk_files(&objects), 1);
}

fn walk_files(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| {
            if e.path().is_dir() {
                walk_files(&e.path())
            } else {
                1
            }
        })
        .sum()
}

#[tokio::test]
async fn restore_is_session_busy_while_a_turn_runs() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "w1", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "1"}}]},
            {"match": "slow", "delaySec": 60, "text": "late"}
        ],
        "default": {"text": "ok"}
    }))
    .await;
    let sid = h.create("accept").await;
    let (t1, _) = turn(&mut h, &sid, "w1").await;
    let slow = h.prompt(&sid, "slow").await;
    let err = h
        .app
        .checkpoints
        .restore(params(&sid, &t1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SessionBusy(_)), "{err:?}");
    h.app.turns.interrupt(&sid).unwrap();
    h.until_done(&slow, |_| None).await;
    let r = restore(&h, params(&sid, &t1)).await;
    assert_eq!(r.restored, ["a.txt"]);
}

#[tokio::test]
async fn bad_ids_and_paths_are_invalid_params_and_symlinks_never_lead_a_restore_outside() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "w1", "tool_calls": [{"name": "write_file", "arguments": {"path": "sub/a.txt", "content": "agent\n"}}]}
        ],
        "default": {"text": "ok"}
    }))
    .await;
    let wd = h.workdir.clone();
    let sid = h.create("accept").await;
    let (t1, _) = turn(&mut h, &sid, "w1").await;
    let cp = &h.app.checkpoints;
    let e = cp.restore(params(&sid, "../etc")).await.unwrap_err();
    assert_eq!(invalid_field(e), "params.id");
    let e = cp.restore(params("s/../x", &t1)).await.unwrap_err();
    assert_eq!(invalid_field(e), "params.sessionId");
    // An absolute path is refused even inside the workdir: `paths` are documented as
    // relative (issue 32 item 10).
    let inside = wd.join("sub/a.txt").to_string_lossy().into_owned();
    for bad in ["../../etc/passwd", "/etc/passwd", "", inside.as_str()] {
        let mut p = params(&sid, &t1);
        p.paths = vec!["sub/a.txt".into(), bad.into()];
        let e = cp.restore(p).await.unwrap_err();
        assert_eq!(invalid_field(e), "params.paths[1]", "{bad:?}");
    }
    let e = cp
        .diff(pb::CheckpointDiffParams {
            session_id: sid.clone(),
            id: t1.clone(),
            paths: vec!["../x".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(invalid_field(e), "params.paths[0]");
    let e = cp
        .delete(pb::CheckpointDeleteParams {
            session_id: sid.clone(),
            id: Some("a/b".into()),
        })
        .await
        .unwrap_err();
    assert_eq!(invalid_field(e), "params.id");
    // An unknown id is `not_found` (issue 32 item 10), and nothing is deleted.
    let e = cp
        .delete(pb::CheckpointDeleteParams {
            session_id: sid.clone(),
            id: Some("t_unknown".into()),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e:?}");
    assert_eq!(list(&h, &sid).await.len(), 1);
    let e = cp.restore(params(&sid, "t_unknown")).await.unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e:?}");

    // `sub` becomes a symlink to a directory outside the workdir.
    let outside = h._tmp.path().join("outside");
    write(&outside.join("a.txt"), "outside\n", 0o644);
    std::fs::remove_dir_all(wd.join("sub")).unwrap();
    std::os::unix::fs::symlink(&outside, wd.join("sub")).unwrap();
    let mut forced = params(&sid, &t1);
    forced.force = true;
    let r = cp.restore(forced).await.unwrap();
    assert!(r.restored.is_empty(), "{r:?}");
    assert_eq!(
        skipped(&r),
        [("sub/a.txt".to_string(), "not_restorable".to_string())]
    );
    assert_eq!(read(&outside.join("a.txt")).as_deref(), Some("outside\n"));
    // Naming a path through that symlink is refused up front, naming the entry.
    let mut through_link = params(&sid, &t1);
    through_link.paths = vec!["sub/a.txt".into()];
    let e = cp.restore(through_link).await.unwrap_err();
    assert_eq!(invalid_field(e), "params.paths[0]");
    let e = cp
        .diff(pb::CheckpointDiffParams {
            session_id: sid.clone(),
            id: t1.clone(),
            paths: vec!["a\0b".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(invalid_field(e), "params.paths[0]");
}

#[tokio::test]
async fn delete_removes_one_or_all_and_deleting_the_session_removes_its_store() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "w1", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "1"}}]},
            {"match": "w2", "tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "2"}}]},
            {"match": "w3", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "3"}}]}
        ],
        "default": {"text": "ok"}
    }))
    .await;
    write(&h.workdir.join("a.txt"), "0", 0o644);
    let sid = h.create("accept").await;
    let (t1, _) = turn(&mut h, &sid, "w1").await;
    let (t2, _) = turn(&mut h, &sid, "w2").await;
    let store = h.home.root().join("checkpoints").join(&sid);
    assert!(store.is_dir());
    let del = |id: Option<&str>| pb::CheckpointDeleteParams {
        session_id: sid.clone(),
        id: id.map(str::to_owned),
    };
    assert!(h.app.checkpoints.delete(del(Some(&t1))).await.unwrap().ok);
    let ids: Vec<_> = list(&h, &sid).await.into_iter().map(|c| c.id).collect();
    assert_eq!(ids, [t2]);
    // An unknown id is `not_found` (issue 32 item 10).
    assert!(matches!(
        h.app.checkpoints.delete(del(Some("t_never"))).await,
        Err(Error::NotFound(_))
    ));
    assert!(h.app.checkpoints.delete(del(None)).await.unwrap().ok);
    assert!(list(&h, &sid).await.is_empty());
    assert!(!store.exists());

    let (_t3, _) = turn(&mut h, &sid, "w3").await;
    assert!(store.is_dir());
    assert!(h.app.sessions.delete(&sid).await.unwrap());
    assert!(!store.exists(), "session.deleteSaved removes the store");
    let n = crate::testkit::read(&h.home, |c| {
        c.query_row("SELECT COUNT(*) FROM checkpoints", [], |r| {
            r.get::<_, i64>(0)
        })
    });
    assert_eq!(n, 0);
}

#[tokio::test]
async fn disabled_checkpoints_capture_nothing_and_list_empty() {
    let mut h = Harness::with_settings(
        json!({
            "steps": [{"match": "w1", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "1"}}]}],
            "default": {"text": "ok"}
        }),
        json!({"checkpoints": {"enabled": false}}),
    )
    .await;
    let sid = h.create("accept").await;
    turn(&mut h, &sid, "w1").await;
    assert!(list(&h, &sid).await.is_empty());
    assert!(!h.home.root().join("checkpoints").join(&sid).exists());
}

#[tokio::test]
async fn a_call_cut_off_before_it_finished_is_still_restorable() {
    // What a kill -9 mid-call leaves: the entry committed (pending) and the blob on disk,
    // the file changed, no after-state.
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let wd = h.workdir.clone();
    write(&wd.join("a.txt"), "before\n", 0o640);
    let sid = h.create("accept").await;
    let session = h.app.sessions.get(&sid).unwrap();
    let capture = h
        .app
        .checkpoints
        .before_call(
            &session,
            "t_cut",
            "p",
            Writes::Files(vec![wd.join("a.txt")]),
        )
        .await;
    assert!(capture.is_some());
    std::fs::write(wd.join("a.txt"), "half-writ").unwrap();
    drop(capture);
    let r = restore(&h, params(&sid, "t_cut")).await;
    assert_eq!(r.restored, ["a.txt"]);
    assert_eq!(read(&wd.join("a.txt")).as_deref(), Some("before\n"));
    assert_eq!(mode(&wd.join("a.txt")), 0o640);
}

#[test]
fn porcelain_z_is_parsed_with_spaces_and_untracked_files() {
    let out = b" M a b.txt\0?? new dir/x\0D  gone\0";
    assert_eq!(
        super::git::parse_porcelain_z(out),
        [
            (" M".to_string(), "a b.txt".to_string()),
            ("??".to_string(), "new dir/x".to_string()),
            ("D ".to_string(), "gone".to_string())
        ]
    );
}

#[test]
fn exclusions_and_limits_follow_the_settings() {
    use super::config::Limits;
    use super::paths::is_excluded;
    assert!(is_excluded("node_modules/a/b.js"));
    assert!(is_excluded("src/__pycache__/x.pyc"));
    assert!(
        !is_excluded("dist"),
        "a file named like a directory is not excluded"
    );
    assert!(!is_excluded("src/distance.rs"));
    let d = Limits::from_settings(&json!({}));
    assert_eq!(
        (d.enabled, d.max_turns, d.max_bytes),
        (true, 100, 500 << 20)
    );
    let s = Limits::from_settings(
        &json!({"checkpoints": {"enabled": false, "maxTurns": 3, "maxBytes": 10}}),
    );
    assert_eq!((s.enabled, s.max_turns, s.max_bytes), (false, 3, 10));
}

/// The capture overhead per file write and the time of a 1,000-file restore
/// (docs/PERFORMANCE.md "Checkpoints"). A measurement, not a check: run with
/// `cargo test -p snowpea-svc-session --lib checkpoints::tests::measure -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run by hand"]
async fn measure_capture_overhead_and_a_1000_file_restore() {
    use std::time::Instant;
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let wd = h.workdir.clone();
    let body = "x".repeat(4096);
    for i in 0..1000 {
        write(&wd.join(format!("d{}/f{i}.txt", i % 10)), &body, 0o644);
    }
    let sid = h.create("accept").await;
    let session = h.app.sessions.get(&sid).unwrap();
    let cp = &h.app.checkpoints;
    let mut overhead = Vec::with_capacity(1000);
    for i in 0..1000 {
        let path = wd.join(format!("d{}/f{i}.txt", i % 10));
        let t0 = Instant::now();
        let c = cp
            .before_call(
                &session,
                "t_bench",
                "bench",
                Writes::Files(vec![path.clone()]),
            )
            .await
            .unwrap();
        let before = t0.elapsed();
        std::fs::write(&path, format!("changed {i}\n")).unwrap();
        let t1 = Instant::now();
        cp.after_call(&session, "t_bench", "bench", c).await;
        overhead.push(before + t1.elapsed());
    }
    h.app.flush().await.unwrap();
    overhead.sort();
    let pct = |p: usize| overhead[(overhead.len() * p / 100).min(overhead.len() - 1)];
    let t = Instant::now();
    let r = restore(&h, params(&sid, "t_bench")).await;
    let restore_time = t.elapsed();
    assert_eq!(r.restored.len(), 1000);
    println!(
        "capture overhead per file write (4 KiB, first touch): p50 {:?} p99 {:?}; restore of 1,000 files: {:?}",
        pct(50),
        pct(99),
        restore_time
    );
}

// ---- remote backends (issue 32 item 9) -------------------------------------------------

/// A remote backend whose files live under `/snowpea-remote/work`, a path that does not
/// exist on this host: it maps them onto a temp dir (a capture or restore that bypassed the
/// backend would touch the unmapped path, or the session's local workdir). No shell.
#[derive(Debug)]
struct FakeRemote {
    root: std::path::PathBuf,
    local: crate::backend::local::Local,
}

const REMOTE: &str = "/snowpea-remote/work";

impl FakeRemote {
    fn map(&self, p: &Path) -> std::path::PathBuf {
        let rel = p
            .strip_prefix(REMOTE)
            .unwrap_or_else(|_| panic!("outside the remote root: {}", p.display()));
        self.root.join(rel)
    }
}

impl crate::backend::Backend for FakeRemote {
    fn kind(&self) -> crate::backend::BackendKind {
        crate::backend::BackendKind::Ssh
    }
    fn workdir(&self) -> Option<std::path::PathBuf> {
        Some(REMOTE.into())
    }
    fn metadata(&self, path: &Path) -> std::io::Result<crate::backend::Meta> {
        self.local.metadata(&self.map(path))
    }
    fn symlink_metadata(&self, path: &Path) -> std::io::Result<crate::backend::Meta> {
        self.local.symlink_metadata(&self.map(path))
    }
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        self.local.open(&self.map(path))
    }
    fn read_link(&self, path: &Path) -> std::io::Result<std::path::PathBuf> {
        self.local.read_link(&self.map(path))
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<crate::backend::DirEntry>> {
        Ok(self
            .local
            .read_dir(&self.map(path))?
            .into_iter()
            .map(|e| crate::backend::DirEntry {
                path: path.join(&e.name),
                ..e
            })
            .collect())
    }
    fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
        self.local.create_dir_all(&self.map(path))
    }
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        self.local.write_atomic(&self.map(path), bytes)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.local.remove_file(&self.map(path))
    }
    fn exec(
        &self,
        _req: crate::backend::ExecRequest,
        _ctx: crate::tools::ToolContext,
    ) -> futures::future::BoxFuture<'static, crate::tools::ToolOutput> {
        Box::pin(async { crate::tools::ToolOutput::error("no shell here") })
    }
    fn close(&self) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

/// The scripted turn of the remote tests: edits one file, creates one, edits another.
fn remote_script() -> Value {
    json!({
        "steps": [
            {"match": "change remote", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "a.txt", "content": "changed\n"}},
                {"name": "write_file", "arguments": {"path": "new/c.txt", "content": "new\n"}},
                {"name": "edit_file", "arguments": {"path": "b.txt", "old": "bee", "new": "bzz"}}
            ]},
            {"after_tool": "edit_file", "text": "Done."}
        ]
    })
}

/// With the session's backend already remote, its files (seen on this host in `remote`):
/// a turn's changes are captured through the backend, listed, diffed and restored there —
/// the created file deleted — and the restore undone; the local workdir is never touched.
async fn remote_round_trip(h: &mut Harness, sid: &str, remote: &Path) {
    let wd = h.workdir.clone();
    write(&wd.join("a.txt"), "local\n", 0o644);
    write(&remote.join("a.txt"), "one\n", 0o644);
    write(&remote.join("b.txt"), "bee\n", 0o644);
    let (tid, ev) = turn(h, sid, "change remote").await;
    assert_eq!(read(&remote.join("a.txt")).as_deref(), Some("changed\n"));
    assert_eq!(read(&remote.join("new/c.txt")).as_deref(), Some("new\n"));
    assert_eq!(read(&remote.join("b.txt")).as_deref(), Some("bzz\n"));
    assert!(
        !of_kind(&ev, "checkpoint.updated").is_empty(),
        "checkpoint.updated emitted on a remote backend"
    );

    let cps = list(h, sid).await;
    assert_eq!(cps.len(), 1, "one checkpoint of the remote turn: {cps:?}");
    let c = &cps[0];
    assert_eq!(c.id, tid);
    let paths: Vec<_> = c.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "new/c.txt", "b.txt"]);
    assert_eq!(file(c, "a.txt").status, "modified");
    assert_eq!(file(c, "new/c.txt").status, "created");
    assert_eq!(file(c, "b.txt").status, "modified");
    assert!(c.files.iter().all(|f| f.restorable), "{c:?}");

    let d = h
        .app
        .checkpoints
        .diff(pb::CheckpointDiffParams {
            session_id: sid.into(),
            id: tid.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let a = d.files.iter().find(|f| f.path == "a.txt").unwrap();
    assert!(!a.changed_since && a.restorable, "{a:?}");
    assert!(
        a.patch.contains("-changed") && a.patch.contains("+one"),
        "{}",
        a.patch
    );

    let r = restore(h, params(sid, &tid)).await;
    assert_eq!(skipped(&r), Vec::<(String, String)>::new());
    assert_eq!(r.restored.len(), 3, "{r:?}");
    assert_eq!(read(&remote.join("a.txt")).as_deref(), Some("one\n"));
    assert_eq!(read(&remote.join("b.txt")).as_deref(), Some("bee\n"));
    assert!(!remote.join("new/c.txt").exists(), "created file deleted");
    assert_eq!(read(&wd.join("a.txt")).as_deref(), Some("local\n"));
    assert!(!wd.join("new").exists() && !wd.join("b.txt").exists());

    // The undo checkpoint puts the turn's state back, through the backend too.
    let undo = r.checkpoint_id.clone().expect("undo checkpoint");
    let r = restore(h, params(sid, &undo)).await;
    assert_eq!(r.restored.len(), 3, "{r:?}");
    assert_eq!(read(&remote.join("a.txt")).as_deref(), Some("changed\n"));
    assert_eq!(read(&remote.join("new/c.txt")).as_deref(), Some("new\n"));
    assert_eq!(read(&wd.join("a.txt")).as_deref(), Some("local\n"));
}

#[tokio::test]
async fn a_remote_backend_is_checkpointed_and_restored_through_its_file_operations() {
    let mut h = Harness::new(remote_script()).await;
    let sid = h.create("auto").await;
    let tmp = tempfile::tempdir().unwrap();
    let session = h.app.sessions.get(&sid).unwrap();
    let old = session.replace_backend(std::sync::Arc::new(FakeRemote {
        root: tmp.path().to_path_buf(),
        local: crate::backend::local::Local::new(None),
    }));
    old.close().await;
    remote_round_trip(&mut h, &sid, tmp.path()).await;
}

/// The same over a real ssh backend (`backend.set{kind:"ssh"}` to an sshd on loopback with
/// temp keys; skipped where no sshd can be started).
#[tokio::test]
async fn an_ssh_backend_is_checkpointed_and_restored_over_ssh() {
    let Some(sshd) = snowpea_testkit::sshd::Sshd::start() else {
        eprintln!("skipped: no sshd");
        return;
    };
    let mut h = Harness::new(remote_script()).await;
    let sid = h.create("auto").await;
    let tmp = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(tmp.path()).unwrap();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let config = json!({
        "host": "127.0.0.1",
        "port": sshd.port,
        "user": user,
        "key": sshd.user_key(),
        "cwd": cwd,
        "knownHosts": sshd.known_hosts(),
    });
    h.app
        .backends
        .set(pb::BackendSetParams {
            session_id: sid.clone(),
            kind: "ssh".into(),
            config: Some(snowpea_proto::wkt::to_struct(&config)),
        })
        .await
        .unwrap();
    remote_round_trip(&mut h, &sid, &cwd).await;
    h.app.sessions.get(&sid).unwrap().backend().close().await;
}

/// The same over a real docker backend (`backend.set{kind:"docker", config:{image,
/// workdir}}`: the session's own container with a temp dir as its workdir; needs an engine
/// at `DOCKER_HOST` with `SNOWPEA_TEST_DOCKER_IMAGE`, as `.ci/run` provides).
#[tokio::test]
async fn a_docker_backend_is_checkpointed_and_restored_in_the_container() {
    let image = std::env::var("SNOWPEA_TEST_DOCKER_IMAGE")
        .unwrap_or_else(|_| "snowpea-test:busybox".into());
    let engine = match bollard::Docker::connect_with_defaults() {
        Ok(d) => matches!(
            tokio::time::timeout(std::time::Duration::from_secs(5), d.inspect_image(&image)).await,
            Ok(Ok(_))
        ),
        Err(_) => false,
    };
    if !engine {
        snowpea_common::test_deps::missing_docker(
            "apt-get install docker.io; dockerd; docker import of a busybox rootfs (.ci/run does it)",
        );
        return;
    }
    let mut h = Harness::new(remote_script()).await;
    let sid = h.create("auto").await;
    let tmp = tempfile::tempdir().unwrap();
    let wd = std::fs::canonicalize(tmp.path()).unwrap();
    let config = json!({"image": image, "workdir": wd});
    h.app
        .backends
        .set(pb::BackendSetParams {
            session_id: sid.clone(),
            kind: "docker".into(),
            config: Some(snowpea_proto::wkt::to_struct(&config)),
        })
        .await
        .unwrap();
    remote_round_trip(&mut h, &sid, &wd).await;
    h.app.sessions.get(&sid).unwrap().backend().close().await;
}
