//! Ranking, namespaces and the short-query path of [`super`].

use super::*;
use crate::store::Store;

fn store() -> (tempfile::TempDir, Store) {
    let t = tempfile::tempdir().unwrap();
    let s = Store::open(&t.path().join("memory.db")).unwrap();
    (t, s)
}

fn put(s: &Store, ns: &Namespace, text: &str, tags: &[&str], created_ms: i64) -> String {
    let m = NewMemory {
        id: snowpea_common::ids::new_id("mem"),
        namespace: ns.key(),
        text: text.into(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        created_ms,
        created_at: format!("t{created_ms}"),
        ..Default::default()
    };
    s.write(|tx| insert(tx, &m)).unwrap();
    m.id
}

fn ids(s: &Store, ns: &[Namespace], q: &str) -> Vec<String> {
    s.read(|c| search(c, ns, q, 10))
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect()
}

#[test]
fn a_relevant_memory_outranks_an_older_irrelevant_one() {
    let (_t, s) = store();
    let d = Namespace::Default;
    let old = put(
        &s,
        &d,
        "The deploy script lives in scripts/release.sh and needs a token",
        &[],
        1,
    );
    let relevant = put(
        &s,
        &d,
        "User prefers the helix editor with the gruvbox theme for editing Rust",
        &["editor"],
        2,
    );
    let _newer_noise = put(&s, &d, "Lunch is at noon on Fridays", &[], 3);
    let hits = s
        .read(|c| {
            search(
                c,
                std::slice::from_ref(&d),
                "which editor does the user prefer?",
                10,
            )
        })
        .unwrap();
    assert_eq!(hits[0].id, relevant, "{hits:?}");
    assert!(hits[0].score > 0.0);
    assert_eq!(hits[0].tags, vec!["editor".to_string()]);
    assert!(!hits.iter().any(|h| h.id == old) || hits[0].id != old);
}

#[test]
fn more_matching_words_rank_higher() {
    let (_t, s) = store();
    let d = Namespace::Default;
    let one = put(&s, &d, "postgres runs on port 5433", &[], 10);
    let both = put(&s, &d, "postgres password rotation happens monthly", &[], 1);
    assert_eq!(ids(&s, &[d], "postgres password"), vec![both, one]);
}

#[test]
fn partial_words_match_in_english_and_korean() {
    let (_t, s) = store();
    let d = Namespace::Default;
    let en = put(&s, &d, "Remember the kubernetes migration deadline", &[], 1);
    let ko = put(
        &s,
        &d,
        "다음주 화요일에 데이터베이스 마이그레이션 회의가 있습니다",
        &[],
        2,
    );
    assert_eq!(
        ids(&s, std::slice::from_ref(&d), "kubern"),
        vec![en.clone()],
        "English prefix"
    );
    assert_eq!(
        ids(&s, std::slice::from_ref(&d), "ernete"),
        vec![en],
        "English infix"
    );
    assert_eq!(
        ids(&s, std::slice::from_ref(&d), "데이터"),
        vec![ko.clone()],
        "Korean partial word"
    );
    assert_eq!(
        ids(&s, std::slice::from_ref(&d), "마이그레이션은 언제"),
        vec![ko.clone()],
        "Korean word with a particle"
    );
    assert_eq!(
        ids(&s, &[d], "회의"),
        vec![ko],
        "two-syllable Korean word (short path)"
    );
}

#[test]
fn short_queries_scan_within_the_namespace_newest_first() {
    let (_t, s) = store();
    let d = Namespace::Default;
    let p = Namespace::Project("/p".into());
    let older = put(&s, &d, "go to the gym", &[], 1);
    let newer = put(&s, &d, "go build ./...", &[], 2);
    put(&s, &p, "go mod tidy", &[], 3);
    put(&s, &d, "nothing relevant", &[], 4);
    assert_eq!(ids(&s, std::slice::from_ref(&d), "go"), vec![newer, older]);
    assert_eq!(plan_query("go").fts, None);
    assert_eq!(plan_query("go").like, vec!["go".to_string()]);
    // `%` and `_` are literal in the short path.
    put(&s, &d, "100_ percent", &[], 5);
    assert_eq!(ids(&s, &[d], "%").len(), 0, "punctuation alone is no query");
}

#[test]
fn searches_never_cross_namespaces() {
    let (_t, s) = store();
    let a = Namespace::Project("/a".into());
    let b = Namespace::Project("/b".into());
    let g = Namespace::Agent("reviewer".into());
    let in_a = put(&s, &a, "secret sauce recipe", &[], 1);
    let in_b = put(&s, &b, "secret sauce recipe", &[], 2);
    put(&s, &g, "secret sauce recipe", &[], 3);
    put(&s, &Namespace::Browser, "secret sauce recipe", &[], 4);
    assert_eq!(
        ids(&s, std::slice::from_ref(&a), "sauce"),
        vec![in_a.clone()]
    );
    assert_eq!(ids(&s, &[b], "sauce"), vec![in_b]);
    assert_eq!(
        ids(&s, std::slice::from_ref(&a), "sa"),
        vec![in_a],
        "short path too"
    );
    assert!(ids(&s, &[Namespace::Default], "sauce").is_empty());
    assert_eq!(s.read(|c| recent(c, &[a], 10)).unwrap().len(), 1);
}

#[test]
fn writes_are_immediately_searchable_and_tags_match() {
    let (_t, s) = store();
    let d = Namespace::Default;
    let id = put(&s, &d, "plain text", &["infrastructure"], 1);
    assert_eq!(ids(&s, &[d], "infrastr"), vec![id]);
}

#[test]
fn deleted_memories_leave_the_index() {
    let (_t, s) = store();
    let d = Namespace::Default;
    let id = put(&s, &d, "ephemeral thought", &[], 1);
    assert!(s.write(|tx| delete_id(tx, &id)).unwrap());
    assert!(!s.write(|tx| delete_id(tx, &id)).unwrap());
    assert!(ids(&s, &[d], "ephemeral").is_empty());
}

#[test]
fn query_plans() {
    let p = plan_query("What's the \"quoted\" thing? 회의 일정");
    assert_eq!(
        p.fts.as_deref(),
        Some("\"what\" OR \"the\" OR \"quoted\" OR \"thing\"")
    );
    assert_eq!(
        p.like,
        vec!["회의".to_string(), "일정".to_string()],
        "two-syllable Korean words also scanned"
    );
    assert_eq!(
        plan_query("a b").like,
        vec!["a".to_string(), "b".to_string()]
    );
    assert_eq!(
        plan_query("hello is ok").like,
        Vec::<String>::new(),
        "short ASCII words dropped next to long ones"
    );
}

/// The short path through `memory_grams` against the `LIKE` scan it replaces: same hits,
/// same order, same scores, with several namespaces, equal and out-of-order times, words
/// inside longer words, upper-case non-ASCII text and deletes.
#[test]
fn indexed_short_path_equals_the_like_scan() {
    let (_t, s) = store();
    let syllables = [
        "회", "의", "배", "포", "일", "정", "서", "버", "ά", "δ", "ω",
    ];
    let spaces = [
        Namespace::Default,
        Namespace::Project("/p".into()),
        Namespace::Browser,
    ];
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut rnd = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let mut ids_all = Vec::new();
    for i in 0..600 {
        let words: Vec<String> = (0..1 + rnd(6))
            .map(|_| {
                (0..1 + rnd(4))
                    .map(|_| syllables[rnd(syllables.len())])
                    .collect()
            })
            .collect();
        let tag = if rnd(4) == 0 {
            syllables[rnd(8)].repeat(2)
        } else {
            String::new()
        };
        let tags: Vec<&str> = if tag.is_empty() { vec![] } else { vec![&tag] };
        // Times repeat and go backwards (browser pages carry their visit time).
        let created = (i as i64 / 3) * if rnd(5) == 0 { -1 } else { 1 };
        ids_all.push(put(&s, &spaces[rnd(3)], &words.join(" "), &tags, created));
    }
    let check = |s: &Store, rnd: &mut dyn FnMut(usize) -> usize| {
        for q in 0..200 {
            let words: Vec<String> = (0..1 + rnd(3))
                .map(|_| {
                    let a = syllables[rnd(syllables.len())];
                    let b = syllables[rnd(syllables.len())];
                    format!("{a}{b}").to_lowercase()
                })
                .collect();
            let mut distinct: Vec<String> = Vec::new();
            for w in words {
                if !distinct.contains(&w) {
                    distinct.push(w);
                }
            }
            let ns = if q % 4 == 0 {
                spaces.to_vec()
            } else {
                vec![spaces[q % 3].clone()]
            };
            let limit = [1, 3, 8, 50][q % 4];
            let want = s.read(|c| short_scan(c, &ns, &distinct, limit)).unwrap();
            let got = s.read(|c| short_indexed(c, &ns, &distinct, limit)).unwrap();
            assert_eq!(got, want, "words {distinct:?} limit {limit}");
        }
    };
    check(&s, &mut rnd);
    for id in ids_all.iter().step_by(5) {
        s.write(|tx| delete_id(tx, id)).unwrap();
    }
    check(&s, &mut rnd);
    let upper = put(&s, &Namespace::Default, "ΔΩ ΣΧΈΔΙΟ", &[], 1_000);
    assert_eq!(
        ids(&s, &[Namespace::Default], "δω").first(),
        Some(&upper),
        "upper-case Greek found by its lower-case word"
    );
}

#[test]
fn memories_written_before_the_word_index_are_indexed_at_open() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("memory.db");
    {
        // A database at schema version 1 (before `memory_grams`) with one memory.
        let mut c = snowpea_common::db::open(&path, &crate::store::MIGRATIONS[..1]).unwrap();
        c.execute(
            "INSERT INTO memories (id, namespace, text, created_ms, created_at)
             VALUES ('mem_old', 'default', '다음주 회의 일정', 1, 't1')",
            [],
        )
        .unwrap();
        assert_eq!(
            crate::store::grams::backfill(&mut c).ok(),
            None,
            "no index yet"
        );
    }
    let s = Store::open(&path).unwrap();
    let pending: i64 = s
        .read(|c| {
            Ok(
                c.query_row("SELECT count(*) FROM memory_grams_pending", [], |r| {
                    r.get(0)
                })?,
            )
        })
        .unwrap();
    assert_eq!(pending, 0);
    assert_eq!(
        ids(&s, &[Namespace::Default], "회의"),
        vec!["mem_old".to_string()]
    );
    assert_eq!(
        s.read(|c| short_indexed(c, &[Namespace::Default], &["일정".to_string()], 5))
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_query_is_cut_to_its_first_words_and_characters() {
    use snowpea_proto::limits::{SEARCH_WORDS, SEARCH_WORD_CHARS};
    let plan = plan_query(&"Z".repeat(100_000));
    assert_eq!(plan.phrases, vec!["z".repeat(SEARCH_WORD_CHARS)]);
    let many: Vec<String> = (0..100).map(|i| format!("word{i}")).collect();
    let plan = plan_query(&many.join(" "));
    assert_eq!(plan.phrases.len(), SEARCH_WORDS);
    assert_eq!(plan.phrases[0], "word0");
    // Cut by characters, not bytes: a long Korean word keeps whole syllables.
    let plan = plan_query(&"회의".repeat(100));
    assert_eq!(plan.phrases[0].chars().count(), SEARCH_WORD_CHARS);
}

#[test]
fn a_one_letter_non_ascii_query_finds_its_other_case() {
    let (_t, s) = store();
    let d = Namespace::Default;
    let upper = put(&s, &d, "ÉCOLE NORMALE", &[], 1);
    let lower = put(&s, &d, "une école", &[], 2);
    let _other = put(&s, &d, "ecole sans accent", &[], 3);
    let found = ids(&s, std::slice::from_ref(&d), "é");
    assert_eq!(found, vec![lower.clone(), upper.clone()], "newest first");
    let found = ids(&s, std::slice::from_ref(&d), "É");
    assert_eq!(found, vec![lower, upper]);
    assert_eq!(case_forms("éc"), vec!["éc", "Éc"]);
    assert_eq!(case_forms("go"), vec!["go"]);
}
