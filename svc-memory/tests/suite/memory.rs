//! `memory.*` over the socket.

use snowpea_proto::memory::v1::{self as pb, memory_ingest_params::Item};

use super::harness::*;

fn write(text: &str, ns: Option<&str>, tags: &[&str]) -> pb::MemoryWriteParams {
    pb::MemoryWriteParams {
        namespace: ns.map(Into::into),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        text: text.into(),
    }
}

fn search(q: &str, ns: Option<&str>) -> pb::MemorySearchParams {
    pb::MemorySearchParams {
        limit: 0,
        namespace: ns.map(Into::into),
        query: q.into(),
    }
}

#[tokio::test]
async fn write_then_search_ranks_and_never_crosses_namespaces() {
    let svc = Svc::start().await;
    let mut m = svc.memory();
    call(m.write(write(
        "The CI runs on a self-hosted runner named blizzard",
        None,
        &[],
    )))
    .await
    .unwrap();
    let id = call(m.write(write(
        "User's favourite editor is helix; keybindings are kakoune-like",
        None,
        &["editor", "prefs"],
    )))
    .await
    .unwrap()
    .id;
    let other = call(m.write(write(
        "favourite editor in this repo: vim",
        Some("project:/work/x"),
        &[],
    )))
    .await
    .unwrap()
    .id;
    let hits = call(m.search(search("what editor is my favourite?", None)))
        .await
        .unwrap()
        .hits;
    assert_eq!(hits[0].id, id);
    assert_eq!(hits[0].tags, vec!["editor", "prefs"]);
    assert_eq!(hits[0].scope, "global");
    assert!(hits[0].score > 0.0);
    assert!(
        hits.iter().all(|h| h.id != other),
        "default never sees project memories"
    );
    let hits = call(m.search(search("editor", Some("project:/work/x"))))
        .await
        .unwrap()
        .hits;
    assert_eq!(
        (
            hits.len(),
            hits[0].id.as_str(),
            hits[0].scope.as_str(),
            hits[0].project.as_str()
        ),
        (1, other.as_str(), "project", "/work/x")
    );
    // Korean, partial word and short query.
    let ko = call(m.write(write(
        "배포는 금요일 오후에 하지 않는다",
        Some("agent:ops"),
        &[],
    )))
    .await
    .unwrap()
    .id;
    for q in ["금요일", "배포", "금요"] {
        let hits = call(m.search(search(q, Some("agent:ops"))))
            .await
            .unwrap()
            .hits;
        assert_eq!(
            hits.iter().map(|h| h.id.clone()).collect::<Vec<_>>(),
            vec![ko.clone()],
            "{q}"
        );
    }
}

#[tokio::test]
async fn bad_params_name_the_field() {
    let svc = Svc::start().await;
    let mut m = svc.memory();
    assert_invalid(call(m.write(write("  ", None, &[]))).await, "params.text");
    assert_invalid(
        call(m.write(write("x", Some("project:relative"), &[]))).await,
        "params.namespace",
    );
    assert_invalid(
        call(m.write(write("x", Some("elsewhere"), &[]))).await,
        "params.namespace",
    );
    assert_invalid(
        call(m.write(write("x", None, &["ok", ""]))).await,
        "params.tags[1]",
    );
    assert_invalid(call(m.search(search(" ", None))).await, "params.query");
    let mut p = search("x", None);
    p.limit = -1;
    assert_invalid(call(m.search(p)).await, "params.limit");
    assert_invalid(
        call(m.list(pb::MemoryListParams {
            project: Some("rel".into()),
            ..Default::default()
        }))
        .await,
        "params.project",
    );
    assert_invalid(
        call(m.delete(pb::MemoryDeleteParams::default())).await,
        "params.id",
    );
    assert_code(
        call(m.delete(pb::MemoryDeleteParams {
            id: Some("mem_nope".into()),
            ..Default::default()
        }))
        .await,
        "not_found",
    );
}

#[tokio::test]
async fn list_resolves_scopes_newest_first() {
    let svc = Svc::start().await;
    let mut m = svc.memory();
    let g1 = call(m.write(write("global one", None, &[])))
        .await
        .unwrap()
        .id;
    let p1 = call(m.write(write("project one", Some("project:/work/app"), &[])))
        .await
        .unwrap()
        .id;
    let g2 = call(m.write(write("global two", None, &[])))
        .await
        .unwrap()
        .id;
    call(m.write(write("other project", Some("project:/work/other"), &[])))
        .await
        .unwrap();
    let ids = |r: pb::MemoryListResult| r.entries.into_iter().map(|e| e.id).collect::<Vec<_>>();
    let all = call(m.list(pb::MemoryListParams {
        project: Some("/work/app/".into()),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert_eq!(all.entries[1].scope, "project");
    assert_eq!(all.entries[1].project, "/work/app");
    assert!(!all.entries[0].created_at.is_empty());
    assert_eq!(ids(all), vec![g2.clone(), p1.clone(), g1.clone()]);
    let global = call(m.list(pb::MemoryListParams::default())).await.unwrap();
    assert_eq!(
        ids(global),
        vec![g2.clone(), g1.clone()],
        "no session, no project: global only"
    );
    let project = call(m.list(pb::MemoryListParams {
        project: Some("/work/app".into()),
        scope: Some("project".into()),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert_eq!(ids(project), vec![p1.clone()]);
    let filtered = call(m.list(pb::MemoryListParams {
        project: Some("/work/app".into()),
        query: Some("project".into()),
        limit: 5,
        ..Default::default()
    }))
    .await
    .unwrap();
    assert_eq!(ids(filtered), vec![p1]);
    let limited = call(m.list(pb::MemoryListParams {
        limit: 1,
        ..Default::default()
    }))
    .await
    .unwrap();
    assert_eq!(ids(limited), vec![g2]);
    // A sessionId needs svc-session, which is not running here: a clear `unavailable`.
    assert_code(
        call(m.list(pb::MemoryListParams {
            session_id: Some("s_1".into()),
            ..Default::default()
        }))
        .await,
        "unavailable",
    );
}

#[tokio::test]
async fn ingest_once_per_url_and_text_and_delete_by_source() {
    let svc = Svc::start().await;
    let mut m = svc.memory();
    let item = |url: &str, text: &str, at: &str| Item {
        text: text.into(),
        title: "page".into(),
        url: url.into(),
        visited_at: Some(at.into()),
    };
    let items = vec![
        item(
            "https://docs.example/a",
            "tokio runtime guide",
            "2026-01-01T00:00:00Z",
        ),
        item(
            "https://docs.example/b",
            "axum routing guide",
            "2026-01-02T00:00:00Z",
        ),
        item(
            "https://blog.example/post",
            "a post about routing",
            "2026-01-03T00:00:00Z",
        ),
    ];
    let r = call(m.ingest(pb::MemoryIngestParams {
        items: items.clone(),
        session_id: None,
    }))
    .await
    .unwrap();
    assert_eq!((r.added, r.skipped), (3, 0));
    let r = call(m.ingest(pb::MemoryIngestParams {
        items,
        session_id: None,
    }))
    .await
    .unwrap();
    assert_eq!(
        (r.added, r.skipped),
        (0, 3),
        "a repeat is skipped, not stored twice"
    );
    let hits = call(m.search(search("routing", Some("browser"))))
        .await
        .unwrap()
        .hits;
    assert_eq!(hits.len(), 2);
    assert!(
        call(m.search(search("routing", None)))
            .await
            .unwrap()
            .hits
            .is_empty(),
        "browser pages stay in their namespace"
    );
    assert_invalid(
        call(m.ingest(pb::MemoryIngestParams {
            items: vec![item("nope", "x", "2026-01-01T00:00:00Z")],
            session_id: None,
        }))
        .await,
        "params.items[0].url",
    );
    let del = |url: Option<&str>, before: Option<&str>| pb::MemoryDeleteParams {
        source: Some("browser".into()),
        url: url.map(Into::into),
        before: before.map(Into::into),
        id: None,
    };
    assert_eq!(
        call(m.delete(del(Some("https://docs.example/a"), None)))
            .await
            .unwrap()
            .removed,
        1,
        "a page"
    );
    assert_eq!(
        call(m.delete(del(None, Some("2026-01-02T12:00:00Z"))))
            .await
            .unwrap()
            .removed,
        1,
        "before"
    );
    assert_eq!(
        call(m.delete(del(Some("https://blog.example"), None)))
            .await
            .unwrap()
            .removed,
        1,
        "a whole site"
    );
    // Regression: an id together with source "browser" forgets that one page memory only,
    // never the whole namespace (an unknown id is not_found and removes nothing).
    call(m.ingest(pb::MemoryIngestParams {
        items: vec![item(
            "https://keep.example/1",
            "keep this okapi",
            "2026-01-04T00:00:00Z",
        )],
        session_id: None,
    }))
    .await
    .unwrap();
    let by_unknown_id = call(m.delete(pb::MemoryDeleteParams {
        source: Some("browser".into()),
        id: Some("mem_doesnotexist".into()),
        ..Default::default()
    }))
    .await;
    assert!(by_unknown_id.is_err(), "unknown id is not_found");
    assert_eq!(
        call(m.delete(del(None, None))).await.unwrap().removed,
        1,
        "the page survived the unknown-id delete; all removes it"
    );
    assert_invalid(
        call(m.delete(del(None, Some("soon")))).await,
        "params.before",
    );
    // Delete by id.
    let id = call(m.write(write("forget me", None, &[])))
        .await
        .unwrap()
        .id;
    let r = call(m.delete(pb::MemoryDeleteParams {
        id: Some(id),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert!(r.ok && r.removed == 1);
    assert!(call(m.search(search("forget", None)))
        .await
        .unwrap()
        .hits
        .is_empty());
}
