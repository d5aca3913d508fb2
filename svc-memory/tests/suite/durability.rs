//! kill -9 right after acknowledged writes loses none of them.

use snowpea_proto::memory::v1::{self as pb, site_action, SiteAction};

use super::harness::*;

#[tokio::test]
async fn kill_9_after_acknowledged_writes_loses_nothing() {
    let mut svc = Svc::start().await;
    let mut m = svc.memory();
    let mut ids = Vec::new();
    for i in 0..20 {
        let p = pb::MemoryWriteParams {
            namespace: None,
            tags: vec![],
            text: format!("durable fact number {i} zebra"),
        };
        ids.push(call(m.write(p)).await.unwrap().id);
    }
    let mut s = svc.site();
    let e = SiteAction {
        name: "go".into(),
        kind: "click".into(),
        locators: vec![site_action::Locator {
            by: "text".into(),
            value: Some("Go".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let put = pb::SitePutParams {
        entry: Some(pb::site_put_params::Entry {
            page_type: "home".into(),
            url_pattern: "/".into(),
            actions: vec![e],
            ..Default::default()
        }),
        origin: "https://k.example".into(),
    };
    call(s.put(as_browser(put, "p1"))).await.unwrap();
    // The very last write is acknowledged, then the process dies at once.
    ids.push(
        call(m.write(pb::MemoryWriteParams {
            namespace: None,
            tags: vec![],
            text: "last word zebra".into(),
        }))
        .await
        .unwrap()
        .id,
    );
    svc.restart().await;
    let mut m = svc.memory();
    let p = pb::MemoryListParams {
        limit: 100,
        ..Default::default()
    };
    let listed: Vec<String> = call(m.list(p))
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.id)
        .collect();
    for id in &ids {
        assert!(listed.contains(id), "acknowledged write {id} lost");
    }
    let hits = call(m.search(pb::MemorySearchParams {
        limit: 50,
        namespace: None,
        query: "zebra".into(),
    }))
    .await
    .unwrap()
    .hits;
    assert_eq!(hits.len(), 21, "the index survived too");
    let mut s = svc.site();
    let got = call(s.get(as_browser(
        pb::SiteGetParams {
            origin: "https://k.example".into(),
            ..Default::default()
        },
        "p1",
    )))
    .await
    .unwrap();
    assert_eq!(got.entries.len(), 1);
}
