//! Store tests: the claim is the exactly-once guarantee.

use super::*;

pub(crate) fn job(id: &str, next: Option<i64>) -> JobRow {
    JobRow {
        job_id: id.into(),
        spec: "every 60s".into(),
        kind: "interval".into(),
        normalized: "every 60s".into(),
        anchor_ms: 0,
        time_zone: "UTC".into(),
        task: "t".into(),
        mode: "accept".into(),
        agent: None,
        channel: None,
        workdir: "/tmp".into(),
        host_tools_from: None,
        host_wait_sec: 0,
        catch_up_window_minutes: 60,
        meta: None,
        owner_client_id: None,
        fingerprint: None,
        origin_session_id: None,
        created_via: "rpc".into(),
        enabled: true,
        cancelled: false,
        running: false,
        next_run_ms: next,
        last_run_ms: None,
        last_status: None,
        created_ms: 0,
        updated_ms: 0,
    }
}

fn claim(job_id: &str, at: i64, expect: Option<Option<i64>>) -> Claim {
    Claim {
        job_id: job_id.into(),
        scheduled_ms: at,
        run_id: snowpea_common::ids::new_id("run"),
        trigger: "schedule".into(),
        now_ms: at,
        expect_next_ms: expect,
        new_next_ms: Some(at + 60_000),
        new_enabled: true,
        missed: vec![],
    }
}

#[test]
fn an_occurrence_is_claimed_once() {
    let s = Store::open_in_memory().unwrap();
    s.insert_job(&job("j1", Some(60_000))).unwrap();
    assert!(s.claim(&claim("j1", 60_000, Some(Some(60_000)))).unwrap());
    // The job is running: no second claim of anything, even runNow.
    assert!(!s.claim(&claim("j1", 60_000, None)).unwrap());
    assert!(!s.claim(&claim("j1", 61_000, None)).unwrap());
    s.finish(
        "j1",
        60_000,
        &Outcome {
            status: "finished".into(),
            last_status: Some("ok".into()),
            session_id: Some("s1".into()),
            text: "done".into(),
            error: None,
            now_ms: 62_000,
        },
    )
    .unwrap();
    // Idle again, but the same occurrence can never be claimed twice.
    assert!(!s.claim(&claim("j1", 60_000, None)).unwrap());
    // A stale view of next_run_ms loses.
    assert!(!s.claim(&claim("j1", 120_000, Some(Some(60_000)))).unwrap());
    assert!(s.claim(&claim("j1", 120_000, Some(Some(120_000)))).unwrap());
    let j = s.job("j1").unwrap().unwrap();
    assert!(j.running);
    assert_eq!(j.last_status.as_deref(), Some("ok"));
}

#[test]
fn two_concurrent_claimers_on_one_database_file_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scheduler.db");
    let s = Store::open(&path).unwrap();
    for i in 0..50 {
        s.insert_job(&job(&format!("j{i}"), Some(60_000))).unwrap();
    }
    drop(s);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let path = path.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let s = Store::open(&path).unwrap();
                barrier.wait();
                let mut won = 0;
                for i in 0..50 {
                    // Half without the next-run check (runNow-like), half with it (tick-like).
                    let expect = if i % 2 == 0 { None } else { Some(Some(60_000)) };
                    if s.claim(&claim(&format!("j{i}"), 60_000, expect)).unwrap() {
                        won += 1;
                    }
                }
                won
            })
        })
        .collect();
    let total: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, 50, "every occurrence claimed exactly once");
    let s = Store::open(&path).unwrap();
    assert_eq!(s.open_occurrences().unwrap().len(), 50);
}

#[test]
fn due_jobs_and_earliest_due_skip_running_and_disabled_jobs() {
    let s = Store::open_in_memory().unwrap();
    s.insert_job(&job("a", Some(100))).unwrap();
    s.insert_job(&job("b", Some(50))).unwrap();
    let mut c = job("c", Some(10));
    c.enabled = false;
    s.insert_job(&c).unwrap();
    assert_eq!(s.earliest_due().unwrap(), Some(50));
    assert!(s.claim(&claim("b", 50, None)).unwrap());
    assert_eq!(s.earliest_due().unwrap(), Some(100));
    let due: Vec<_> = s
        .due_jobs(1_000, 10)
        .unwrap()
        .into_iter()
        .map(|j| j.job_id)
        .collect();
    assert_eq!(due, vec!["a".to_string()]);
}

#[test]
fn skip_missed_records_every_missed_occurrence_and_deletes_with_the_job() {
    let s = Store::open_in_memory().unwrap();
    s.insert_job(&job("a", Some(100))).unwrap();
    let skip = Claim {
        missed: vec![(100, "down".into()), (200, "down".into())],
        new_next_ms: Some(1_000),
        now_ms: 900,
        ..claim("a", 100, Some(Some(100)))
    };
    assert!(s.skip_missed(&skip).unwrap());
    assert!(!s.skip_missed(&skip).unwrap(), "stale");
    let occ = s.occurrences("a", 10).unwrap();
    assert_eq!(
        occ.iter().map(|o| o.status.as_str()).collect::<Vec<_>>(),
        ["missed", "missed"]
    );
    assert_eq!(s.job("a").unwrap().unwrap().next_run_ms, Some(1_000));
    assert_eq!(s.delete_job("a").unwrap(), Some(vec![]));
    assert!(s.occurrences("a", 10).unwrap().is_empty());
    assert_eq!(s.delete_job("a").unwrap(), None);
}
