//! Service-level tests of `usage.summary`: grouping, sorting, totals, the window's edges
//! (against a naive scan of the events, over random windows), the trigger-kept index on
//! insert, delete and migration of an older database.

use rand::{Rng, SeedableRng};
use rusqlite::Connection;
use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::Usage;
use crate::store::{self, events::EventRow, Store};
use snowpea_session_error::Error;

struct Db {
    _tmp: tempfile::TempDir,
    conn: Connection,
    usage: Usage,
    next_seq: i64,
}

impl Db {
    fn new() -> Db {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("session.db");
        let conn = store::open(&path).unwrap();
        let usage = Usage::new(Store::open(&path).unwrap());
        Db {
            _tmp: tmp,
            conn,
            usage,
            next_seq: 0,
        }
    }

    fn add(&mut self, sid: &str, ts: &str, provider: &str, model: &str, inp: i64, out: i64) {
        self.next_seq += 1;
        store::events::insert(
            &self.conn,
            &EventRow {
                session_id: sid.into(),
                seq: self.next_seq,
                kind: "usage".into(),
                payload: json!({"inputTokens": inp, "outputTokens": out, "provider": provider, "model": model, "turnId": "t"}).to_string(),
                ts: ts.into(),
            },
        )
        .unwrap();
    }

    async fn summary(
        &self,
        group: &str,
        since: Option<&str>,
        until: Option<&str>,
    ) -> pb::UsageSummaryResult {
        self.usage
            .summary(pb::UsageSummaryParams {
                group_by: group.into(),
                since: since.map(Into::into),
                until: until.map(Into::into),
            })
            .await
            .unwrap()
    }
}

fn rows(r: &pb::UsageSummaryResult) -> Vec<(String, i64, i64, i64)> {
    r.rows
        .iter()
        .map(|r| (r.key.clone(), r.calls, r.input_tokens, r.output_tokens))
        .collect()
}

fn s(v: &str) -> String {
    v.to_owned()
}

#[tokio::test]
async fn groups_sort_by_total_tokens_and_add_grand_totals() {
    let mut db = Db::new();
    db.add(
        "s1",
        "2026-03-01T10:00:00.000Z",
        "anthropic",
        "claude-a",
        100,
        10,
    );
    db.add("s1", "2026-03-01T11:00:00.000Z", "openai", "gpt-x", 500, 50);
    db.add(
        "s2",
        "2026-03-02T09:00:00.000Z",
        "anthropic",
        "claude-b",
        300,
        30,
    );
    db.add(
        "s2",
        "2026-03-02T09:30:00.000Z",
        "anthropic",
        "claude-a",
        1,
        1,
    );
    // Another kind of event is not usage.
    store::events::insert(
        &db.conn,
        &EventRow {
            session_id: "s1".into(),
            seq: 99,
            kind: "message.delta".into(),
            payload: json!({"inputTokens": 1000}).to_string(),
            ts: "2026-03-01T10:00:00.000Z".into(),
        },
    )
    .unwrap();

    let p = db.summary("provider", None, None).await;
    assert_eq!(p.group_by, "provider");
    assert_eq!(
        rows(&p),
        vec![(s("openai"), 1, 500, 50), (s("anthropic"), 3, 401, 41)]
    );
    assert_eq!((p.input_tokens, p.output_tokens), (901, 91));

    let m = db.summary("model", None, None).await;
    assert_eq!(
        rows(&m),
        vec![
            (s("openai:gpt-x"), 1, 500, 50),
            (s("anthropic:claude-b"), 1, 300, 30),
            (s("anthropic:claude-a"), 2, 101, 11)
        ]
    );
    let by_session = db.summary("session", None, None).await;
    assert_eq!(
        rows(&by_session),
        vec![(s("s1"), 2, 600, 60), (s("s2"), 2, 301, 31)]
    );
    let by_day = db.summary("day", None, None).await;
    assert_eq!(
        rows(&by_day),
        vec![(s("2026-03-01"), 2, 600, 60), (s("2026-03-02"), 2, 301, 31)]
    );
    // The default grouping is provider.
    assert_eq!(db.summary("", None, None).await.group_by, "provider");
}

#[tokio::test]
async fn since_is_inclusive_until_exclusive_at_every_edge() {
    let mut db = Db::new();
    db.add("s", "2026-03-01T00:00:00.000Z", "p", "m", 1, 0);
    db.add("s", "2026-03-01T12:00:00.000Z", "p", "m", 10, 0);
    db.add("s", "2026-03-02T00:00:00.000Z", "p", "m", 100, 0);
    db.add("s", "2026-03-03T06:00:00.000Z", "p", "m", 1000, 0);
    let total = |r: pb::UsageSummaryResult| r.input_tokens;
    // Exactly on an event: since includes it, until excludes it.
    assert_eq!(
        total(
            db.summary(
                "day",
                Some("2026-03-01T12:00:00Z"),
                Some("2026-03-02T00:00:00Z")
            )
            .await
        ),
        10
    );
    assert_eq!(
        total(
            db.summary("day", Some("2026-03-01T12:00:00.001Z"), None)
                .await
        ),
        1100
    );
    assert_eq!(
        total(db.summary("day", None, Some("2026-03-01T12:00:00Z")).await),
        1
    );
    // Whole days plus partial edges; a bare date is midnight UTC; offsets convert.
    assert_eq!(
        total(
            db.summary("day", Some("2026-03-01"), Some("2026-03-03T06:00:00.001Z"))
                .await
        ),
        1111
    );
    assert_eq!(
        total(
            db.summary("day", Some("2026-03-01T13:00:00+01:00"), Some("2026-03-03"))
                .await
        ),
        110
    );
    // An empty window.
    let empty = db
        .summary(
            "day",
            Some("2026-03-02T00:00:00Z"),
            Some("2026-03-02T00:00:00Z"),
        )
        .await;
    assert!(empty.rows.is_empty() && empty.input_tokens == 0);
}

#[tokio::test]
async fn random_windows_agree_with_a_scan_of_the_events() {
    let mut db = Db::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(15);
    let base = "2026-01-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap();
    let mut events = vec![];
    for _ in 0..1500 {
        // Within 10 days, some exactly on midnight.
        let ms: i64 = if rng.random_bool(0.05) {
            rng.random_range(0..10) * 86_400_000
        } else {
            rng.random_range(0..10 * 86_400_000)
        };
        let ts = format!(
            "{:.3}",
            base.checked_add(jiff::SignedDuration::from_millis(ms))
                .unwrap()
        );
        let sid = format!("s{}", rng.random_range(0..5));
        let provider = ["a", "b", "c"][rng.random_range(0..3)];
        let inp = rng.random_range(0..1000);
        db.add(&sid, &ts, provider, "m", inp, 1);
        events.push((ts, provider.to_owned(), inp));
    }
    for _ in 0..200 {
        let pick = |rng: &mut rand::rngs::StdRng| -> Option<String> {
            match rng.random_range(0..4) {
                0 => None,
                1 => Some(format!("2026-01-{:02}", rng.random_range(1..12))),
                _ => Some(format!(
                    "{:.3}",
                    base.checked_add(jiff::SignedDuration::from_millis(
                        rng.random_range(-86_400_000..11 * 86_400_000)
                    ))
                    .unwrap()
                )),
            }
        };
        let (mut a, mut b) = (pick(&mut rng), pick(&mut rng));
        let norm = |x: &Option<String>| {
            x.as_ref()
                .map(|v| super::parse_bound("f", Some(v)).unwrap().unwrap())
        };
        if let (Some(x), Some(y)) = (norm(&a), norm(&b)) {
            if y < x {
                std::mem::swap(&mut a, &mut b);
            }
        }
        let (lo, hi) = (norm(&a), norm(&b));
        let mut want: std::collections::BTreeMap<String, i64> = Default::default();
        for (ts, p, inp) in &events {
            let t: jiff::Timestamp = ts.parse().unwrap();
            if lo.is_none_or(|l| t >= l) && hi.is_none_or(|h| t < h) {
                *want.entry(p.clone()).or_default() += inp;
            }
        }
        let got = db.summary("provider", a.as_deref(), b.as_deref()).await;
        let got: std::collections::BTreeMap<String, i64> = got
            .rows
            .iter()
            .map(|r| (r.key.clone(), r.input_tokens))
            .collect();
        assert_eq!(got, want, "window {a:?}..{b:?}");
    }
}

#[tokio::test]
async fn deleting_events_and_migrating_an_older_database_keep_the_index_right() {
    let mut db = Db::new();
    db.add("gone", "2026-03-01T10:00:00.000Z", "p", "m", 5, 5);
    db.add("kept", "2026-03-01T10:00:00.000Z", "p", "m", 7, 7);
    db.conn
        .execute("DELETE FROM events WHERE session_id = 'gone'", [])
        .unwrap();
    let r = db.summary("session", None, None).await;
    assert_eq!(rows(&r), vec![(s("kept"), 1, 7, 7)]);
    let r = db.summary("provider", None, None).await;
    assert_eq!(rows(&r), vec![(s("p"), 1, 7, 7)]);
    db.conn
        .execute("DELETE FROM events WHERE session_id = 'kept'", [])
        .unwrap();
    for table in ["usage_daily", "usage_daily_models", "usage_calls"] {
        let n: i64 = db
            .conn
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0, "{table}: emptied rows are gone");
    }

    // A database from before the usage index: its usage events are indexed on upgrade.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("old.db");
    {
        let old = snowpea_common::db::open(&path, &store::MIGRATIONS[..3]).unwrap();
        store::events::insert(
            &old,
            &EventRow {
                session_id: "old".into(),
                seq: 1,
                kind: "usage".into(),
                payload:
                    json!({"inputTokens": 3, "outputTokens": 4, "provider": "openai", "model": "x"})
                        .to_string(),
                ts: "2025-12-31T23:59:59.999Z".into(),
            },
        )
        .unwrap();
    }
    let usage = Usage::new(Store::open(&path).unwrap());
    let r = usage
        .summary(pb::UsageSummaryParams {
            group_by: "model".into(),
            since: None,
            until: Some("2026-01-01T00:00:00Z".into()),
        })
        .await
        .unwrap();
    assert_eq!(rows(&r), vec![(s("openai:x"), 1, 3, 4)]);
    let r = usage
        .summary(pb::UsageSummaryParams {
            group_by: "day".into(),
            since: None,
            until: None,
        })
        .await
        .unwrap();
    assert_eq!(rows(&r), vec![(s("2025-12-31"), 1, 3, 4)]);
}

#[tokio::test]
async fn bad_params_name_the_field() {
    let db = Db::new();
    let call = |g: &str, s: Option<&str>, u: Option<&str>| {
        db.usage.summary(pb::UsageSummaryParams {
            group_by: g.into(),
            since: s.map(Into::into),
            until: u.map(Into::into),
        })
    };
    let field = |e: Error| match e {
        Error::InvalidParams { field, .. } => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field(call("week", None, None).await.unwrap_err()),
        "params.groupBy"
    );
    assert_eq!(
        field(call("day", Some("yesterday"), None).await.unwrap_err()),
        "params.since"
    );
    assert_eq!(
        field(call("day", None, Some("2026-13-01")).await.unwrap_err()),
        "params.until"
    );
    assert_eq!(
        field(
            call("day", Some("2026-02-01"), Some("2026-01-01"))
                .await
                .unwrap_err()
        ),
        "params.until"
    );
}

fn pct(sorted: &[std::time::Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// docs/PERFORMANCE.md "usage.summary": seeds `SNOWPEA_BENCH_USAGE_EVENTS` (default
/// 1,000,000) usage events over 90 days, 2,000 sessions and 4 models through the real
/// `events` table (so the index triggers run), then times `usage.summary` per grouping and
/// window, beside a scan of the event JSON (what the index avoids).
#[tokio::test]
#[ignore = "benchmark: cargo test --release -p snowpea-svc-session --lib bench_ -- --ignored --nocapture"]
async fn bench_usage_summary_over_a_million_events() {
    use std::time::{Duration, Instant};
    let n: i64 = std::env::var("SNOWPEA_BENCH_USAGE_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let db = Db::new();
    let base = "2026-01-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap();
    let span_ms: i64 = 90 * 86_400_000;
    let models = [
        ("anthropic", "claude-sonnet-4"),
        ("openai", "gpt-4.1"),
        ("openrouter", "qwen/qwen3"),
        ("ollama", "llama3.1"),
    ];
    let seed = |conn: &Connection, n: i64| {
        conn.execute_batch("BEGIN").unwrap();
        for j in 0..n {
            let (p, m) = models[(j % 4) as usize];
            let ts = base
                .checked_add(jiff::SignedDuration::from_millis(j * span_ms / n))
                .unwrap();
            store::events::insert(
                conn,
                &EventRow {
                    session_id: format!("s{:04}", j % 2000),
                    seq: j / 2000 + 1,
                    kind: "usage".into(),
                    payload: json!({"inputTokens": 1000 + j % 977, "outputTokens": 100 + j % 131, "provider": p, "model": m, "turnId": format!("t{}", j / 7)}).to_string(),
                    ts: format!("{ts:.3}"),
                },
            )
            .unwrap();
        }
        conn.execute_batch("COMMIT").unwrap();
    };
    // The cost the triggers add at commit: 100k events with and without the index.
    let tmp = tempfile::tempdir().unwrap();
    let plain =
        snowpea_common::db::open(&tmp.path().join("plain.db"), &store::MIGRATIONS[..3]).unwrap();
    let t = Instant::now();
    seed(&plain, 100_000);
    let without = t.elapsed();
    let t = Instant::now();
    seed(&db.conn, n);
    let with = t.elapsed();
    println!(
        "seed: {n} usage events in {:.1} s ({:.0} events/s with the index triggers); 100k events without the index: {:.0} events/s",
        with.as_secs_f64(),
        n as f64 / with.as_secs_f64(),
        100_000.0 / without.as_secs_f64()
    );
    let daily: i64 = db
        .conn
        .query_row("SELECT COUNT(*) FROM usage_daily", [], |r| r.get(0))
        .unwrap();
    let models: i64 = db
        .conn
        .query_row("SELECT COUNT(*) FROM usage_daily_models", [], |r| r.get(0))
        .unwrap();
    println!("usage_daily rows: {daily}; usage_daily_models rows: {models}");

    let t = Instant::now();
    let scanned: i64 = db
        .conn
        .query_row(
            "SELECT COUNT(*) FROM (SELECT json_extract(payload, '$.provider') AS k, SUM(json_extract(payload, '$.inputTokens')) \
             FROM events WHERE kind = 'usage' GROUP BY k)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    println!(
        "baseline, scanning the event JSON (all time, by provider, {scanned} rows): {:.0} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );

    let windows: [(&str, Option<&str>, Option<&str>); 3] = [
        ("all time", None, None),
        (
            "30 days, ragged edges",
            Some("2026-01-31T05:17:00Z"),
            Some("2026-03-02T19:45:00Z"),
        ),
        (
            "one hour",
            Some("2026-02-15T10:00:00Z"),
            Some("2026-02-15T11:00:00Z"),
        ),
    ];
    for group in ["provider", "model", "session", "day"] {
        for (name, since, until) in windows {
            let mut lat: Vec<Duration> = vec![];
            let mut rows = 0;
            for i in 0..22 {
                let t = Instant::now();
                let r = db.summary(group, since, until).await;
                if i >= 2 {
                    lat.push(t.elapsed());
                }
                rows = r.rows.len();
            }
            lat.sort();
            println!(
                "usage.summary groupBy {group:8} {name:22}: p50 {:6.2} ms, p99 {:6.2} ms ({rows} rows)",
                pct(&lat, 0.5),
                pct(&lat, 0.99)
            );
        }
    }
}
