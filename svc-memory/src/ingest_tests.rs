//! Ingest dedup and the delete forms of browsing memories.

use snowpea_proto::memory::v1::memory_ingest_params::Item;

use super::*;
use crate::store::memories::recent;

fn item(url: &str, text: &str, visited: Option<&str>) -> Item {
    Item {
        url: url.into(),
        text: text.into(),
        title: "t".into(),
        visited_at: visited.map(Into::into),
    }
}

fn count(s: &Store) -> usize {
    s.read(|c| recent(c, &[Namespace::Browser], 1000))
        .unwrap()
        .len()
}

#[test]
fn pages_are_stored_once_per_url_and_text() {
    let t = tempfile::tempdir().unwrap();
    let s = Store::open(&t.path().join("m.db")).unwrap();
    let r = ingest(
        &s,
        &[
            item("https://a.example/x", "hello", None),
            item("https://a.example/x#frag", "hello", None),
        ],
        None,
    )
    .unwrap();
    assert_eq!(
        r,
        Ingested {
            added: 1,
            skipped: 1
        }
    );
    let r = ingest(
        &s,
        &[
            item("https://a.example/x", "hello", None),
            item("https://a.example/x", "changed", None),
        ],
        Some("s1"),
    )
    .unwrap();
    assert_eq!(
        r,
        Ingested {
            added: 1,
            skipped: 1
        }
    );
    assert_eq!(count(&s), 2);
    match ingest(
        &s,
        &[
            item("https://a.example/ok", "x", None),
            item("not a url", "x", None),
        ],
        None,
    ) {
        Err(Error::InvalidParams { field, .. }) => assert_eq!(field, "params.items[1].url"),
        other => panic!("{other:?}"),
    }
    match ingest(
        &s,
        &[item("https://a.example/", "x", Some("last week"))],
        None,
    ) {
        Err(Error::InvalidParams { field, .. }) => assert_eq!(field, "params.items[0].visitedAt"),
        other => panic!("{other:?}"),
    }
    assert_eq!(count(&s), 2, "a bad batch stores nothing");
}

#[test]
fn delete_by_page_site_before_and_all() {
    let t = tempfile::tempdir().unwrap();
    let s = Store::open(&t.path().join("m.db")).unwrap();
    ingest(
        &s,
        &[
            item("https://a.example/one", "1", Some("2026-01-01T00:00:00Z")),
            item("https://a.example/two", "2", Some("2026-01-03T00:00:00Z")),
            item("https://b.example/one", "3", Some("2026-01-02T00:00:00Z")),
            item(
                "https://b.example/two?q=1",
                "4",
                Some("2026-01-04T00:00:00Z"),
            ),
            item("https://c.example/", "5", Some("2026-01-05T00:00:00Z")),
        ],
        None,
    )
    .unwrap();
    let f = browser_filter(Some("https://a.example/one"), None).unwrap();
    assert_eq!(forget(&s, &f).unwrap(), 1, "one page");
    let f = browser_filter(Some("https://b.example"), None).unwrap();
    assert_eq!(f.origin.as_deref(), Some("https://b.example"));
    assert_eq!(forget(&s, &f).unwrap(), 2, "a whole site");
    let f = browser_filter(None, Some("2026-01-04T00:00:00Z")).unwrap();
    assert_eq!(forget(&s, &f).unwrap(), 1, "visits before");
    assert_eq!(
        forget(&s, &browser_filter(None, None).unwrap()).unwrap(),
        1,
        "all"
    );
    assert_eq!(count(&s), 0);
    assert!(
        matches!(browser_filter(Some("nope"), None), Err(Error::InvalidParams { field, .. }) if field == "params.url")
    );
    assert!(
        matches!(browser_filter(None, Some("x")), Err(Error::InvalidParams { field, .. }) if field == "params.before")
    );
}
