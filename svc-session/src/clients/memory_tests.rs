//! svc-memory down: recall is empty (and quick), the tools fail with a clear error.

use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::tools::memory::{SaveMemory, SearchMemory};
use crate::tools::Tool;

fn down() -> (tempfile::TempDir, MemoryClient) {
    let t = tempfile::tempdir().unwrap();
    let c =
        MemoryClient::new(t.path().join("memory.sock")).with_timeout(Duration::from_millis(500));
    (t, c)
}

#[tokio::test]
async fn recall_with_the_service_down_is_empty_and_bounded() {
    let (_t, c) = down();
    let start = Instant::now();
    let got = tokio::time::timeout(
        Duration::from_secs(10),
        c.recall("/p", Some("a"), "what editor?", 8),
    )
    .await
    .unwrap();
    assert!(got.is_empty());
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn tools_fail_clearly_when_the_service_is_down() {
    let (t, c) = down();
    let (ctx, _rx) = crate::tools::test_context(t.path(), 4096);
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        SaveMemory::new(c.clone()).run(json!({"text": "x"}), ctx.clone()),
    )
    .await
    .unwrap();
    assert!(!out.ok);
    assert!(
        out.content.contains("memory service is unavailable"),
        "{}",
        out.content
    );
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        SearchMemory::new(c).run(json!({"query": "x"}), ctx),
    )
    .await
    .unwrap();
    assert!(!out.ok);
    assert!(
        out.content.contains("memory service is unavailable"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn plans_validate_and_tag_permissions() {
    let (t, c) = down();
    let save = SaveMemory::new(c.clone());
    assert_eq!(
        save.plan(&json!({"text": "a", "tags": ["x"]}), t.path())
            .unwrap()
            .permission,
        crate::tools::Permission::Write
    );
    assert!(save.plan(&json!({"text": " "}), t.path()).is_err());
    assert!(save
        .plan(&json!({"text": "a", "tags": [1]}), t.path())
        .is_err());
    let search = SearchMemory::new(c);
    assert_eq!(
        search
            .plan(&json!({"query": "a"}), t.path())
            .unwrap()
            .permission,
        crate::tools::Permission::Read
    );
    assert!(search.plan(&json!({}), t.path()).is_err());
}

#[test]
fn top_k_namespaces_and_prompt_block() {
    assert_eq!(top_k(&json!({})), 8);
    assert_eq!(top_k(&json!({"memory": {"top_k": 3}})), 3);
    assert_eq!(
        session_namespaces("/p", None),
        vec!["project:/p", "default"]
    );
    assert_eq!(
        session_namespaces("/p", Some("rev")),
        vec!["project:/p", "agent:rev", "default"]
    );
    assert_eq!(recall_block(&[]), None);
    let b = recall_block(&["likes helix\neditor".into()]).unwrap();
    assert!(b.contains("- likes helix editor\n"), "{b}");
}
