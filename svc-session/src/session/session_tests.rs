use serde_json::json;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::tool_service_server::ToolService;

use crate::testkit::{Harness, Item};
use snowpea_session_error::Error;

fn create(workdir: &str, mode: Option<&str>) -> pb::SessionCreateParams {
    pb::SessionCreateParams {
        workdir: workdir.into(),
        mode: mode.map(str::to_owned),
        ..Default::default()
    }
}

fn field_of(e: Error) -> String {
    match e {
        Error::InvalidParams { field, .. } => field,
        other => panic!("expected invalid_params, got {other:?}"),
    }
}

#[tokio::test]
async fn create_validates_workdir_and_mode_naming_the_field() {
    let h = Harness::new(json!({})).await;
    let ctx = Harness::ctx("c1", None);
    for bad in ["relative/dir", "", "/definitely/not/here"] {
        let e = h
            .app
            .sessions
            .create(&ctx, create(bad, None))
            .await
            .unwrap_err();
        assert_eq!(field_of(e), "params.workdir", "{bad}");
    }
    let file = h.workdir.join("f.txt");
    std::fs::write(&file, "x").unwrap();
    let e = h
        .app
        .sessions
        .create(&ctx, create(file.to_str().unwrap(), None))
        .await
        .unwrap_err();
    assert_eq!(field_of(e), "params.workdir");
    let e = h
        .app
        .sessions
        .create(&ctx, create(h.workdir.to_str().unwrap(), Some("yolo")))
        .await
        .unwrap_err();
    assert_eq!(field_of(e), "params.mode");
    let rpc = e_status(
        h.app
            .sessions
            .create(&ctx, create("rel", None))
            .await
            .unwrap_err(),
    );
    assert_eq!(rpc.code(), tonic::Code::InvalidArgument);
}

fn e_status(e: Error) -> tonic::Status {
    e.into()
}

#[tokio::test]
async fn create_makes_a_workspace_and_the_session_is_listed() {
    let mut h = Harness::new(json!({})).await;
    let r = h
        .app
        .sessions
        .create(
            &Harness::ctx("c1", Some("cli")),
            create(h.workdir.to_str().unwrap(), None),
        )
        .await
        .unwrap();
    let ws = std::path::PathBuf::from(r.workspace_dir.unwrap());
    assert!(ws.starts_with(h.home.sessions_dir()));
    assert!(ws
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .ends_with(&r.session_id));
    assert!(ws.join("tmp").is_dir() && ws.join("artifacts").is_dir());
    let list = h
        .app
        .sessions
        .list(pb::SessionListParams::default())
        .await
        .unwrap()
        .sessions;
    let s = list.iter().find(|s| s.session_id == r.session_id).unwrap();
    assert_eq!(s.mode, "accept", "default mode");
    assert_eq!(s.workdir, h.workdir.to_str().unwrap());
    assert_eq!(s.status, "idle");
    assert_eq!(s.kind, "chat");
    assert_eq!(s.host_tools_from.as_deref(), Some("cli"));
    loop {
        if let Item::Note(m, p) = h.next().await {
            if m == "sessions.changed" {
                assert_eq!(p["reason"], "create");
                assert_eq!(p["sessionId"], r.session_id.as_str());
                break;
            }
        }
    }
    let filtered = h
        .app
        .sessions
        .list(pb::SessionListParams {
            workdir: Some("/elsewhere".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(filtered.sessions.is_empty());
}

#[tokio::test]
async fn rename_and_set_mode_persist_and_notify() {
    let mut h = Harness::new(json!({})).await;
    let sid = h.create("plan").await;
    h.app.sessions.rename(&sid, "My title").await.unwrap();
    let mode = h.app.sessions.set_mode(&sid, "auto").await.unwrap();
    assert_eq!(mode.as_str(), "auto");
    let e = h.app.sessions.set_mode(&sid, "nope").await.unwrap_err();
    assert_eq!(field_of(e), "params.mode");
    assert!(matches!(
        h.app.sessions.rename("s_missing", "x").await,
        Err(Error::NotFound(_))
    ));
    let mut saw_rename = false;
    let mut saw_mode_event = false;
    while !(saw_rename && saw_mode_event) {
        if let Item::Note(m, p) = h.next().await {
            saw_rename |=
                m == "sessions.changed" && p["reason"] == "renamed" && p["title"] == "My title";
            saw_mode_event |= m == "session.event"
                && p["kind"] == "mode.changed"
                && p["payload"]["mode"] == "auto";
        }
    }
    let s = h
        .app
        .sessions
        .list(pb::SessionListParams::default())
        .await
        .unwrap()
        .sessions
        .remove(0);
    assert_eq!(s.title.as_deref(), Some("My title"));
    assert_eq!(s.mode, "auto");
    let r = h
        .app
        .sessions
        .resume(pb::SessionResumeParams {
            session_id: sid,
            after_seq: None,
            locale: None,
        })
        .await
        .unwrap();
    assert_eq!(r.mode.as_deref(), Some("auto"));
}

#[tokio::test]
async fn attach_makes_the_caller_the_origin() {
    let h = Harness::new(json!({})).await;
    let sid = h.create("accept").await;
    assert_eq!(
        h.app.sessions.get(&sid).unwrap().origin().as_deref(),
        Some("c1")
    );
    let r = h
        .app
        .sessions
        .attach(
            &Harness::ctx("c7", Some("ide")),
            pb::SessionAttachParams {
                session_id: sid.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r.session_id, sid);
    assert_eq!(
        h.app.sessions.get(&sid).unwrap().origin().as_deref(),
        Some("c7")
    );
    let e = h
        .app
        .sessions
        .attach(
            &Harness::ctx("c7", None),
            pb::SessionAttachParams {
                session_id: "s_x".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)));
}

#[tokio::test]
async fn tool_list_reports_the_builtin_tools() {
    let h = Harness::new(json!({})).await;
    let sid = h.create("accept").await;
    let rpc = crate::rpc::tool::ToolRpc::new(h.app.clone());
    let r = rpc
        .list(tonic::Request::new(pb::ToolListParams {
            session_id: Some(sid),
        }))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<_> = r.tools.iter().map(|t| t.name.as_str()).collect();
    // The issue-2 built-ins first, in order; the other registered built-ins follow.
    assert_eq!(
        names[..7],
        [
            "read_file",
            "write_file",
            "edit_file",
            "list_dir",
            "glob",
            "grep",
            "shell"
        ]
    );
    let registered: Vec<_> = h.app.tools.builtin().iter().map(|t| t.name()).collect();
    assert_eq!(names[..registered.len()], registered[..]);
    let shell = r.tools.iter().find(|t| t.name == "shell").unwrap();
    assert_eq!(shell.permission_tag, "exec");
    assert!(!shell.description.is_empty());
    let err = rpc
        .list(tonic::Request::new(pb::ToolListParams {
            session_id: Some("s_nope".into()),
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
}
