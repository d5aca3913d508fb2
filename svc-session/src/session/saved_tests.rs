//! `session.deleteSaved` and `session.artifacts`.

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use crate::testkit::Harness;

fn files_under(dir: &std::path::Path, id: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.to_string_lossy().contains(id) {
                out.push(p.clone());
            }
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

/// True while the `sessions` table holds a row for `id`.
fn stored(h: &Harness, id: &str) -> bool {
    crate::testkit::read(&h.home, |c| {
        c.query_row("SELECT count(*) FROM sessions WHERE id = ?1", [id], |r| {
            r.get::<_, i64>(0)
        })
    }) > 0
}

#[tokio::test]
async fn delete_saved_closes_an_idle_session_and_leaves_nothing_behind() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "write", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "1"}}]},
            {"match": "slow", "delaySec": 30, "text": "late"}
        ],
        "default": {"text": "ok"}
    }))
    .await;
    let sid = h.create("accept").await;
    let t = h.prompt(&sid, "write it").await;
    h.until_done(&t, |_| None).await;
    let ws = h.app.sessions.get(&sid).unwrap().row().workspace_dir;
    std::fs::write(format!("{ws}/artifacts/report.md"), "# hi").unwrap();
    assert!(!files_under(h.home.root(), &sid).is_empty());
    // Bad selections name the field; a running session is never deleted.
    let bad = h
        .app
        .sessions
        .delete_saved(pb::SessionDeleteSavedParams::default())
        .await
        .unwrap_err();
    assert!(bad.to_string().starts_with("params.sessionId"), "{bad}");
    let other = h.create("accept").await;
    let slow = h.prompt(&other, "slow").await;
    let busy = h
        .app
        .sessions
        .delete_saved(pb::SessionDeleteSavedParams {
            session_id: Some(other.clone()),
            delete_workspace: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(busy, snowpea_session_error::Error::SessionBusy(_)),
        "{busy}"
    );
    assert!(h.app.sessions.get(&other).is_ok(), "nothing of it was lost");
    h.app.turns.interrupt(&other).unwrap();
    h.until_done(&slow, |_| None).await;
    // The idle one goes with everything of it.
    let r = h
        .app
        .sessions
        .delete_saved(pb::SessionDeleteSavedParams {
            session_id: Some(sid.clone()),
            delete_workspace: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.deleted, 1);
    assert!(h.app.sessions.get(&sid).is_err());
    assert_eq!(
        files_under(h.home.root(), &sid),
        Vec::<std::path::PathBuf>::new()
    );
    let rows = crate::testkit::read(&h.home, |c| {
        c.query_row(
            "SELECT (SELECT count(*) FROM events WHERE session_id = ?1) + \
             (SELECT count(*) FROM sessions WHERE id = ?1) + \
             (SELECT count(*) FROM checkpoints WHERE session_id = ?1)",
            [&sid],
            |r| r.get::<_, i64>(0),
        )
    });
    assert_eq!(rows, 0);
    let missing = h
        .app
        .sessions
        .delete_saved(pb::SessionDeleteSavedParams {
            session_id: Some(sid.clone()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(missing, snowpea_session_error::Error::NotFound(_)));
    // By workdir: closed sessions and idle open ones go (an open one is closed first, so
    // its chat bindings go too; issue 32 item 10); a running one is left alone.
    h.app.sessions.close(&other).await.unwrap();
    let live = h.create("accept").await;
    let running = h.create("accept").await;
    let slow = h.prompt(&running, "slow").await;
    let r = h
        .app
        .sessions
        .delete_saved(pb::SessionDeleteSavedParams {
            workdir: Some(h.workdir.to_string_lossy().into_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.deleted, 2, "the closed and the idle open session");
    assert!(h.app.sessions.get(&live).is_err());
    assert!(!stored(&h, &live));
    assert!(
        h.app.sessions.get(&running).is_ok(),
        "a running session stays"
    );
    h.app.turns.interrupt(&running).unwrap();
    h.until_done(&slow, |_| None).await;
    // `all` takes it once it is idle.
    let r = h
        .app
        .sessions
        .delete_saved(pb::SessionDeleteSavedParams {
            all: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.deleted, 1);
    assert!(!stored(&h, &running));
}

#[tokio::test]
async fn artifacts_are_listed_newest_first_with_mime_types() {
    let h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let ws = h.app.sessions.get(&sid).unwrap().row().workspace_dir;
    let art = std::path::Path::new(&ws).join("artifacts");
    std::fs::create_dir_all(art.join("sub")).unwrap();
    std::fs::write(art.join("old.png"), [0u8; 4]).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(art.join("old.png"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    std::fs::write(art.join("sub/new.md"), "# x").unwrap();
    let r = h
        .app
        .sessions
        .artifacts(pb::SessionArtifactsParams {
            session_id: sid.clone(),
        })
        .await
        .unwrap();
    assert_eq!(r.workspace_dir, ws);
    let names: Vec<_> = r.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["sub/new.md", "old.png"]);
    assert_eq!(r.artifacts[1].mime_type.as_deref(), Some("image/png"));
    assert_eq!(r.artifacts[1].size, 4);
    assert!(r.artifacts[0].path.ends_with("artifacts/sub/new.md"));
}

/// A delegated child reports its root's attachments (`session.attachments`), and deleting
/// the root takes its subagent children (and theirs) with it (issue 16 with issue 19).
#[tokio::test]
async fn children_report_the_roots_attachments_and_go_with_it() {
    let mut h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let root = h.create("accept").await;
    let on_disk = h.workdir.join("notes.txt");
    std::fs::write(&on_disk, "from disk").unwrap();
    let p = pb::SessionPromptParams {
        session_id: root.clone(),
        text: "keep this".into(),
        attachments: vec![pb::session_prompt_params::Attachment {
            kind: "file".into(),
            path: Some(on_disk.to_string_lossy().into_owned()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let t = h
        .app
        .turns
        .prompt(&Harness::ctx("c1", Some("cli")), p)
        .await
        .unwrap();
    h.until_done(&t, |_| None).await;
    let child_of = |parent: String| crate::session::SessionSetup {
        kind: "subagent",
        parent_session_id: Some(parent),
        ..Default::default()
    };
    let create = pb::SessionCreateParams {
        workdir: h.workdir.to_string_lossy().into_owned(),
        mode: Some("accept".into()),
        ..Default::default()
    };
    let ctx = Harness::ctx("c1", Some("cli"));
    let child = h
        .app
        .sessions
        .create_with(&ctx, create.clone(), child_of(root.clone()))
        .await
        .unwrap()
        .session_id;
    let grandchild = h
        .app
        .sessions
        .create_with(&ctx, create, child_of(child.clone()))
        .await
        .unwrap()
        .session_id;
    let listed = |sid: &str| pb::SessionAttachmentsParams {
        session_id: sid.to_owned(),
    };
    let of_root = h.app.turns.attachments(listed(&root)).await.unwrap();
    assert_eq!(of_root.attachments.len(), 1);
    for sid in [&child, &grandchild] {
        let of_child = h.app.turns.attachments(listed(sid)).await.unwrap();
        assert_eq!(of_child, of_root, "{sid} reports its root's attachments");
    }
    let deleted = h
        .app
        .sessions
        .delete_saved(pb::SessionDeleteSavedParams {
            session_id: Some(root.clone()),
            delete_workspace: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(deleted.deleted, 1, "children are not counted");
    for sid in [&root, &child, &grandchild] {
        assert!(
            h.app.sessions.registry().row(sid).await.unwrap().is_none(),
            "{sid} is gone"
        );
    }
}
