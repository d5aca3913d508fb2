//! Every `job.*` method and `job.event` kind against the real binary.

use snowpea_proto::scheduler::v1::*;
use tonic::Request;

use snowpea_testkit::assert_eventually;

use super::*;

fn sched(spec: &str) -> JobScheduleParams {
    JobScheduleParams {
        spec: spec.into(),
        task: "say hi".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn every_method_and_event_over_grpc() {
    let home = Scheduler::home();
    let fake = FakeSession::default();
    let _session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;

    // job.preview: kind, normalized, nextRunAt; nothing saved.
    let p = s
        .jobs
        .preview(JobPreviewParams {
            spec: "every weekday at 8am".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            p.kind.as_str(),
            p.normalized.as_deref(),
            p.next_run_at.as_deref()
        ),
        ("cron", Some("0 8 * * 1-5"), Some("2026-01-16T08:00:00Z"))
    );
    // An unreadable spec is invalid_params naming `spec`, saying why.
    let e = s
        .jobs
        .preview(JobPreviewParams {
            spec: "sometime soon".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let rpc = snowpea_proto::error::RpcError::from_status(&e);
    assert_eq!(rpc.code.wire(), "invalid_params");
    assert!(
        rpc.message.starts_with("params.spec: cannot read"),
        "{}",
        rpc.message
    );
    assert_eq!(rpc.details.unwrap()["field"], "params.spec");
    assert!(s.jobs.list(()).await.unwrap().into_inner().jobs.is_empty());

    // job.schedule → due on the manual clock → started → finished.
    let r = s
        .jobs
        .schedule(sched("every 60s"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.next_run_at.as_deref(), Some("2026-01-15T10:01:00Z"));
    assert_eq!(r.fingerprint, None);
    let id = r.job_id;
    s.advance(60).await;
    let p = s.expect(&["started", "finished"]).await;
    assert_eq!(p[1]["sessionId"], "s_fake_1");
    assert_eq!(p[1]["text"], "ran say hi");

    // job.list.
    let j = s.jobs.list(()).await.unwrap().into_inner().jobs.remove(0);
    assert_eq!(j.job_id, id);
    assert_eq!(
        (
            j.kind.as_str(),
            j.state.as_str(),
            j.created_via.as_str(),
            j.mode.as_str()
        ),
        ("interval", "scheduled", "rpc", "accept")
    );
    assert_eq!(j.last_status.as_deref(), Some("ok"));
    assert_eq!(j.last_run_at.as_deref(), Some("2026-01-15T10:01:00Z"));
    assert_eq!(j.next_run_at.as_deref(), Some("2026-01-15T10:02:00Z"));
    assert_eq!(j.catch_up_window_minutes, 60);

    // job.runNow.
    assert!(
        s.jobs
            .run_now(JobRunNowParams { job_id: id.clone() })
            .await
            .unwrap()
            .into_inner()
            .ok
    );
    let p = s.expect(&["started", "finished"]).await;
    assert_eq!(p[0]["trigger"], "runNow");

    // job.update: pause, resume from now, new schedule, template.
    let u = s
        .jobs
        .update(JobUpdateParams {
            job_id: id.clone(),
            enabled: Some(false),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!u.enabled && u.next_run_at.is_none());
    s.expect(&["updated"]).await;
    s.advance(600).await;
    let u = s
        .jobs
        .update(JobUpdateParams {
            job_id: id.clone(),
            enabled: Some(true),
            session_template: Some(job_update_params::SessionTemplate {
                catch_up_window_minutes: Some(5),
                host_wait_sec: Some(30),
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (u.next_run_at.as_deref(), u.catch_up_window_minutes),
        (Some("2026-01-15T10:12:00Z"), 5)
    );
    s.expect(&["updated"]).await;
    let e = s
        .jobs
        .update(JobUpdateParams {
            job_id: id.clone(),
            schedule: Some("at teatime maybe".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        snowpea_proto::error::RpcError::from_status(&e)
            .details
            .unwrap()["field"],
        "params.schedule"
    );

    // job.nextRunForClient for a job with hostToolsFrom.
    let mut host = sched("0 12 * * *");
    host.session_template = Some(job_schedule_params::SessionTemplate {
        host_tools_from: Some("browser-9".into()),
        ..Default::default()
    });
    let hid = s.jobs.schedule(host).await.unwrap().into_inner().job_id;
    let n = s
        .jobs
        .next_run_for_client(JobNextRunForClientParams {
            client_id: "browser-9".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(n.next_run_at.as_deref(), Some("2026-01-15T12:00:00Z"));
    let n = s
        .jobs
        .next_run_for_client(JobNextRunForClientParams {
            client_id: "nobody".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(n.next_run_at, None);

    // job.cancel.
    assert!(
        s.jobs
            .cancel(JobCancelParams {
                job_id: hid.clone()
            })
            .await
            .unwrap()
            .into_inner()
            .ok
    );
    s.expect(&["updated"]).await;
    let jobs = s.jobs.list(()).await.unwrap().into_inner().jobs;
    let c = jobs.iter().find(|j| j.job_id == hid).unwrap();
    assert_eq!(
        (c.state.as_str(), c.enabled, c.next_run_at.as_deref()),
        ("cancelled", false, None)
    );
    // A cancelled job does not run now; nothing is claimed or started.
    let runs_before = fake.runs.lock().unwrap().len();
    let e = s
        .jobs
        .run_now(JobRunNowParams {
            job_id: hid.clone(),
        })
        .await
        .unwrap_err();
    let rpc = snowpea_proto::error::RpcError::from_status(&e);
    assert_eq!(rpc.code.wire(), "invalid_params");
    assert!(rpc.message.contains("cancelled"), "{}", rpc.message);
    assert_eq!(rpc.details.unwrap()["field"], "params.jobId");
    // Resumed, it runs now again (and waits for its host browser, which is not connected).
    s.jobs
        .update(JobUpdateParams {
            job_id: hid.clone(),
            enabled: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    s.expect(&["updated"]).await;
    assert!(
        s.jobs
            .run_now(JobRunNowParams {
                job_id: hid.clone()
            })
            .await
            .unwrap()
            .into_inner()
            .ok
    );
    s.expect(&["waiting_for_host"]).await;
    assert_eq!(fake.runs.lock().unwrap().len(), runs_before);

    // A named agent is stored as given (svc-session runs the job in its session); a bad
    // name is invalid_params naming the field, nothing saved.
    let mut bad_agent = sched("every 5m");
    bad_agent.agent = Some("Not An Agent".into());
    let e = s.jobs.schedule(bad_agent).await.unwrap_err();
    let rpc = snowpea_proto::error::RpcError::from_status(&e);
    assert_eq!(rpc.code.wire(), "invalid_params");
    assert!(rpc.message.starts_with("params.agent:"), "{}", rpc.message);
    assert_eq!(s.jobs.list(()).await.unwrap().into_inner().jobs.len(), 2);

    // job.delete{deleteRuns}: the two finished runs' sessions are deleted through svc-session.
    let d = s
        .jobs
        .delete(JobDeleteParams {
            job_id: id.clone(),
            delete_runs: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((d.job_id.as_str(), d.deleted_sessions), (id.as_str(), 2));
    s.expect(&["deleted"]).await;
    let e = s
        .jobs
        .run_now(JobRunNowParams { job_id: id })
        .await
        .unwrap_err();
    assert_eq!(
        snowpea_proto::error::RpcError::from_status(&e).code.wire(),
        "not_found"
    );
}

/// A request carrying a gateway connection's context.
fn as_client<T>(kind: &str, id: &str, mut req: Request<T>) -> Request<T> {
    snowpea_common::context::CallContext {
        client_id: Some(id.into()),
        client_kind: Some(kind.into()),
        connection_id: Some("c".into()),
        ..Default::default()
    }
    .apply(req.metadata_mut());
    req
}

#[tokio::test]
async fn meta_jobs_belong_to_their_browser_client() {
    let home = Scheduler::home();
    let _session =
        SessionServer::start(FakeSession::default(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;
    let mut p = sched("every 1h");
    p.meta = Some(snowpea_proto::wkt::to_struct(
        &serde_json::json!({"flow": "inbox"}),
    ));
    // A TUI may not set meta.
    let e = s
        .jobs
        .schedule(as_client("tui", "t1", Request::new(p.clone())))
        .await
        .unwrap_err();
    assert_eq!(
        snowpea_proto::error::RpcError::from_status(&e).code.wire(),
        "unauthorized"
    );
    let r = s
        .jobs
        .schedule(as_client("browser", "b1", Request::new(p)))
        .await
        .unwrap()
        .into_inner();
    let fp = r.fingerprint.clone().unwrap();
    // Another browser sees it owned, without meta or fingerprint, and may not run it.
    let other = s
        .jobs
        .list(as_client("browser", "b2", Request::new(())))
        .await
        .unwrap()
        .into_inner()
        .jobs
        .remove(0);
    assert!(other.owned && other.meta.is_none() && other.fingerprint.is_none());
    let e = s
        .jobs
        .run_now(as_client(
            "browser",
            "b2",
            Request::new(JobRunNowParams {
                job_id: r.job_id.clone(),
            }),
        ))
        .await
        .unwrap_err();
    assert_eq!(
        snowpea_proto::error::RpcError::from_status(&e).code.wire(),
        "unauthorized"
    );
    // No agent tool can cancel it.
    let e = s
        .internal
        .tool_cancel(ToolCancelRequest {
            job_id: r.job_id.clone(),
            session_id: "s1".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        snowpea_proto::error::RpcError::from_status(&e).code.wire(),
        "unauthorized"
    );
    // The owner sees meta and the sealed fingerprint.
    let mine = s
        .jobs
        .list(as_client("browser", "b1", Request::new(())))
        .await
        .unwrap()
        .into_inner()
        .jobs
        .remove(0);
    assert_eq!(mine.fingerprint.as_deref(), Some(fp.as_str()));
    assert_eq!(
        snowpea_proto::wkt::from_struct(mine.meta.as_ref().unwrap())["flow"],
        "inbox"
    );
    assert!(
        s.jobs
            .run_now(as_client(
                "browser",
                "b1",
                Request::new(JobRunNowParams { job_id: r.job_id })
            ))
            .await
            .unwrap()
            .into_inner()
            .ok
    );
    s.expect(&["started", "finished"]).await;
}

#[tokio::test]
async fn agent_tool_jobs_report_created_via_tool_and_reach_their_origin_session() {
    let home = Scheduler::home();
    let fake = FakeSession::default();
    let _session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;
    let r = s
        .internal
        .tool_schedule(ToolScheduleRequest {
            spec: "10분 뒤".into(),
            task: "check mail".into(),
            mode: Some("plan".into()),
            session_id: "s_chat".into(),
            workdir: home.path().display().to_string(),
            agent: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.next_run_at.as_deref(), Some("2026-01-15T10:10:00Z"));
    let j = s
        .internal
        .tool_list(ToolListRequest {
            session_id: "s_chat".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .jobs
        .remove(0);
    assert_eq!(
        (j.created_via.as_str(), j.kind.as_str(), j.mode.as_str()),
        ("tool", "once", "plan")
    );
    assert_eq!(j.origin_session_id.as_deref(), Some("s_chat"));
    s.advance(600).await;
    s.expect(&["started", "finished"]).await;
    assert_eventually!({
        fake.events.lock().unwrap().clone() == vec![("s_chat".to_string(), "job.done".to_string())]
    });
    // The spent one-shot is disabled.
    let j = s.jobs.list(()).await.unwrap().into_inner().jobs.remove(0);
    assert!(!j.enabled && j.next_run_at.is_none());
}

#[tokio::test]
async fn the_manual_clock_only_moves_forward() {
    // The manual clock only moves forward.
    let home = Scheduler::home();
    let mut s = Scheduler::start(home, T0).await;
    let now = s
        .internal
        .set_clock(SetClockRequest {
            advance_ms: 0,
            set_to: Some("2020-01-01T00:00:00Z".into()),
        })
        .await
        .unwrap()
        .into_inner()
        .now;
    assert_eq!(now, T0);
    assert_eq!(s.advance(90).await, "2026-01-15T10:01:30Z");
}

/// The `field` of an `invalid_params` error.
fn invalid_field(e: &tonic::Status) -> String {
    let rpc = snowpea_proto::error::RpcError::from_status(e);
    assert_eq!(rpc.code.wire(), "invalid_params", "{}", rpc.message);
    rpc.details.unwrap()["field"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn out_of_range_template_values_are_invalid_params_and_never_reach_a_run() {
    let home = Scheduler::home();
    let fake = FakeSession::default();
    let _session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;
    let mut p = sched("every 60s");
    p.session_template = Some(job_schedule_params::SessionTemplate {
        host_tools_from: Some("x".into()),
        host_wait_sec: Some(1_000_000_000_000),
        ..Default::default()
    });
    let e = s.jobs.schedule(p.clone()).await.unwrap_err();
    assert_eq!(invalid_field(&e), "params.sessionTemplate.hostWaitSec");
    p.session_template = Some(job_schedule_params::SessionTemplate {
        catch_up_window_minutes: Some(-1),
        ..Default::default()
    });
    let e = s.jobs.schedule(p).await.unwrap_err();
    assert_eq!(
        invalid_field(&e),
        "params.sessionTemplate.catchUpWindowMinutes"
    );
    let id = s
        .jobs
        .schedule(sched("every 60s"))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    let e = s
        .jobs
        .update(JobUpdateParams {
            job_id: id.clone(),
            session_template: Some(job_update_params::SessionTemplate {
                host_wait_sec: Some(604_801),
                catch_up_window_minutes: None,
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(invalid_field(&e), "params.sessionTemplate.hostWaitSec");
    // The one job that was saved runs normally.
    s.advance(60).await;
    s.expect(&["started", "finished"]).await;
    assert_eq!(fake.runs.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn bad_settings_never_stop_the_scheduler_nor_blame_the_spec() {
    for (settings, logged) in [
        (
            r#"{"scheduler":{"timeZone":"Mars/Olympus"}}"#,
            "scheduler.timeZone",
        ),
        (r#"{"scheduler":{"timeZone":42}}"#, "scheduler.timeZone"),
        (r#"{"scheduler":{"timeZone":""}}"#, "scheduler.timeZone"),
        ("{ not json", "cannot read the settings"),
    ] {
        let home = Scheduler::home_with(settings);
        let fake = FakeSession::default();
        let _session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
        // Starts (SERVING) instead of exiting.
        let mut s = Scheduler::start(home.clone(), T0).await;
        for _ in 0..2 {
            let p = s
                .jobs
                .preview(JobPreviewParams {
                    spec: "every weekday at 8am".into(),
                })
                .await
                .unwrap_or_else(|e| panic!("{settings}: {e:?}"))
                .into_inner();
            assert_eq!(p.normalized.as_deref(), Some("0 8 * * 1-5"));
        }
        s.jobs.schedule(sched("every 60s")).await.unwrap();
        s.advance(60).await;
        s.expect(&["started", "finished"]).await;
        // Warned once, naming the setting, although the settings were read three times.
        let log = Scheduler::log(&home);
        assert_eq!(log.matches(logged).count(), 1, "{settings}: {log}");
    }
    // Going bad while running: job.schedule falls back too.
    let home = Scheduler::home();
    let _session =
        SessionServer::start(FakeSession::default(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;
    std::fs::write(
        home.path().join("settings.json"),
        r#"{"scheduler":{"timeZone":"Mars/Olympus"}}"#,
    )
    .unwrap();
    let r = s.jobs.schedule(sched("daily at 9:00")).await.unwrap();
    assert!(r.into_inner().next_run_at.is_some());
    let log = Scheduler::log(&home);
    assert_eq!(log.matches("scheduler.timeZone").count(), 1, "{log}");
}

#[tokio::test]
async fn oversized_params_are_invalid_params_naming_the_field() {
    let home = Scheduler::home();
    let mut s = Scheduler::start(home.clone(), T0).await;
    // 1 MB and 5 MB tasks: refused by the handler (not accepted, not a transport error).
    for size in [1 << 20, 5 << 20] {
        let mut p = sched("every 1h");
        p.task = "x".repeat(size);
        let e = s.jobs.schedule(p).await.unwrap_err();
        assert_eq!(invalid_field(&e), "params.task", "{size}");
        assert!(e.message().len() < 300, "{}", e.message());
    }
    let e = s
        .jobs
        .preview(JobPreviewParams {
            spec: format!("every {}", "9".repeat(600)),
        })
        .await
        .unwrap_err();
    assert_eq!(invalid_field(&e), "params.spec");
    let e = s
        .jobs
        .cancel(JobCancelParams {
            job_id: "j".repeat(129),
        })
        .await
        .unwrap_err();
    assert_eq!(invalid_field(&e), "params.jobId");
    assert!(s.jobs.list(()).await.unwrap().into_inner().jobs.is_empty());
}

#[tokio::test]
async fn an_explicit_zero_in_the_session_template_is_kept() {
    let home = Scheduler::home();
    let mut s = Scheduler::start(home.clone(), T0).await;
    let mut p = sched("every 1h");
    p.session_template = Some(job_schedule_params::SessionTemplate {
        catch_up_window_minutes: Some(0),
        host_wait_sec: Some(0),
        ..Default::default()
    });
    let zero = s.jobs.schedule(p).await.unwrap().into_inner().job_id;
    let dflt = s
        .jobs
        .schedule(sched("every 1h"))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    let jobs = s.jobs.list(()).await.unwrap().into_inner().jobs;
    let window = |id: &str| {
        jobs.iter()
            .find(|j| j.job_id == id)
            .unwrap()
            .catch_up_window_minutes
    };
    assert_eq!((window(&zero), window(&dflt)), (0, 60));
}

#[tokio::test]
async fn keep_runs_deletes_old_run_sessions_through_svc_session() {
    let home = Scheduler::home_with(r#"{"scheduler":{"timeZone":"UTC","keepRuns":1}}"#);
    let fake = FakeSession::default();
    let _session = SessionServer::start(fake.clone(), Scheduler::socket(&home, "session"));
    let mut s = Scheduler::start(home.clone(), T0).await;
    s.jobs.schedule(sched("every 60s")).await.unwrap();
    for _ in 0..3 {
        s.advance(60).await;
        s.expect(&["started", "finished"]).await;
    }
    assert_eventually!(fake.deleted.lock().unwrap().len() == 2);
    let mut deleted = fake.deleted.lock().unwrap().clone();
    deleted.sort();
    assert_eq!(deleted, ["s_fake_1", "s_fake_2"]);
    // The history stays: three finished runs, only the newest with its session.
    assert_eventually!({
        let c = rusqlite::Connection::open(home.path().join("state/scheduler.db")).unwrap();
        let mut st = c
            .prepare("SELECT status, session_id FROM occurrences ORDER BY scheduled_ms")
            .unwrap();
        let rows: Vec<(String, Option<String>)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows == [
            ("finished".to_string(), None),
            ("finished".to_string(), None),
            ("finished".to_string(), Some("s_fake_3".to_string())),
        ]
    });
}
