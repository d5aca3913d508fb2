//! Fault tests (issue 5 "Done means"): kill -9 of svc-scheduler right after a claim and right
//! before one — every occurrence runs exactly once or is recorded missed, never twice, never
//! silently skipped; svc-session dying during a run — the run ends `failed` with a reason and
//! the next occurrence still fires.

use std::collections::HashMap;

use snowpea_proto::scheduler::v1::*;

use snowpea_testkit::assert_eventually;

use super::*;

fn sched(spec: &str, window: i64) -> JobScheduleParams {
    JobScheduleParams {
        spec: spec.into(),
        task: "t".into(),
        session_template: Some(job_schedule_params::SessionTemplate {
            catch_up_window_minutes: Some(window),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn kill9_during_a_held_run_never_runs_it_twice_and_records_its_real_result() {
    let home = Scheduler::home();
    let fake = FakeSession::default();
    fake.hold.store(true, std::sync::atomic::Ordering::SeqCst);
    let _session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;
    let id = s
        .jobs
        .schedule(sched("every 60s", 30))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    s.advance(60).await;
    let started = s.expect(&["started"]).await;
    assert_eventually!(fake.runs.lock().unwrap().len() == 1);
    // The run's session is recorded before the kill.
    assert_eventually!({
        rusqlite::Connection::open(home.path().join("state/scheduler.db"))
            .and_then(|c| {
                c.query_row(
                    "SELECT COUNT(*) FROM occurrences WHERE session_id = 's_fake_1'",
                    [],
                    |r| r.get::<_, i64>(0),
                )
            })
            .unwrap_or(0)
            == 1
    });
    s.kill9();
    // Restart while svc-session still runs the turn: the run is followed, not run again.
    fake.hold.store(false, std::sync::atomic::Ordering::SeqCst);
    let mut s = Scheduler::start(home.clone(), "2026-01-15T10:01:00Z").await;
    assert_eventually!(fake.watches.lock().unwrap().as_slice() == ["s_fake_1"]);
    let j = s.jobs.list(()).await.unwrap().into_inner().jobs.remove(0);
    assert_eq!(j.state, "running", "still in progress after the restart");
    assert_eq!(j.last_status, None);
    // The turn ends in svc-session: recorded with its real result.
    fake.release.send_replace(true);
    let finished = s.expect(&["finished"]).await;
    assert_eq!(finished[0]["sessionId"], "s_fake_1");
    assert_eq!(finished[0]["text"], "ran t");
    assert_eq!(finished[0]["runId"], started[0]["runId"]);
    let j = s.jobs.list(()).await.unwrap().into_inner().jobs.remove(0);
    assert_eq!(j.last_status.as_deref(), Some("ok"));
    assert_eq!(j.state, "scheduled");
    assert_eq!(fake.runs.lock().unwrap().len(), 1, "never twice");
    // The next occurrence fires normally.
    s.advance(60).await;
    s.expect(&["started", "finished"]).await;
    let runs = fake.runs.lock().unwrap().clone();
    assert_eq!(
        runs.iter().map(|r| r.1.as_str()).collect::<Vec<_>>(),
        ["2026-01-15T10:01:00Z", "2026-01-15T10:02:00Z"]
    );
    let occ = Scheduler::occurrences(&home);
    assert_eq!(
        occ.iter().map(|o| o.2.as_str()).collect::<Vec<_>>(),
        ["finished", "finished"]
    );
    assert!(occ.iter().all(|o| o.0 == id));
}

#[tokio::test]
async fn a_run_that_ended_while_the_scheduler_was_down_is_recorded_on_restart() {
    let home = Scheduler::home();
    let fake = FakeSession::default();
    fake.hold.store(true, std::sync::atomic::Ordering::SeqCst);
    let _session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;
    // An agent tool's job: its origin session gets job.done after the restart too.
    s.internal
        .tool_schedule(ToolScheduleRequest {
            spec: "in 1 minute".into(),
            task: "t".into(),
            mode: None,
            session_id: "s_chat".into(),
            workdir: home.path().display().to_string(),
            agent: None,
        })
        .await
        .unwrap();
    s.advance(60).await;
    s.expect(&["started"]).await;
    assert_eventually!({
        Scheduler::occurrences(&home)
            .first()
            .is_some_and(|o| o.2 == "running")
    });
    assert_eventually!({
        rusqlite::Connection::open(home.path().join("state/scheduler.db"))
            .and_then(|c| {
                c.query_row(
                    "SELECT COUNT(*) FROM occurrences WHERE session_id IS NOT NULL",
                    [],
                    |r| r.get::<_, i64>(0),
                )
            })
            .unwrap_or(0)
            == 1
    });
    s.kill9();
    fake.release.send_replace(true);
    let mut s = Scheduler::start(home.clone(), "2026-01-15T10:05:00Z").await;
    let p = s.expect(&["finished"]).await;
    assert_eq!(p[0]["text"], "ran t");
    assert_eventually!({
        fake.events.lock().unwrap().clone() == vec![("s_chat".to_string(), "job.done".to_string())]
    });
    assert_eq!(fake.runs.lock().unwrap().len(), 1);
    assert_eq!(Scheduler::occurrences(&home)[0].2, "finished");
}

#[tokio::test]
async fn kill9_right_before_the_claim_catches_up_once_or_records_missed() {
    let home = Scheduler::home();
    let fake = FakeSession::default();
    let _session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;
    let near = s
        .jobs
        .schedule(sched("every 1h", 30))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    let far = s
        .jobs
        .schedule(sched("0 11 * * *", 5))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    // Killed before anything was due (nothing claimed).
    s.kill9();
    // Back at 11:10: `near` (due 11:00, window 30 min) fires once; `far` (window 5) is missed.
    // The catch-up runs at start-up, before this test can subscribe to job.event: check the
    // durable state instead.
    let mut s = Scheduler::start(home.clone(), "2026-01-15T11:10:00Z").await;
    assert_eventually!({
        Scheduler::occurrences(&home)
            .iter()
            .filter(|o| o.2 == "finished" || o.2 == "missed")
            .count()
            == 2
    });
    assert_eq!(
        fake.runs
            .lock()
            .unwrap()
            .iter()
            .map(|r| (r.0.clone(), r.1.clone()))
            .collect::<Vec<_>>(),
        [(near.clone(), "2026-01-15T11:00:00Z".to_string())]
    );
    let jobs = s.jobs.list(()).await.unwrap().into_inner().jobs;
    let f = jobs.iter().find(|j| j.job_id == far).unwrap();
    let held = f.held.as_ref().unwrap();
    assert_eq!(
        (held.status.as_str(), held.scheduled_at.as_str()),
        ("missed", "2026-01-15T11:00:00Z")
    );
    assert_eq!(f.next_run_at.as_deref(), Some("2026-01-16T11:00:00Z"));
    // A second restart finds nothing new to do.
    s.kill9();
    let _s = Scheduler::start(home.clone(), "2026-01-15T11:10:00Z").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fake.runs.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn kill9_storm_every_occurrence_exactly_once_or_recorded() {
    let home = Scheduler::home();
    let fake = FakeSession::default();
    let _session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;
    let mut ids = vec![];
    for _ in 0..40 {
        ids.push(
            s.jobs
                .schedule(sched("every 60s", 30))
                .await
                .unwrap()
                .into_inner()
                .job_id,
        );
    }
    let mut clock =
        jiff::Timestamp::from_second(T0.parse::<jiff::Timestamp>().unwrap().as_second()).unwrap();
    for round in 0..4 {
        // Make 40 occurrences due and kill -9 at once: some claimed, some handed over, some not.
        clock += jiff::SignedDuration::from_secs(60);
        let _ = s
            .internal
            .set_clock(SetClockRequest {
                advance_ms: 0,
                set_to: Some(clock.to_string()),
            })
            .await;
        if round % 2 == 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        s.kill9();
        s = Scheduler::start(home.clone(), &clock.to_string()).await;
    }
    // Let everything settle on the last instance.
    assert_eventually!({
        Scheduler::occurrences(&home)
            .iter()
            .all(|o| !matches!(o.2.as_str(), "claimed" | "running"))
    });
    let occ = Scheduler::occurrences(&home);
    let runs = fake.runs.lock().unwrap().clone();
    let mut ran: HashMap<(String, String), usize> = HashMap::new();
    for r in &runs {
        *ran.entry((r.0.clone(), r.1.clone())).or_default() += 1;
    }
    assert!(
        ran.values().all(|n| *n == 1),
        "an occurrence ran twice: {ran:?}"
    );
    // Every occurrence of every job (10:01 … 10:04) has a row: finished, failed (interrupted
    // after hand-over) or missed — none silently skipped.
    for id in &ids {
        let rows: Vec<_> = occ.iter().filter(|o| &o.0 == id).collect();
        assert_eq!(rows.len(), 4, "job {id}: {rows:?}");
        for o in rows {
            let at = jiff::Timestamp::from_millisecond(o.1).unwrap().to_string();
            let n = ran.get(&(id.clone(), at.clone())).copied().unwrap_or(0);
            match o.2.as_str() {
                "finished" => assert_eq!(n, 1, "{id} {at}"),
                "failed" => assert!(n <= 1),
                "missed" => assert_eq!(n, 0),
                other => panic!("unexpected status {other}"),
            }
        }
    }
}

#[tokio::test]
async fn svc_session_killed_during_a_run_fails_it_and_the_next_occurrence_fires() {
    let home = Scheduler::home();
    let fake = FakeSession::default();
    fake.hold.store(true, std::sync::atomic::Ordering::SeqCst);
    let session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;
    s.jobs.schedule(sched("every 60s", 30)).await.unwrap();
    s.advance(60).await;
    s.expect(&["started"]).await;
    assert_eventually!(fake.runs.lock().unwrap().len() == 1);
    session.kill(&fake);
    let p = s.expect(&["failed"]).await;
    let err = p[0]["error"].as_str().unwrap();
    assert!(err.contains("svc-session"), "{err}");
    // svc-session comes back; the next occurrence fires.
    fake.hold.store(false, std::sync::atomic::Ordering::SeqCst);
    fake.dead.send_replace(false);
    let _session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
    s.advance(60).await;
    s.expect(&["started", "finished"]).await;
    let j = s.jobs.list(()).await.unwrap().into_inner().jobs.remove(0);
    assert_eq!(j.last_status.as_deref(), Some("ok"));
}
