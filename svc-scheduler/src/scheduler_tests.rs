//! Runner tests: a fake svc-session and the manual clock (no real waiting).

use std::sync::Mutex;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use snowpea_common::bus::BusService;
use snowpea_common::context::CallContext;
use snowpea_proto::rpc::v1::service_bus_server::ServiceBus;
use snowpea_proto::rpc::v1::{ConnectionInfo, ConnectionSet, SubscribeRequest};
use snowpea_proto::session::v1::{DeleteSessionsReply, RunUnattendedReply, RunUnattendedRequest};
use tokio_stream::StreamExt;

use super::*;
use crate::clock::ManualClock;
use crate::ownership::Caller;
use crate::rpc::job::{JobApi, NewJob};
use crate::runner::{OnSession, SessionError, SessionRunner};

const T: Duration = Duration::from_secs(10);

/// A fake svc-session: records runs, answers with `reply` (or an error), optionally holds
/// each run until released.
#[derive(Debug)]
struct Fake {
    runs: Mutex<Vec<RunUnattendedRequest>>,
    events: Mutex<Vec<(String, String, Value)>>,
    fail: Mutex<Option<SessionError>>,
    status: Mutex<Option<String>>,
    hold: tokio::sync::Semaphore,
    holding: std::sync::atomic::AtomicBool,
    /// Sessions `watch` was asked about.
    watches: Mutex<Vec<String>>,
    /// What `watch` answers (default: the run finished, text `watched <sid>`).
    watch_reply: Mutex<Option<Result<RunUnattendedReply, SessionError>>>,
    /// Sessions deleted.
    deleted: Mutex<Vec<String>>,
    /// Sessions `delete_sessions` reports as skipped (still running).
    busy: Mutex<Vec<String>>,
    /// Every session `delete_sessions` was asked to delete.
    asked: Mutex<Vec<String>>,
}

impl Default for Fake {
    fn default() -> Self {
        Fake {
            runs: Mutex::default(),
            events: Mutex::default(),
            fail: Mutex::default(),
            status: Mutex::default(),
            hold: tokio::sync::Semaphore::new(0),
            holding: Default::default(),
            watches: Mutex::default(),
            watch_reply: Mutex::default(),
            deleted: Mutex::default(),
            busy: Mutex::default(),
            asked: Mutex::default(),
        }
    }
}

#[tonic::async_trait]
impl SessionRunner for Fake {
    async fn run(
        &self,
        req: RunUnattendedRequest,
        on_session: OnSession<'_>,
    ) -> Result<RunUnattendedReply, SessionError> {
        let n = {
            let mut runs = self.runs.lock().unwrap();
            runs.push(req);
            runs.len()
        };
        let sid = format!("s_{n}");
        on_session(&sid);
        if self.holding.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = tokio::time::timeout(T, self.hold.acquire())
                .await
                .expect("released")
                .unwrap()
                .forget();
        }
        if let Some(e) = self.fail.lock().unwrap().clone() {
            return Err(e);
        }
        let status = self
            .status
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(|| "finished".into());
        Ok(RunUnattendedReply {
            session_id: sid,
            status,
            text: format!("run {n} done"),
            error: String::new(),
        })
    }
    async fn watch(&self, sid: &str) -> Result<RunUnattendedReply, SessionError> {
        self.watches.lock().unwrap().push(sid.into());
        self.watch_reply.lock().unwrap().clone().unwrap_or_else(|| {
            Ok(RunUnattendedReply {
                session_id: sid.into(),
                status: "finished".into(),
                text: format!("watched {sid}"),
                error: String::new(),
            })
        })
    }
    async fn delete_sessions(&self, ids: Vec<String>) -> Result<DeleteSessionsReply, SessionError> {
        self.asked.lock().unwrap().extend(ids.iter().cloned());
        let busy = self.busy.lock().unwrap().clone();
        let (skipped, deleted): (Vec<String>, Vec<String>) =
            ids.into_iter().partition(|id| busy.contains(id));
        let n = deleted.len() as i64;
        self.deleted.lock().unwrap().extend(deleted);
        Ok(DeleteSessionsReply {
            deleted: n,
            skipped,
        })
    }
    async fn emit_event(
        &self,
        session_id: &str,
        event: crate::runner::OriginEvent,
    ) -> Result<(), SessionError> {
        let (kind, payload) = crate::runner::origin_event_json(&event);
        self.events
            .lock()
            .unwrap()
            .push((session_id.into(), kind.into(), payload));
        Ok(())
    }
}

struct Rig {
    api: JobApi,
    clock: ManualClock,
    fake: Arc<Fake>,
    bus: BusService,
    events: std::pin::Pin<
        Box<
            dyn futures::Stream<Item = Result<snowpea_proto::rpc::v1::Outbound, tonic::Status>>
                + Send,
        >,
    >,
    _home: tempfile::TempDir,
}

const T0: &str = "2026-01-15T10:00:00Z";

async fn rig() -> Rig {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        r#"{"scheduler":{"timeZone":"UTC"}}"#,
    )
    .unwrap();
    let clock = ManualClock::new(T0.parse().unwrap());
    let fake = Arc::new(Fake::default());
    let hub = BusHub::new();
    let bus = BusService::new(hub.clone());
    let events = bus
        .subscribe(tonic::Request::new(SubscribeRequest::default()))
        .await
        .unwrap()
        .into_inner();
    let sched = Scheduler::new(
        Arc::new(Store::open_in_memory().unwrap()),
        Arc::new(clock.clone()),
        fake.clone(),
        hub,
        Config::default(),
    );
    sched.use_settings_file(home.path().join("settings.json"));
    let api = JobApi {
        sched,
        home: snowpea_common::home::Home::new(home.path()),
    };
    Rig {
        api,
        clock,
        fake,
        bus,
        events,
        _home: home,
    }
}

impl Rig {
    fn schedule(&self, spec: &str, f: impl FnOnce(&mut NewJob)) -> String {
        let mut n = NewJob {
            spec: spec.into(),
            task: "do it".into(),
            created_via: "rpc",
            ..Default::default()
        };
        f(&mut n);
        self.api
            .schedule(&Caller::Client(CallContext::default()), n)
            .unwrap()
            .job_id
    }

    /// The next `job.event` (kind, payload), within the timeout.
    async fn event(&mut self) -> (String, Value) {
        loop {
            let item = tokio::time::timeout(T, self.events.next())
                .await
                .expect("a job.event in time")
                .unwrap()
                .unwrap();
            if let Some(snowpea_proto::rpc::v1::outbound::Item::Notification(n)) = item.item {
                let v: Value = serde_json::from_str(&n.params_json).unwrap();
                return (v["kind"].as_str().unwrap().to_owned(), v["payload"].clone());
            }
        }
    }

    async fn expect(&mut self, kinds: &[&str]) -> Vec<Value> {
        let mut out = vec![];
        for k in kinds {
            let (kind, payload) = self.event().await;
            assert_eq!(&kind, k, "payload {payload}");
            out.push(payload);
        }
        out
    }

    fn job(&self, id: &str) -> JobRow {
        self.api.sched.store.job(id).unwrap().unwrap()
    }

    fn advance(&self, secs: i64) {
        self.clock.advance(SignedDuration::from_secs(secs));
    }

    fn tick(&self) -> usize {
        self.api.sched.process_due().unwrap()
    }
}

fn iso_of(ms: Option<i64>) -> Option<String> {
    ms.map(|m| crate::spec::iso(Timestamp::from_millisecond(m).unwrap()))
}

#[tokio::test]
async fn due_then_started_then_finished_through_the_tick() {
    let mut r = rig().await;
    let id = r.schedule("every 60s", |n| {
        n.origin_session_id = Some("s_origin".into())
    });
    let tick = tokio::spawn(crate::tick::run(
        r.api.sched.clone(),
        std::future::pending(),
    ));
    r.advance(60);
    let p = r.expect(&["started", "finished"]).await;
    assert_eq!(p[0]["scheduledAt"], "2026-01-15T10:01:00Z");
    assert_eq!(p[1]["status"], "finished");
    assert_eq!(p[1]["sessionId"], "s_1");
    assert_eq!(p[1]["text"], "run 1 done");
    let req = r.fake.runs.lock().unwrap()[0].clone();
    assert_eq!(
        (req.kind.as_str(), req.task.as_str(), req.mode.as_str()),
        ("scheduled", "do it", "accept")
    );
    assert_eq!(req.job.unwrap().trigger, "schedule");
    let j = r.job(&id);
    assert_eq!(j.last_status.as_deref(), Some("ok"));
    assert_eq!(
        iso_of(j.last_run_ms).as_deref(),
        Some("2026-01-15T10:01:00Z")
    );
    assert_eq!(
        iso_of(j.next_run_ms).as_deref(),
        Some("2026-01-15T10:02:00Z")
    );
    // job.done on the origin session.
    let ev = r.fake.events.lock().unwrap().clone();
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].0.as_str(), ev[0].1.as_str()),
        ("s_origin", "job.done")
    );
    assert_eq!(ev[0].2["jobId"], id);
    // The next occurrence fires too.
    r.advance(60);
    r.expect(&["started", "finished"]).await;
    assert_eq!(r.fake.runs.lock().unwrap().len(), 2);
    tick.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_racing_the_tick_runs_once() {
    for _ in 0..20 {
        let mut r = rig().await;
        r.fake
            .holding
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let id = r.schedule("every 60s", |_| {});
        r.advance(60);
        let (a, b) = (r.api.clone(), r.api.clone());
        let id2 = id.clone();
        let t1 = tokio::spawn(async move { a.sched.process_due().unwrap() });
        let t2 = tokio::spawn(async move {
            b.run_now(&Caller::Client(CallContext::default()), &id2)
                .unwrap()
                .ok
        });
        let ticked = t1.await.unwrap();
        let ran_now = t2.await.unwrap();
        assert_eq!(
            ticked + usize::from(ran_now),
            1,
            "exactly one of them fired"
        );
        r.expect(&["started"]).await;
        r.fake.hold.add_permits(10);
        r.expect(&["finished"]).await;
        assert_eq!(r.fake.runs.lock().unwrap().len(), 1);
        assert_eq!(r.api.sched.store.occurrences(&id, 10).unwrap().len(), 1);
    }
}

#[tokio::test]
async fn run_now_while_running_does_not_start_a_second_run() {
    let mut r = rig().await;
    r.fake
        .holding
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let id = r.schedule("every 1h", |_| {});
    let me = Caller::Client(CallContext::default());
    assert!(r.api.run_now(&me, &id).unwrap().ok);
    r.expect(&["started"]).await;
    assert!(!r.api.run_now(&me, &id).unwrap().ok);
    r.fake.hold.add_permits(1);
    let p = r.expect(&["finished"]).await;
    assert_eq!(p[0]["trigger"], "runNow");
    // A recurring job keeps its schedule after runNow.
    assert_eq!(
        iso_of(r.job(&id).next_run_ms).as_deref(),
        Some("2026-01-15T11:00:00Z")
    );
}

#[tokio::test]
async fn catch_up_within_the_window_fires_once_and_records_the_rest_missed() {
    let mut r = rig().await;
    let id = r.schedule("0 * * * *", |n| n.catch_up_window_minutes = Some(30));
    // "Down" from 10:00 to 13:10: 11:00 and 12:00 missed, 13:00 fires once.
    r.advance(3 * 3600 + 600);
    assert_eq!(r.tick(), 1);
    assert_eq!(r.tick(), 0, "nothing fires twice");
    let p = r.expect(&["missed", "started", "finished"]).await;
    assert_eq!(p[0]["count"], 2);
    assert_eq!(p[1]["scheduledAt"], "2026-01-15T13:00:00Z");
    let statuses: Vec<String> = r
        .api
        .sched
        .store
        .occurrences(&id, 10)
        .unwrap()
        .into_iter()
        .map(|o| o.status)
        .collect();
    assert_eq!(statuses, ["finished", "missed", "missed"]);
    assert_eq!(
        iso_of(r.job(&id).next_run_ms).as_deref(),
        Some("2026-01-15T14:00:00Z")
    );
}

#[tokio::test]
async fn catch_up_beyond_the_window_records_missed_and_held() {
    let mut r = rig().await;
    let id = r.schedule("0 * * * *", |n| n.catch_up_window_minutes = Some(10));
    r.advance(3600 + 1800); // 11:30: 11:00 is 30 min late
    assert_eq!(r.tick(), 0);
    let p = r.expect(&["missed"]).await;
    assert_eq!(p[0]["scheduledAt"], "2026-01-15T11:00:00Z");
    assert!(r.fake.runs.lock().unwrap().is_empty());
    let view = r
        .api
        .view(&Caller::Client(CallContext::default()), &r.job(&id))
        .unwrap();
    let held = view.held.unwrap();
    assert_eq!(
        (held.scheduled_at.as_str(), held.status.as_str()),
        ("2026-01-15T11:00:00Z", "missed")
    );
    assert_eq!(view.next_run_at.as_deref(), Some("2026-01-15T12:00:00Z"));
}

#[tokio::test]
async fn a_one_shot_missed_for_good_is_disabled() {
    let mut r = rig().await;
    let id = r.schedule("in 10 minutes", |n| n.catch_up_window_minutes = Some(5));
    r.advance(3600);
    assert_eq!(r.tick(), 0);
    r.expect(&["missed"]).await;
    let j = r.job(&id);
    assert!(!j.enabled);
    assert_eq!(j.next_run_ms, None);
    // A one-shot that fires is spent afterwards too.
    let id = r.schedule("in 1 minute", |_| {});
    r.advance(60);
    assert_eq!(r.tick(), 1);
    r.expect(&["started", "finished"]).await;
    assert!(!r.job(&id).enabled);
}

#[tokio::test]
async fn svc_session_down_fails_the_run_and_the_next_occurrence_still_fires() {
    let mut r = rig().await;
    let id = r.schedule("every 60s", |n| n.origin_session_id = Some("s_o".into()));
    *r.fake.fail.lock().unwrap() = Some(SessionError::Unavailable("connection refused".into()));
    r.advance(60);
    r.tick();
    let p = r.expect(&["started", "failed"]).await;
    assert!(
        p[1]["error"]
            .as_str()
            .unwrap()
            .contains("svc-session is unavailable"),
        "{}",
        p[1]
    );
    assert_eq!(r.job(&id).last_status.as_deref(), Some("error"));
    assert_eq!(r.fake.events.lock().unwrap()[0].1, "job.failed");
    *r.fake.fail.lock().unwrap() = None;
    r.advance(60);
    r.tick();
    r.expect(&["started", "finished"]).await;
    assert_eq!(r.job(&id).last_status.as_deref(), Some("ok"));
}

#[tokio::test]
async fn denied_by_timeout_is_recorded() {
    let mut r = rig().await;
    let id = r.schedule("every 60s", |_| {});
    *r.fake.status.lock().unwrap() = Some("denied_by_timeout".into());
    r.advance(60);
    r.tick();
    r.expect(&["started", "denied"]).await;
    assert_eq!(r.job(&id).last_status.as_deref(), Some("denied_by_timeout"));
}

#[tokio::test]
async fn waiting_for_host_then_missed_or_run_when_the_host_connects() {
    let mut r = rig().await;
    let id = r.schedule("every 1h", |n| {
        n.host_tools_from = Some("browser-1".into());
        n.host_wait_sec = Some(120);
    });
    r.advance(3600);
    r.tick();
    let p = r.expect(&["waiting_for_host"]).await;
    assert_eq!(p[0]["hostToolsFrom"], "browser-1");
    let held = r
        .api
        .view(&Caller::Client(CallContext::default()), &r.job(&id))
        .unwrap()
        .held
        .unwrap();
    assert_eq!(held.status, "waiting_for_host");
    assert_eq!(
        r.api
            .next_run_for_client("browser-1")
            .unwrap()
            .next_run_at
            .as_deref(),
        Some("2026-01-15T11:00:00Z")
    );
    r.advance(121);
    r.expect(&["missed"]).await;
    assert!(r.fake.runs.lock().unwrap().is_empty());
    // Next hour the host connects while the run waits: it runs.
    r.advance(3600);
    r.tick();
    r.expect(&["waiting_for_host"]).await;
    r.bus
        .sync_connections(tonic::Request::new(ConnectionSet {
            full: false,
            connections: vec![ConnectionInfo {
                connection_id: "c1".into(),
                client_id: Some("browser-1".into()),
                client_kind: Some("browser".into()),
                ..Default::default()
            }],
            closed: vec![],
        }))
        .await
        .unwrap();
    r.expect(&["started", "finished"]).await;
}

#[tokio::test]
async fn ownership_refusals() {
    let r = rig().await;
    let owner = Caller::Client(CallContext {
        client_id: Some("b1".into()),
        client_kind: Some("browser".into()),
        ..Default::default()
    });
    let other = Caller::Client(CallContext {
        client_id: Some("b2".into()),
        client_kind: Some("browser".into()),
        ..Default::default()
    });
    let n = NewJob {
        spec: "every 1h".into(),
        task: "t".into(),
        created_via: "rpc",
        meta: Some(serde_json::json!({"tab": 1})),
        ..Default::default()
    };
    let res = r.api.schedule(&owner, n.clone()).unwrap();
    assert!(res.fingerprint.as_deref().unwrap().starts_with("fp_"));
    let id = res.job_id;
    for e in [
        r.api.run_now(&other, &id).unwrap_err(),
        r.api.cancel(&other, &id).unwrap_err(),
        r.api
            .cancel(
                &Caller::Tool {
                    session_id: "s".into(),
                },
                &id,
            )
            .unwrap_err(),
    ] {
        assert!(matches!(e, crate::error::JobError::NotOwner(_)), "{e}");
    }
    let seen_by_other = r.api.list(&other).unwrap().jobs.remove(0);
    assert!(
        seen_by_other.owned
            && seen_by_other.meta.is_none()
            && seen_by_other.fingerprint.is_none()
            && seen_by_other.owner_client_id.is_none()
    );
    let seen_by_owner = r.api.list(&owner).unwrap().jobs.remove(0);
    assert_eq!(seen_by_owner.fingerprint, res.fingerprint);
    assert!(seen_by_owner.meta.is_some());
    assert!(r.api.cancel(&owner, &id).unwrap().ok);
    // Meta from a non-browser is refused.
    assert!(r
        .api
        .schedule(&Caller::Client(CallContext::default()), n)
        .is_err());
}

#[tokio::test]
async fn recovery_never_runs_an_occurrence_twice_nor_skips_it_silently() {
    let mut r = rig().await;
    let a = r.schedule("every 1h", |n| n.catch_up_window_minutes = Some(30));
    let b = r.schedule("every 1h", |n| n.catch_up_window_minutes = Some(30));
    let c = r.schedule("every 1h", |n| n.catch_up_window_minutes = Some(30));
    let claim = |id: &str| Claim {
        job_id: id.into(),
        scheduled_ms: ms("2026-01-15T11:00:00Z"),
        run_id: "run_x".into(),
        trigger: "schedule".into(),
        now_ms: ms("2026-01-15T11:00:00Z"),
        expect_next_ms: None,
        new_next_ms: Some(ms("2026-01-15T12:00:00Z")),
        new_enabled: true,
        missed: vec![],
    };
    let store = r.api.sched.store.clone();
    // a: claimed and handed to svc-session before the "crash"; b: claimed only; c: claimed only,
    // but the restart comes too late for it.
    for id in [&a, &b, &c] {
        assert!(store.claim(&claim(id)).unwrap());
    }
    store
        .mark_running(&a, ms("2026-01-15T11:00:00Z"), ms("2026-01-15T11:00:00Z"))
        .unwrap();
    store
        .update_job(&JobRow {
            catch_up_window_minutes: 0,
            ..r.job(&c)
        })
        .unwrap();
    r.clock.set("2026-01-15T11:10:00Z".parse().unwrap());
    r.api.sched.recover().unwrap();
    let mut kinds = vec![];
    for _ in 0..4 {
        kinds.push(r.event().await);
    }
    let by = |k: &str| kinds.iter().filter(|(kind, _)| kind == k).count();
    assert_eq!(
        (by("failed"), by("missed"), by("started"), by("finished")),
        (1, 1, 1, 1),
        "{kinds:?}"
    );
    assert_eq!(r.fake.runs.lock().unwrap().len(), 1, "only b runs");
    assert_eq!(r.fake.runs.lock().unwrap()[0].job_id, b);
    let status = |id: &str| store.occurrences(id, 1).unwrap()[0].status.clone();
    assert_eq!(
        (status(&a).as_str(), status(&c).as_str()),
        ("failed", "missed")
    );
    assert!(store.open_occurrences().unwrap().is_empty());
}

fn ms(s: &str) -> i64 {
    s.parse::<Timestamp>().unwrap().as_millisecond()
}

#[tokio::test]
async fn update_pauses_resumes_and_reschedules_and_delete_removes_runs() {
    let mut r = rig().await;
    let me = Caller::Client(CallContext::default());
    let id = r.schedule("every 10 minutes", |_| {});
    let up = |enabled: Option<bool>, schedule: Option<&str>| {
        snowpea_proto::scheduler::v1::JobUpdateParams {
            job_id: id.clone(),
            enabled,
            schedule: schedule.map(Into::into),
            session_template: None,
        }
    };
    let v = r.api.update(&me, up(Some(false), None)).unwrap();
    assert!(!v.enabled && v.next_run_at.is_none());
    r.expect(&["updated"]).await;
    r.advance(3600);
    assert_eq!(r.tick(), 0, "a paused job never fires");
    let v = r.api.update(&me, up(Some(true), None)).unwrap();
    assert_eq!(
        v.next_run_at.as_deref(),
        Some("2026-01-15T11:10:00Z"),
        "resumes from now"
    );
    r.expect(&["updated"]).await;
    let e = r
        .api
        .update(&me, up(None, Some("every blue moon")))
        .unwrap_err()
        .into_rpc();
    assert_eq!(e.details.unwrap()["field"], "params.schedule");
    let v = r.api.update(&me, up(None, Some("daily at 9:00"))).unwrap();
    assert_eq!(
        (v.kind.as_str(), v.next_run_at.as_deref()),
        ("cron", Some("2026-01-16T09:00:00Z"))
    );
    r.expect(&["updated"]).await;
    // Run it once, then delete with its run session.
    assert!(r.api.run_now(&me, &id).unwrap().ok);
    r.expect(&["started", "finished"]).await;
    let d = r.api.delete(&me, &id, true).await.unwrap();
    assert_eq!(d.deleted_sessions, 1);
    r.expect(&["deleted"]).await;
    assert!(r.api.sched.store.job(&id).unwrap().is_none());
    assert!(matches!(
        r.api.run_now(&me, &id),
        Err(crate::error::JobError::NotFound(_))
    ));
}

#[tokio::test]
async fn invalid_specs_name_the_field_and_say_why() {
    let r = rig().await;
    let n = NewJob {
        spec: "2020-01-01T00:00:00Z".into(),
        task: "t".into(),
        created_via: "rpc",
        ..Default::default()
    };
    let e = r
        .api
        .schedule(&Caller::Client(CallContext::default()), n)
        .unwrap_err()
        .into_rpc();
    assert_eq!(e.code, snowpea_proto::error::ErrorCode::InvalidParams);
    assert!(
        e.message.starts_with("params.spec: ") && e.message.contains("past"),
        "{}",
        e.message
    );
    let p = r.api.preview("평일 오전 8시").unwrap();
    assert_eq!(
        (
            p.kind.as_str(),
            p.normalized.as_deref(),
            p.next_run_at.as_deref()
        ),
        ("cron", Some("0 8 * * 1-5"), Some("2026-01-16T08:00:00Z"))
    );
}

fn field_of(e: crate::error::JobError) -> String {
    let e = e.into_rpc();
    assert_eq!(
        e.code,
        snowpea_proto::error::ErrorCode::InvalidParams,
        "{e:?}"
    );
    e.details.unwrap()["field"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn out_of_range_template_values_are_refused_naming_the_field() {
    let r = rig().await;
    let me = Caller::Client(CallContext::default());
    let host = "params.sessionTemplate.hostWaitSec";
    let window = "params.sessionTemplate.catchUpWindowMinutes";
    for (wait, win, field) in [
        (1_000_000_000_000, 0, host),
        (604_801, 0, host),
        (-1, 0, host),
        (0, 525_601, window),
        (0, i64::MAX, window),
        (0, -5, window),
    ] {
        let n = NewJob {
            spec: "every 1h".into(),
            task: "t".into(),
            created_via: "rpc",
            host_tools_from: Some("browser-1".into()),
            host_wait_sec: Some(wait),
            catch_up_window_minutes: Some(win),
            ..Default::default()
        };
        assert_eq!(field_of(r.api.schedule(&me, n).unwrap_err()), field);
    }
    assert!(r.api.list(&me).unwrap().jobs.is_empty(), "nothing saved");
    // The bounds themselves are fine.
    let id = r.schedule("every 1h", |n| {
        n.host_wait_sec = Some(604_800);
        n.catch_up_window_minutes = Some(525_600);
    });
    let up = |wait: Option<i64>, win: Option<i64>| snowpea_proto::scheduler::v1::JobUpdateParams {
        job_id: id.clone(),
        session_template: Some(
            snowpea_proto::scheduler::v1::job_update_params::SessionTemplate {
                catch_up_window_minutes: win,
                host_wait_sec: wait,
            },
        ),
        ..Default::default()
    };
    for (wait, win, field) in [
        (Some(1_000_000_000_000), None, host),
        (Some(-1), None, host),
        (None, Some(525_601), window),
        (None, Some(-1), window),
    ] {
        assert_eq!(
            field_of(r.api.update(&me, up(wait, win)).unwrap_err()),
            field
        );
    }
    let j = r.job(&id);
    assert_eq!(
        (j.host_wait_sec, j.catch_up_window_minutes),
        (604_800, 525_600)
    );
}

#[tokio::test]
async fn a_stored_huge_host_wait_neither_panics_nor_wedges_the_job() {
    // A row written before the ranges were checked: hostWaitSec 10^12.
    let mut r = rig().await;
    let id = r.schedule("every 1h", |n| n.host_tools_from = Some("browser-1".into()));
    r.api
        .sched
        .store
        .update_job(&JobRow {
            host_wait_sec: 1_000_000_000_000,
            ..r.job(&id)
        })
        .unwrap();
    r.advance(3600);
    assert_eq!(r.tick(), 1);
    // Clamped to 7 days, not a panic.
    let p = r.expect(&["waiting_for_host"]).await;
    assert_eq!(p[0]["waitUntil"], "2026-01-22T11:00:00Z");
    r.advance(7 * 86_400 + 1);
    r.expect(&["missed"]).await;
    assert!(!r.job(&id).running, "the job is free again");
}

#[tokio::test]
async fn a_host_wait_past_the_last_representable_time_fails_the_run() {
    let mut r = rig().await;
    let id = r.schedule("every 1h", |n| {
        n.host_tools_from = Some("browser-1".into());
        n.host_wait_sec = Some(604_800);
    });
    r.clock.set("9999-12-29T00:00:00Z".parse().unwrap());
    let me = Caller::Client(CallContext::default());
    assert!(r.api.run_now(&me, &id).unwrap().ok);
    let p = r.expect(&["failed"]).await;
    assert!(
        p[0]["error"]
            .as_str()
            .unwrap()
            .contains("beyond the last representable time"),
        "{}",
        p[0]
    );
    let j = r.job(&id);
    assert!(!j.running);
    assert_eq!(j.last_status.as_deref(), Some("error"));
    assert!(r.api.sched.store.open_occurrences().unwrap().is_empty());
}

#[tokio::test]
async fn recovery_with_a_huge_stored_catch_up_window_does_not_panic() {
    let mut r = rig().await;
    let id = r.schedule("every 1h", |_| {});
    let store = r.api.sched.store.clone();
    assert!(store
        .claim(&Claim {
            job_id: id.clone(),
            scheduled_ms: ms("2026-01-15T11:00:00Z"),
            run_id: "run_x".into(),
            trigger: "schedule".into(),
            now_ms: ms("2026-01-15T11:00:00Z"),
            expect_next_ms: None,
            new_next_ms: Some(ms("2026-01-15T12:00:00Z")),
            new_enabled: true,
            missed: vec![],
        })
        .unwrap());
    store
        .update_job(&JobRow {
            catch_up_window_minutes: i64::MAX,
            ..r.job(&id)
        })
        .unwrap();
    r.clock.set("2026-01-16T11:00:00Z".parse().unwrap());
    r.api.sched.recover().unwrap();
    r.expect(&["started", "finished"]).await;
    assert_eq!(r.fake.runs.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn an_unreadable_stored_schedule_pauses_the_job_instead_of_spinning() {
    let mut r = rig().await;
    let id = r.schedule("every 1h", |_| {});
    r.api
        .sched
        .store
        .update_job(&JobRow {
            kind: "cron".into(),
            normalized: "not a cron rule".into(),
            ..r.job(&id)
        })
        .unwrap();
    r.advance(3600);
    assert_eq!(r.tick(), 0);
    let p = r.expect(&["updated"]).await;
    assert_eq!(p[0]["enabled"], false);
    let j = r.job(&id);
    assert!(!j.enabled && j.next_run_ms.is_none());
    assert_eq!(
        r.api.sched.store.earliest_due().unwrap(),
        None,
        "nothing stays due"
    );
}

#[tokio::test]
async fn bad_settings_fall_back_and_are_never_blamed_on_the_spec() {
    let r = rig().await;
    let settings = r._home.path().join("settings.json");
    let me = Caller::Client(CallContext::default());
    for (i, bad) in [
        r#"{"scheduler":{"timeZone":"Mars/Olympus"}}"#,
        r#"{"scheduler":{"timeZone":42}}"#,
        r#"{"scheduler":{"timeZone":""}}"#,
        "{ not json",
    ]
    .into_iter()
    .enumerate()
    {
        std::fs::write(&settings, bad).unwrap();
        let p = r.api.preview("every weekday at 8am").unwrap();
        assert_eq!(p.normalized.as_deref(), Some("0 8 * * 1-5"), "{bad}");
        r.schedule("daily at 9:00", |_| {});
        assert_eq!(r.api.list(&me).unwrap().jobs.len(), i + 1);
        let j = r.api.list(&me).unwrap().jobs.pop().unwrap();
        assert_eq!(j.kind, "cron");
    }
    // Each distinct problem is logged once.
    std::fs::write(&settings, r#"{"scheduler":{"timeZone":"Mars/Olympus"}}"#).unwrap();
    let loaded = crate::config::Config::load(&settings);
    assert!(r
        .api
        .sched
        .note_settings_warnings(&loaded.warnings)
        .is_empty());
    std::fs::write(&settings, r#"{"scheduler":{"timeZone":"Venus/Maxwell"}}"#).unwrap();
    let loaded = crate::config::Config::load(&settings);
    assert_eq!(
        r.api.sched.note_settings_warnings(&loaded.warnings).len(),
        1
    );
}

#[tokio::test]
async fn oversized_params_are_refused_naming_the_field() {
    let r = rig().await;
    let me = Caller::Client(CallContext::default());
    let job = |spec: String, task: String| NewJob {
        spec,
        task,
        created_via: "rpc",
        ..Default::default()
    };
    let long_spec = format!("every 1h{}", " ".repeat(600));
    let e = r
        .api
        .schedule(&me, job(format!("in 1h {}", "x".repeat(600)), "t".into()))
        .unwrap_err();
    assert_eq!(field_of(e), "params.spec");
    assert_eq!(
        field_of(
            r.api
                .schedule(&me, job(long_spec.clone(), "t".into()))
                .unwrap_err()
        ),
        "params.spec"
    );
    let e = r
        .api
        .schedule(&me, job("every 1h".into(), "t".repeat(32_769)))
        .unwrap_err()
        .into_rpc();
    assert_eq!(e.details.unwrap()["field"], "params.task");
    assert!(e.message.len() < 200, "{}", e.message);
    assert_eq!(
        field_of(r.api.preview(&long_spec).unwrap_err()),
        "params.spec"
    );
    // At the limits it is fine.
    let id = r
        .api
        .schedule(
            &me,
            job(format!("every 1h{}", " ".repeat(504)), "é".repeat(32_768)),
        )
        .unwrap()
        .job_id;
    let e = r
        .api
        .update(
            &me,
            snowpea_proto::scheduler::v1::JobUpdateParams {
                job_id: id.clone(),
                schedule: Some(format!("daily at 9:00 {}", "!".repeat(600))),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(field_of(e), "params.schedule");
    // jobId: longer than 128 characters is invalid_params; an unknown shorter one not_found,
    // its message repeating at most 80 characters of it.
    let long_id = "j".repeat(129);
    assert_eq!(
        field_of(r.api.run_now(&me, &long_id).unwrap_err()),
        "params.jobId"
    );
    assert_eq!(
        field_of(r.api.cancel(&me, &long_id).unwrap_err()),
        "params.jobId"
    );
    assert_eq!(
        field_of(r.api.delete(&me, &long_id, false).await.unwrap_err()),
        "params.jobId"
    );
    let e = r.api.run_now(&me, &"j".repeat(128)).unwrap_err().into_rpc();
    assert_eq!(e.code, snowpea_proto::error::ErrorCode::NotFound);
    assert!(!e.message.contains(&"j".repeat(81)), "{}", e.message);
    assert_eq!(r.api.list(&me).unwrap().jobs.len(), 1);
}

#[tokio::test]
async fn explicit_zeros_in_the_template_are_kept_and_absent_takes_the_defaults() {
    let mut r = rig().await;
    let zero = r.schedule("0 * * * *", |n| {
        n.host_wait_sec = Some(0);
        n.catch_up_window_minutes = Some(0);
        n.host_tools_from = Some("browser-1".into());
    });
    let dflt = r.schedule("0 * * * *", |_| {});
    let j = r.job(&zero);
    assert_eq!((j.host_wait_sec, j.catch_up_window_minutes), (0, 0));
    let j = r.job(&dflt);
    assert_eq!((j.host_wait_sec, j.catch_up_window_minutes), (300, 60));
    // catchUpWindowMinutes 0: two minutes late is missed (the default window would fire it).
    r.api
        .delete(&Caller::Client(CallContext::default()), &dflt, false)
        .await
        .unwrap();
    r.expect(&["deleted"]).await;
    r.advance(3600 + 120);
    assert_eq!(r.tick(), 0);
    r.expect(&["missed"]).await;
    // hostWaitSec 0: not connected → missed at once, no waiting_for_host.
    r.advance(3600 - 120);
    assert_eq!(r.tick(), 1);
    let p = r.expect(&["missed"]).await;
    assert!(
        p[0]["reason"]
            .as_str()
            .unwrap()
            .contains("hostWaitSec is 0"),
        "{}",
        p[0]
    );
    assert!(r.fake.runs.lock().unwrap().is_empty());
    assert!(!r.job(&zero).running);
}

#[tokio::test]
async fn recovery_follows_a_running_occurrence_with_a_session_to_its_real_end() {
    let mut r = rig().await;
    let with = r.schedule("every 1h", |n| n.origin_session_id = Some("s_o".into()));
    let without = r.schedule("every 1h", |_| {});
    let store = r.api.sched.store.clone();
    let at = ms("2026-01-15T11:00:00Z");
    // Both were handed to svc-session before the "crash"; one named its session.
    for id in [&with, &without] {
        assert!(store
            .claim(&Claim {
                job_id: id.to_string(),
                scheduled_ms: at,
                run_id: format!("run_{id}"),
                trigger: "schedule".into(),
                now_ms: at,
                expect_next_ms: None,
                new_next_ms: Some(ms("2026-01-15T12:00:00Z")),
                new_enabled: true,
                missed: vec![],
            })
            .unwrap());
        store.mark_running(id, at, at).unwrap();
    }
    store.set_session(&with, at, "s_run").unwrap();
    r.clock.set("2026-01-15T11:05:00Z".parse().unwrap());
    let sched = r.api.sched.clone();
    sched.recover().unwrap();
    let mut got = vec![];
    for _ in 0..2 {
        got.push(r.event().await);
    }
    let by_session = |sid: &str| {
        got.iter()
            .find(|(_, p)| p["sessionId"] == sid)
            .cloned()
            .unwrap_or_else(|| panic!("no event for {sid}: {got:?}"))
    };
    // The followed run is recorded with its real result, on its origin session too.
    let (kind, p) = by_session("s_run");
    assert_eq!(kind, "finished", "{p}");
    assert_eq!(p["text"], "watched s_run");
    assert_eq!(p["runId"], format!("run_{with}"));
    assert_eq!(r.job(&with).last_status.as_deref(), Some("ok"));
    eventually_events(&r, 1).await;
    assert_eq!(r.fake.events.lock().unwrap()[0].1, "job.done");
    // Without a session it fails as before.
    let (kind, p) = got
        .iter()
        .find(|(_, p)| p["sessionId"].is_null())
        .cloned()
        .unwrap();
    assert_eq!(kind, "failed");
    assert!(p["error"].as_str().unwrap().contains("interrupted"), "{p}");
    // No run was started again: svc-session was only asked to watch.
    assert!(r.fake.runs.lock().unwrap().is_empty(), "never run twice");
    assert_eq!(*r.fake.watches.lock().unwrap(), ["s_run"]);
    assert!(store.open_occurrences().unwrap().is_empty());
    assert_eq!(r.job(&without).last_status.as_deref(), Some("error"));
}

#[tokio::test]
async fn a_run_svc_session_cannot_follow_after_a_restart_ends_failed_with_the_reason() {
    let mut r = rig().await;
    let id = r.schedule("every 1h", |_| {});
    let store = r.api.sched.store.clone();
    let at = ms("2026-01-15T11:00:00Z");
    assert!(store
        .claim(&Claim {
            job_id: id.clone(),
            scheduled_ms: at,
            run_id: "run_1".into(),
            trigger: "schedule".into(),
            now_ms: at,
            expect_next_ms: None,
            new_next_ms: Some(ms("2026-01-15T12:00:00Z")),
            new_enabled: true,
            missed: vec![],
        })
        .unwrap());
    store.mark_running(&id, at, at).unwrap();
    store.set_session(&id, at, "s_gone").unwrap();
    *r.fake.watch_reply.lock().unwrap() = Some(Err(SessionError::Failed(
        "svc-session: no session \"s_gone\"".into(),
    )));
    r.api.sched.recover().unwrap();
    let p = r.expect(&["failed"]).await;
    let err = p[0]["error"].as_str().unwrap();
    assert!(
        err.contains("interrupted") && err.contains("s_gone"),
        "{err}"
    );
    assert_eq!(p[0]["sessionId"], "s_gone");
    assert!(!r.job(&id).running);
    assert!(r.fake.runs.lock().unwrap().is_empty());
}

/// Waits until the fake recorded `n` origin-session events.
async fn eventually_events(r: &Rig, n: usize) {
    snowpea_testkit::assert_eventually!(
        within = T,
        r.fake.events.lock().unwrap().len() >= n,
        "origin events in time"
    );
}

#[tokio::test]
async fn occurrences_coalesced_into_a_catch_up_run_say_so() {
    let mut r = rig().await;
    // A run that was late by seconds: the two occurrences before the one that fires were only
    // passed over, not missed by more than the window.
    let id = r.schedule("every 60s", |_| {});
    r.advance(185);
    assert_eq!(r.tick(), 1);
    let p = r.expect(&["missed", "started", "finished"]).await;
    assert_eq!(p[0]["count"], 2);
    assert_eq!(
        p[0]["reason"],
        "coalesced into the catch-up run at 2026-01-15T10:03:00Z"
    );
    let errors: Vec<Option<String>> = r
        .api
        .sched
        .store
        .occurrences(&id, 10)
        .unwrap()
        .into_iter()
        .map(|o| o.error)
        .collect();
    let coalesced = Some("coalesced into the catch-up run at 2026-01-15T10:03:00Z".to_owned());
    assert_eq!(errors[1..], [coalesced.clone(), coalesced]);
    // Mixed: with a 90 min window, 11:00 (130 min late) was missed, 12:00 (70 min) coalesced.
    let id = r.schedule("0 * * * *", |n| n.catch_up_window_minutes = Some(90));
    r.clock.set("2026-01-15T13:10:00Z".parse().unwrap());
    r.tick();
    let mut missed = None;
    for _ in 0..6 {
        let (kind, p) = r.event().await;
        if kind == "missed" && p["scheduledAt"] == "2026-01-15T12:00:00Z" {
            missed = Some(p);
        }
    }
    let missed = missed.expect("a missed event for the hourly job");
    assert!(
        missed["reason"]
            .as_str()
            .unwrap()
            .starts_with("coalesced into the catch-up run at 2026-01-15T13:00:00Z"),
        "{missed}"
    );
    let rows = r.api.sched.store.occurrences(&id, 10).unwrap();
    let reason_at = |at: &str| {
        rows.iter()
            .find(|o| o.scheduled_ms == ms(at))
            .and_then(|o| o.error.clone())
            .unwrap()
    };
    assert_eq!(
        reason_at("2026-01-15T11:00:00Z"),
        "missed by more than the catch-up window (90 min)"
    );
    assert_eq!(
        reason_at("2026-01-15T12:00:00Z"),
        "coalesced into the catch-up run at 2026-01-15T13:00:00Z"
    );
    // Beyond the window with nothing firing, the reason is unchanged.
    let id = r.schedule("0 * * * *", |n| n.catch_up_window_minutes = Some(10));
    r.clock.set("2026-01-15T14:30:00Z".parse().unwrap());
    r.tick();
    let p = loop {
        let (kind, p) = r.event().await;
        if kind == "missed" && p["scheduledAt"] == "2026-01-15T14:00:00Z" {
            break p;
        }
    };
    assert_eq!(
        p["reason"],
        "missed by more than the catch-up window (10 min)"
    );
    assert!(r.job(&id).next_run_ms.is_some());
}

#[tokio::test]
async fn keep_runs_deletes_older_run_sessions_but_keeps_their_history() {
    let mut r = rig().await;
    std::fs::write(
        r._home.path().join("settings.json"),
        r#"{"scheduler":{"timeZone":"UTC","keepRuns":2}}"#,
    )
    .unwrap();
    let id = r.schedule("every 60s", |_| {});
    for n in 1..=3 {
        r.advance(60);
        assert_eq!(r.tick(), 1);
        r.expect(&["started", "finished"]).await;
        if n == 3 {
            snowpea_testkit::assert_eventually!(
                within = T,
                r.fake.deleted.lock().unwrap().len() == 1
            );
        }
    }
    assert_eq!(*r.fake.deleted.lock().unwrap(), ["s_1"]);
    // A session svc-session reports as still running is skipped and kept; tried again later.
    r.fake.busy.lock().unwrap().push("s_2".into());
    r.advance(60);
    r.tick();
    r.expect(&["started", "finished"]).await;
    let sessions = |r: &Rig| -> Vec<(String, Option<String>)> {
        r.api
            .sched
            .store
            .occurrences(&id, 10)
            .unwrap()
            .into_iter()
            .rev()
            .map(|o| (o.status, o.session_id))
            .collect()
    };
    snowpea_testkit::assert_eventually!(
        within = T,
        r.fake.asked.lock().unwrap().contains(&"s_2".to_string())
    );
    snowpea_testkit::assert_eventually!(within = T, sessions(&r)[0].1.is_none());
    assert_eq!(
        sessions(&r),
        [
            ("finished".to_string(), None),
            ("finished".to_string(), Some("s_2".to_string())),
            ("finished".to_string(), Some("s_3".to_string())),
            ("finished".to_string(), Some("s_4".to_string())),
        ]
    );
    r.fake.busy.lock().unwrap().clear();
    r.advance(60);
    r.tick();
    r.expect(&["started", "finished"]).await;
    snowpea_testkit::assert_eventually!(within = T, r.fake.deleted.lock().unwrap().len() == 3);
    snowpea_testkit::assert_eventually!(within = T, sessions(&r)[2].1.is_none());
    let mut deleted = r.fake.deleted.lock().unwrap().clone();
    deleted.sort();
    assert_eq!(deleted, ["s_1", "s_2", "s_3"]);
    let kept: Vec<Option<String>> = sessions(&r).into_iter().map(|s| s.1).collect();
    assert_eq!(
        kept,
        [None, None, None, Some("s_4".into()), Some("s_5".into())]
    );
    // keepRuns 0 keeps everything.
    std::fs::write(
        r._home.path().join("settings.json"),
        r#"{"scheduler":{"timeZone":"UTC","keepRuns":0}}"#,
    )
    .unwrap();
    for _ in 0..3 {
        r.advance(60);
        r.tick();
        r.expect(&["started", "finished"]).await;
    }
    assert_eq!(r.fake.deleted.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn an_announced_settings_change_is_applied_without_a_restart() {
    let r = rig().await;
    r.api.sched.reload_config();
    let _follow = r.api.sched.follow_settings();
    assert_eq!(r.api.sched.config().time_zone_name, "UTC");
    std::fs::write(
        r._home.path().join("settings.json"),
        r#"{"scheduler":{"timeZone":"Asia/Seoul","keepRuns":7}}"#,
    )
    .unwrap();
    // A change of another section is not the scheduler's; one of `scheduler` re-reads the
    // file.
    r.api
        .sched
        .bus
        .settings_changed(snowpea_proto::rpc::v1::SettingsChange {
            scope: "global".into(),
            keys: vec!["memory".into()],
        });
    r.api
        .sched
        .bus
        .settings_changed(snowpea_proto::rpc::v1::SettingsChange {
            scope: "global".into(),
            keys: vec!["scheduler".into()],
        });
    snowpea_testkit::assert_eventually!(r.api.sched.config().time_zone_name == "Asia/Seoul");
    assert_eq!(r.api.sched.config().keep_runs, 7);
}
