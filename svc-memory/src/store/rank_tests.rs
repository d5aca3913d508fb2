//! [`super::top`] against FTS5's own `bm25()` (the query svc-memory ran before): same
//! hits, same order, same scores, also after appends and deletes (the frequency cache) —
//! exact with the service's frequency sample on any table of up to [`DF_SAMPLE`] memories;
//! above that, the idf of a common phrase comes from the sample (tested separately).

use rusqlite::types::Value as Sql;
use rusqlite::{params_from_iter, Connection};

use super::*;
use crate::store::memories::{delete_id, insert, plan_query, NewMemory};
use crate::store::Store;

/// The former ranking query: FTS5 `bm25()` over every match.
fn fts5_bm25(conn: &Connection, ns: &[Namespace], fts: &str, limit: usize) -> Vec<(String, f64)> {
    let mut params = vec![Sql::Text(fts.to_owned())];
    let marks: Vec<String> = ns
        .iter()
        .map(|n| {
            params.push(Sql::Text(n.key()));
            format!("?{}", params.len())
        })
        .collect();
    params.push(Sql::Integer(limit as i64));
    let sql = format!(
        "SELECT m.id, -bm25(memories_fts, 1.0, 0.5, 0.8) AS score
           FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid
          WHERE memories_fts MATCH ?1 AND m.namespace IN ({})
          ORDER BY score DESC, m.created_ms DESC, m.rowid DESC
          LIMIT ?{}",
        marks.join(", "),
        params.len()
    );
    let mut stmt = conn.prepare(&sql).unwrap();
    stmt.query_map(params_from_iter(params), |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A word with a skewed frequency: low indexes are common, high ones rare.
    fn word<'a>(&mut self, vocab: &'a [String]) -> &'a str {
        let a = (self.next() % vocab.len() as u64) as usize;
        let b = (self.next() % vocab.len() as u64) as usize;
        let c = (self.next() % vocab.len() as u64) as usize;
        &vocab[a.min(b).min(c)]
    }
}

fn vocab(rng: &mut Rng) -> Vec<String> {
    let hangul = [
        "데이터베이스",
        "마이그레이션",
        "회의실",
        "배포일정",
        "서버장애",
    ];
    (0..300)
        .map(|i| {
            if i % 37 == 5 {
                return hangul[i % hangul.len()].to_owned();
            }
            let len = 3 + (rng.next() % 6) as usize;
            (0..len)
                .map(|_| (b'a' + (rng.next() % 12) as u8) as char)
                .collect()
        })
        .collect()
}

fn compare(s: &Store, rng: &mut Rng, words: &[String], spaces: &[Namespace]) -> usize {
    let mut exact = 0;
    for q in 0..150usize {
        let n = 1 + (rng.next() % 12) as usize;
        let query: Vec<&str> = (0..n).map(|_| rng.word(words)).collect();
        let mut query = query.join(" ");
        if q.is_multiple_of(10) {
            query = query.to_uppercase();
        }
        let plan = plan_query(&query);
        let Some(fts) = plan.fts.as_deref() else {
            continue;
        };
        let ns = &spaces[q % spaces.len()..=q % spaces.len()];
        let limit = [1, 8, 10, 30][q % 4];
        let want = s.read(|c| Ok(fts5_bm25(c, ns, fts, limit))).unwrap();
        // Every way of reading a namespace: through the index (joined, or with the rowid
        // filter of a namespace holding at most a quarter of the table), and scored whole.
        for (small_namespace, members_share) in [(0, 0), (0, MEMBERS_SHARE), (i64::MAX, 0)] {
            let limits = Limits {
                max_scored: usize::MAX,
                sample: Sample::DEFAULT,
                small_namespace,
                members_share,
            };
            let got = s
                .read(|c| top_scoring(c, ns, &plan.phrases, limit, limits))
                .unwrap();
            let got: Vec<(String, f64)> = got.into_iter().map(|m| (m.id, m.score)).collect();
            assert_eq!(
                got.iter().map(|g| &g.0).collect::<Vec<_>>(),
                want.iter().map(|w| &w.0).collect::<Vec<_>>(),
                "query {query:?} limit {limit} small_namespace {small_namespace} members_share {members_share}"
            );
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g.1 - w.1).abs() <= 1e-9 * w.1.abs().max(1.0),
                    "{g:?} {w:?}"
                );
            }
        }
        exact += 1;
    }
    exact
}

#[test]
fn same_hits_order_and_scores_as_fts5_bm25() {
    let t = tempfile::tempdir().unwrap();
    let s = Store::open(&t.path().join("memory.db")).unwrap();
    let mut rng = Rng(7);
    let words = vocab(&mut rng);
    let spaces = [
        Namespace::Default,
        Namespace::Project("/p".into()),
        Namespace::Agent("a".into()),
    ];
    let mut ids = Vec::new();
    let add = |s: &Store, rng: &mut Rng, i: i64| {
        let n = 3 + (rng.next() % 14) as usize;
        let text: Vec<&str> = (0..n).map(|_| rng.word(&words)).collect();
        let tags: Vec<String> = (0..rng.next() % 3)
            .map(|_| rng.word(&words).to_owned())
            .collect();
        let title = if rng.next().is_multiple_of(4) {
            rng.word(&words).to_owned()
        } else {
            String::new()
        };
        let m = NewMemory {
            id: snowpea_common::ids::new_id("mem"),
            // 70% default, 15% each of the others: the rowid filter's share.
            namespace: spaces[[0, 0, 0, 0, 0, 0, 0, 1, 1, 2][(rng.next() % 10) as usize] as usize]
                .key(),
            text: text.join(if i % 5 == 0 { ", " } else { " " }),
            tags,
            title,
            // Some equal times: the tie-breaks matter too.
            created_ms: i / 3,
            created_at: format!("t{i}"),
            ..Default::default()
        };
        s.write(|tx| insert(tx, &m)).unwrap();
        m.id
    };
    for i in 0..1500 {
        ids.push(add(&s, &mut rng, i));
    }
    assert!(compare(&s, &mut rng, &words, &spaces) > 100);
    // Appends: cached frequencies are topped up.
    for i in 1500..1600 {
        ids.push(add(&s, &mut rng, i));
    }
    compare(&s, &mut rng, &words, &spaces);
    // Deletes, including the newest row, then a reused rowid: frequencies are recounted.
    for id in ids.iter().step_by(7).chain(ids.last()) {
        s.write(|tx| delete_id(tx, id)).unwrap();
    }
    add(&s, &mut rng, 1600);
    compare(&s, &mut rng, &words, &spaces);
}

/// Above the sample size, a common phrase's frequency is its share of the newest rows
/// (within the sampling error), a rare phrase's is counted exactly, and a phrase absent
/// from the newest rows is counted exactly too; the ranking still puts the rare word first.
#[test]
fn common_phrase_frequencies_are_estimated_from_the_newest_rows() {
    let t = tempfile::tempdir().unwrap();
    let s = Store::open(&t.path().join("memory.db")).unwrap();
    let total = 2000usize;
    for i in 0..total {
        let mut words = vec!["filler"];
        if i % 2 == 0 {
            words.push("alpha");
        }
        if i % 7 == 0 {
            words.push("delta");
        }
        if i < 1000 && i % 3 == 0 {
            words.push("charlie");
        }
        if i % 400 == 1 {
            words.push("zulu");
        }
        let m = NewMemory {
            id: format!("mem_{i:05}"),
            namespace: Namespace::Default.key(),
            text: words.join(" "),
            created_ms: i as i64,
            created_at: format!("t{i}"),
            ..Default::default()
        };
        s.write(|tx| insert(tx, &m)).unwrap();
    }
    let sample = Sample {
        rows: 500,
        common: 50,
    };
    let df = |phrase: &str| {
        s.read(|c| {
            let now = snapshot(c)?;
            doc_freq(
                c,
                "estimate-test",
                &now,
                phrase,
                sample,
                &mut None,
                MAX_SCORED,
                true,
            )
            .map(|d| d.expect("a waiting count always answers"))
        })
        .unwrap()
    };
    assert_eq!(
        df("alpha").0,
        1000,
        "250 of the newest 500: a common phrase, estimated"
    );
    let delta = df("delta").0;
    let exact_delta = (0..total).filter(|i| i % 7 == 0).count() as i64;
    assert!(
        (delta - exact_delta).abs() * 10 <= exact_delta,
        "estimate {delta} within 10% of {exact_delta}"
    );
    let zulu = df("zulu");
    assert_eq!(zulu.0, 5, "rare in the sample: counted exactly");
    assert_eq!(
        zulu.1.map(|ids| ids.len()),
        Some(5),
        "and its rows kept for the fetch"
    );
    assert_eq!(
        df("charlie").0,
        334,
        "absent from the newest rows: counted exactly"
    );
    let q = |sample: Sample| {
        s.read(|c| {
            top_scoring(
                c,
                &[Namespace::Default],
                &["alpha".to_owned(), "zulu".to_owned()],
                3,
                Limits {
                    sample,
                    ..Limits::DEFAULT
                },
            )
        })
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect::<Vec<_>>()
    };
    assert_eq!(q(sample), q(Sample::EXACT));
    assert_eq!(
        q(sample)[0],
        "mem_01601",
        "the rare word decides, newest first"
    );
}

/// The rowid filter of a mid-size namespace changes only the cost: with the row budget
/// capped (a common phrase then contributes its newest matches only), the same hits,
/// order and scores as the join, also after appends (the cached filter is extended) and
/// deletes (it is rebuilt).
#[test]
fn rowid_filter_changes_only_the_cost() {
    let t = tempfile::tempdir().unwrap();
    let s = Store::open(&t.path().join("memory.db")).unwrap();
    let mut rng = Rng(11);
    let words = vocab(&mut rng);
    let project = Namespace::Project("/p".into());
    let mut ids = Vec::new();
    let add = |s: &Store, rng: &mut Rng, i: i64| {
        let n = 3 + (rng.next() % 10) as usize;
        let text: Vec<&str> = (0..n).map(|_| rng.word(&words)).collect();
        let m = NewMemory {
            id: snowpea_common::ids::new_id("mem"),
            // One in eight in the project, as the bench's recall.
            namespace: if rng.next().is_multiple_of(8) {
                project.key()
            } else {
                Namespace::Default.key()
            },
            text: text.join(" "),
            created_ms: i / 2,
            created_at: format!("t{i}"),
            ..Default::default()
        };
        s.write(|tx| insert(tx, &m)).unwrap();
        m.id
    };
    let compare = |s: &Store, rng: &mut Rng| {
        let mut filtered = 0;
        for q in 0..100usize {
            let n = 1 + (rng.next() % 12) as usize;
            let query: Vec<&str> = (0..n).map(|_| rng.word(&words)).collect();
            let plan = plan_query(&query.join(" "));
            if plan.fts.is_none() {
                continue;
            }
            let ns = std::slice::from_ref(&project);
            let limit = [1, 8, 10][q % 3];
            let run = |members_share| {
                let limits = Limits {
                    max_scored: 12,
                    sample: Sample::DEFAULT,
                    small_namespace: 0,
                    members_share,
                };
                s.read(|c| top_scoring(c, ns, &plan.phrases, limit, limits))
                    .unwrap()
                    .into_iter()
                    .map(|m| (m.id, m.score))
                    .collect::<Vec<_>>()
            };
            let (joined, with_filter) = (run(0), run(MEMBERS_SHARE));
            assert_eq!(joined, with_filter, "query {query:?} limit {limit}");
            filtered += usize::from(!joined.is_empty());
        }
        filtered
    };
    for i in 0..1200 {
        ids.push(add(&s, &mut rng, i));
    }
    assert!(compare(&s, &mut rng) > 50);
    for i in 1200..1300 {
        ids.push(add(&s, &mut rng, i));
    }
    compare(&s, &mut rng);
    for id in ids.iter().step_by(5).chain(ids.last()) {
        s.write(|tx| delete_id(tx, id)).unwrap();
    }
    add(&s, &mut rng, 1300);
    compare(&s, &mut rng);
    // The filter is in use: the project holds at most a quarter of the table.
    let set = s
        .read(|c| {
            let now = snapshot(c)?;
            members(
                c,
                "filter-test",
                &now,
                std::slice::from_ref(&project),
                MEMBERS_SHARE,
            )
        })
        .unwrap();
    assert!(set.is_some_and(|f| !f.is_empty()));
}
