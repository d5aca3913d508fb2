//! Site-memory operations: every `site.put` refusal and limit, urlPattern specificity,
//! mark/markPart counters, eviction, paging.

use prost_types::value::Kind;
use snowpea_proto::memory::v1::site_put_params::Entry as PutEntry;
use snowpea_proto::memory::v1::{site_action, site_recipe, SiteAction, SiteFlow, SiteRecipe};

use super::*;
use crate::error::Error;

fn store() -> (tempfile::TempDir, Store) {
    let t = tempfile::tempdir().unwrap();
    let s = Store::open(&t.path().join("memory.db")).unwrap();
    (t, s)
}

fn locator(by: &str, value: Option<&str>) -> site_action::Locator {
    site_action::Locator {
        by: by.into(),
        name: Some("Search".into()),
        role: (by == "role").then(|| "textbox".into()),
        value: value.map(Into::into),
    }
}

fn good(page_type: &str, pattern: &str) -> PutEntry {
    PutEntry {
        page_type: page_type.into(),
        url_pattern: pattern.into(),
        summary: "Product search results".into(),
        landmarks: vec!["header nav".into()],
        actions: vec![SiteAction {
            name: "search box".into(),
            kind: "fill".into(),
            locators: vec![locator("css", Some("input#q")), locator("role", None)],
            ..Default::default()
        }],
        flows: vec![SiteFlow {
            name: "search".into(),
            steps: vec![
                prost_types::Value {
                    kind: Some(Kind::StringValue("type the query".into())),
                },
                snowpea_proto::wkt::to_value(
                    &serde_json::json!({"verb": "enter", "action": "search box"}),
                ),
            ],
            ..Default::default()
        }],
        recipes: vec![SiteRecipe {
            name: "results".into(),
            item: "li.result".into(),
            fields: vec![site_recipe::Field {
                name: "title".into(),
                selector: "h3".into(),
                attr: None,
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn refused(s: &Store, e: PutEntry) -> String {
    match put(s, "p1", "https://shop.example", e) {
        Err(Error::InvalidParams { field, .. }) => field,
        other => panic!("expected invalid_params, got {other:?}"),
    }
}

#[test]
fn put_creates_then_upserts_by_origin_and_page_type() {
    let (_t, s) = store();
    let (created, id) = put(&s, "p1", "https://Shop.Example/", good("search", "/search")).unwrap();
    assert!(created);
    let (created2, id2) =
        put(&s, "p1", "https://shop.example", good("search", "/search*")).unwrap();
    assert!(!created2);
    assert_eq!(id, id2);
    let got = get(&s, "p1", "https://shop.example", None, None).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].url_pattern, "/search*");
    assert_eq!(got[0].success_count, 2, "a put counts as a success");
    assert!(
        get(&s, "p2", "https://shop.example", None, None)
            .unwrap()
            .is_empty(),
        "profiles are separate"
    );
}

/// The `siteFrameActions` capability (issue 32 item 8): an action's `frames` (the iframes on
/// the way to it, outermost first) are kept by `site.put` and returned by `site.get`.
#[test]
fn frames_of_an_action_are_kept_and_returned() {
    let (_t, s) = store();
    let mut e = good("checkout", "/checkout");
    e.actions[0].frames = vec![
        site_action::Frame {
            origin: "https://pay.example".into(),
            path: "/widget".into(),
            selector: "iframe#pay".into(),
        },
        site_action::Frame {
            origin: "https://pay.example".into(),
            path: "/card".into(),
            selector: "iframe[name=card]".into(),
        },
    ];
    let frames = e.actions[0].frames.clone();
    put(&s, "p1", "https://shop.example", e).unwrap();
    let got = get(&s, "p1", "https://shop.example", Some("checkout"), None).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].actions[0].frames, frames);
}

#[test]
fn every_put_refusal_names_its_field() {
    let (_t, s) = store();
    let mut e = good("search", "/s");
    e.page_type = " ".into();
    assert_eq!(refused(&s, e), "params.entry.pageType");
    assert_eq!(
        refused(&s, good("search", "search")),
        "params.entry.urlPattern"
    );
    let mut e = good("search", "/s");
    e.actions[0].locators[0].value = Some("//input[@id='q']".into());
    assert_eq!(refused(&s, e), "params.entry.actions[0].locators[0].value");
    let mut e = good("search", "/s");
    e.actions[0].kind = "hover".into();
    assert_eq!(refused(&s, e), "params.entry.actions[0].kind");
    let mut e = good("search", "/s");
    e.actions[0].locators[1].by = "xpath".into();
    assert_eq!(refused(&s, e), "params.entry.actions[0].locators[1].by");
    let mut e = good("search", "/s");
    e.actions[0].locators.clear();
    assert_eq!(refused(&s, e), "params.entry.actions[0].locators");
    let mut e = good("search", "/s");
    e.actions[0].frames.push(site_action::Frame {
        origin: "https://pay.example".into(),
        path: "/".into(),
        selector: "/html/body/iframe".into(),
    });
    assert_eq!(refused(&s, e), "params.entry.actions[0].frames[0].selector");
    let mut e = good("search", "/s");
    e.recipes[0].fields[0].selector = "./h3".into();
    assert_eq!(refused(&s, e), "params.entry.recipes[0].fields[0].selector");
    // No values on login fields.
    let mut e = good("login", "/login");
    e.actions[0].login_field = true;
    e.actions[0].locators = vec![locator("label", Some("jane"))];
    assert_eq!(refused(&s, e), "params.entry.actions[0].locators[0].value");
    // Personal data and credentials, wherever they are.
    let mut e = good("search", "/s");
    e.summary = "logged in as jane@example.com".into();
    assert_eq!(refused(&s, e), "params.entry.summary");
    let mut e = good("search", "/s");
    e.pitfalls = vec!["ok".into(), "support line +1 (555) 123-4567".into()];
    assert_eq!(refused(&s, e), "params.entry.pitfalls[1]");
    let mut e = good("search", "/s");
    e.landmarks = vec!["saved card 4111-1111-1111-1111".into()];
    assert_eq!(refused(&s, e), "params.entry.landmarks[0]");
    let mut e = good("search", "/s");
    e.actions[0].locators[1].name = Some("sk-live-abcdefghijklmnopqrstu".into());
    assert_eq!(refused(&s, e), "params.entry.actions[0].locators[1].name");
    let mut e = good("search", "/s");
    e.flows[0].steps[0] = prost_types::Value {
        kind: Some(Kind::StringValue("type password: hunter2".into())),
    };
    assert_eq!(refused(&s, e), "params.entry.flows[0].steps[0]");
    let mut e = good("search", "/s");
    e.flows[0].steps[1] = snowpea_proto::wkt::to_value(&serde_json::json!({"verb": "jump"}));
    assert_eq!(refused(&s, e), "params.entry.flows[0].steps[1].verb");
    let mut e = good("search", "/s");
    e.flows.push(e.flows[0].clone());
    assert_eq!(refused(&s, e), "params.entry.flows[1].name");
    let mut e = good("search", "/s");
    e.last_verified = Some("yesterday".into());
    assert_eq!(refused(&s, e), "params.entry.lastVerified");
    // 24 KB per entry.
    let mut e = good("search", "/s");
    e.pitfalls = (0..300)
        .map(|i| format!("pitfall number {i} {}", "x".repeat(80)))
        .collect();
    assert_eq!(refused(&s, e), "params.entry");
    // A bad origin.
    assert!(matches!(
        put(&s, "p1", "shop.example/path", good("search", "/s")),
        Err(Error::InvalidParams { field, .. }) if field == "params.origin"
    ));
    assert!(
        get(&s, "p1", "https://shop.example", None, None)
            .unwrap()
            .is_empty(),
        "nothing stored"
    );
}

#[test]
fn an_entry_just_under_24_kb_is_accepted() {
    let (_t, s) = store();
    let mut e = good("search", "/s");
    let base = validate::json_size(&e);
    e.summary
        .push_str(&"y".repeat(validate::MAX_ENTRY_BYTES - base));
    assert_eq!(validate::json_size(&e), validate::MAX_ENTRY_BYTES);
    put(&s, "p1", "https://shop.example", e.clone()).unwrap();
    e.summary.push('y');
    assert_eq!(refused(&s, e), "params.entry");
}

#[test]
fn thirty_entries_per_origin() {
    let (_t, s) = store();
    for i in 0..MAX_ENTRIES_PER_ORIGIN {
        put(
            &s,
            "p1",
            "https://shop.example",
            good(&format!("t{i}"), "/s"),
        )
        .unwrap();
    }
    assert_eq!(refused(&s, good("one-more", "/s")), "params.origin");
    // Updating an existing page type is still fine, and other origins are unaffected.
    put(&s, "p1", "https://shop.example", good("t0", "/t")).unwrap();
    put(&s, "p1", "https://other.example", good("one-more", "/s")).unwrap();
}

#[test]
fn past_1000_origins_the_least_recently_verified_is_dropped() {
    let (_t, s) = store();
    let mut e = good("home", "/");
    for i in 0..MAX_ORIGINS {
        // Origin 0 is verified last (most recently), origin 1 first (least recently).
        let when = if i == 0 { 5000 } else { i };
        e.last_verified = Some(format!(
            "{}",
            jiff::Timestamp::from_second(when as i64).unwrap()
        ));
        put(&s, "p1", &format!("https://site{i}.example"), e.clone()).unwrap();
    }
    let count = |s: &Store| {
        s.read(|c| {
            Ok(c.query_row(
                "SELECT count(DISTINCT origin) FROM site_entries WHERE profile='p1'",
                [],
                |r| r.get::<_, i64>(0),
            )?)
        })
        .unwrap()
    };
    assert_eq!(count(&s), 1000);
    e.last_verified = None;
    put(&s, "p1", "https://new.example", e.clone()).unwrap();
    assert_eq!(count(&s), 1000);
    assert!(
        get(&s, "p1", "https://site1.example", None, None)
            .unwrap()
            .is_empty(),
        "least recently verified dropped"
    );
    assert_eq!(
        get(&s, "p1", "https://site0.example", None, None)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        get(&s, "p1", "https://new.example", None, None)
            .unwrap()
            .len(),
        1
    );
    // Another profile is not counted against this one.
    put(&s, "p2", "https://site1.example", e).unwrap();
    assert_eq!(count(&s), 1000);
}

#[test]
fn get_matches_url_patterns_most_specific_first() {
    let (_t, s) = store();
    let o = "https://shop.example";
    put(&s, "p1", o, good("any", "/*")).unwrap();
    put(&s, "p1", o, good("product", "/products/:id")).unwrap();
    put(&s, "p1", o, good("reviews", "/products/*/reviews")).unwrap();
    put(&s, "p1", o, good("cart", "/cart")).unwrap();
    let types = |path: Option<&str>, pt: Option<&str>| -> Vec<String> {
        get(&s, "p1", o, pt, path)
            .unwrap()
            .into_iter()
            .map(|e| e.page_type)
            .collect()
    };
    assert_eq!(types(Some("/products/42"), None), vec!["product", "any"]);
    assert_eq!(
        types(Some("/products/42/reviews?page=2"), None),
        vec!["reviews", "any"]
    );
    assert_eq!(types(Some("/cart"), None), vec!["cart", "any"]);
    assert_eq!(types(Some("/products/42"), Some("any")), vec!["any"]);
    assert_eq!(types(None, None).len(), 4);
}

#[test]
fn mark_counts_and_flags() {
    let (_t, s) = store();
    let o = "https://shop.example";
    let (_, id) = put(&s, "p1", o, good("search", "/s")).unwrap();
    let e = mark(&s, "p1", o, &id, "stale").unwrap();
    assert_eq!((e.success_count, e.failure_count, e.stale), (1, 1, true));
    let stale_verified = e.last_verified.clone();
    assert!(
        get(&s, "p1", o, None, None).unwrap()[0].stale,
        "stale entries included, flagged"
    );
    std::thread::sleep(std::time::Duration::from_millis(3));
    let e = mark(&s, "p1", o, &id, "ok").unwrap();
    assert_eq!((e.success_count, e.failure_count, e.stale), (2, 1, false));
    assert!(e.last_verified > stale_verified, "ok sets lastVerified");
    mark(&s, "p1", o, &id, "stale").unwrap();
    let (_, again) = put(&s, "p1", o, good("search", "/s")).unwrap();
    let e = &get(&s, "p1", o, None, None).unwrap()[0];
    assert_eq!(
        (again, e.stale, e.success_count, e.failure_count),
        (id.clone(), false, 3, 2),
        "a put clears stale"
    );
    assert!(matches!(
        mark(&s, "p1", o, "site_nope", "ok"),
        Err(Error::NotFound(_))
    ));
    assert!(
        matches!(mark(&s, "p2", o, &id, "ok"), Err(Error::NotFound(_))),
        "other profile"
    );
}

#[test]
fn mark_part_counts_exactly_as_specified() {
    let (_t, s) = store();
    let o = "https://shop.example";
    let (_, id) = put(&s, "p1", o, good("search", "/s")).unwrap();
    let before = get(&s, "p1", o, None, None).unwrap().remove(0);
    let e = mark_part(&s, "p1", o, &id, "flow", "search", "ok").unwrap();
    let st = e.flows[0].stats.clone().unwrap();
    assert_eq!((st.ok, st.missed), (1, 0));
    assert!(st.last_run.is_some());
    let e = mark_part(&s, "p1", o, &id, "flow", "search", "miss").unwrap();
    let st2 = e.flows[0].stats.clone().unwrap();
    assert_eq!((st2.ok, st2.missed, st2.last_run), (1, 1, st.last_run));
    let e = mark_part(&s, "p1", o, &id, "recipe", "results", "ok").unwrap();
    let rs = e.recipes[0].stats.unwrap();
    assert_eq!((rs.hits, rs.misses, e.recipes[0].stale), (1, 0, false));
    assert_eq!(rs.day, Some(snowpea_common::time::now_ms() / 86_400_000));
    let e = mark_part(&s, "p1", o, &id, "recipe", "results", "miss").unwrap();
    assert_eq!(
        (e.recipes[0].stats.unwrap().misses, e.recipes[0].stale),
        (1, false)
    );
    let e = mark_part(&s, "p1", o, &id, "recipe", "results", "stale").unwrap();
    assert_eq!(
        (e.recipes[0].stats.unwrap().misses, e.recipes[0].stale),
        (2, true)
    );
    let e = mark_part(&s, "p1", o, &id, "recipe", "results", "ok").unwrap();
    assert_eq!(
        (e.recipes[0].stats.unwrap().hits, e.recipes[0].stale),
        (2, false)
    );
    // The entry itself is untouched: never counts as verification.
    assert_eq!(
        (e.success_count, e.failure_count, e.stale, &e.last_verified),
        (
            before.success_count,
            before.failure_count,
            before.stale,
            &before.last_verified
        )
    );
    for (part, name) in [("flow", "nope"), ("recipe", "nope")] {
        assert!(matches!(
            mark_part(&s, "p1", o, &id, part, name, "ok"),
            Err(Error::NotFound(_))
        ));
    }
    assert!(matches!(
        mark_part(&s, "p1", o, "site_x", "flow", "search", "ok"),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        mark_part(&s, "p1", o, &id, "flow", "search", "stale"),
        Err(Error::InvalidParams { field, .. }) if field == "params.outcome"
    ));
}

#[test]
fn list_pages_with_a_cursor_and_delete_forms() {
    let (_t, s) = store();
    for i in 0..7 {
        put(&s, "p1", &format!("https://s{i}.example"), good("a", "/a")).unwrap();
    }
    put(&s, "p1", "https://s0.example", good("b", "/b")).unwrap();
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let (page, next) = list(&s, "p1", None, cursor.as_deref(), 3).unwrap();
        assert!(page.len() <= 3);
        seen.extend(page.iter().map(|p| p.origin.clone()));
        if seen.len() == 1 {
            unreachable!()
        }
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(
        seen,
        (0..7)
            .map(|i| format!("https://s{i}.example"))
            .collect::<Vec<_>>()
    );
    let (one, next) = list(&s, "p1", Some("https://s0.example"), None, 0).unwrap();
    assert_eq!(
        (one.len(), one[0].entries, one[0].page_types.clone(), next),
        (1, 2, vec!["a".into(), "b".into()], None)
    );
    assert!(
        matches!(list(&s, "p1", None, Some("zz"), 3), Err(Error::InvalidParams { field, .. }) if field == "params.cursor")
    );
    let id = get(&s, "p1", "https://s0.example", Some("a"), None).unwrap()[0]
        .entry_id
        .clone();
    assert_eq!(
        delete(&s, "p1", "https://s0.example", Some(&id)).unwrap(),
        1
    );
    assert_eq!(
        delete(&s, "p1", "https://s0.example", Some(&id)).unwrap(),
        0
    );
    assert_eq!(
        delete(&s, "p2", "https://s1.example", None).unwrap(),
        0,
        "other profile"
    );
    assert_eq!(delete(&s, "p1", "https://s1.example", None).unwrap(), 1);
}
