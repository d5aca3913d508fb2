//! Benchmark of svc-scheduler (docs/PERFORMANCE.md "svc-scheduler"): the tick's cost and the
//! process's memory with 10,000 scheduled jobs, and the latency from an occurrence's due time
//! to its `job.event started`, on the real clock and a file-backed database.
//!
//! `cargo bench -p snowpea-svc-scheduler --bench tick`

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::Value;
use snowpea_common::bus::{BusHub, BusService};
use snowpea_proto::rpc::v1::service_bus_server::ServiceBus;
use snowpea_proto::rpc::v1::{outbound, SubscribeRequest};
use snowpea_proto::session::v1::{DeleteSessionsReply, RunUnattendedReply, RunUnattendedRequest};
use snowpea_svc_scheduler::clock::RealClock;
use snowpea_svc_scheduler::config::Config;
use snowpea_svc_scheduler::runner::{OnSession, SessionError, SessionRunner};
use snowpea_svc_scheduler::scheduler::Scheduler;
use snowpea_svc_scheduler::spec;
use snowpea_svc_scheduler::store::{JobRow, Store};
use tokio_stream::StreamExt;

const JOBS: usize = 10_000;

/// svc-session that answers at once.
#[derive(Debug)]
struct Instant0;

#[tonic::async_trait]
impl SessionRunner for Instant0 {
    async fn run(
        &self,
        _: RunUnattendedRequest,
        on: OnSession<'_>,
    ) -> Result<RunUnattendedReply, SessionError> {
        on("s_bench");
        Ok(RunUnattendedReply {
            session_id: "s_bench".into(),
            status: "finished".into(),
            text: String::new(),
            error: String::new(),
        })
    }
    async fn watch(&self, sid: &str) -> Result<RunUnattendedReply, SessionError> {
        Ok(RunUnattendedReply {
            session_id: sid.into(),
            status: "finished".into(),
            text: String::new(),
            error: String::new(),
        })
    }
    async fn delete_sessions(&self, _: Vec<String>) -> Result<DeleteSessionsReply, SessionError> {
        Ok(DeleteSessionsReply::default())
    }
    async fn emit_event(
        &self,
        _: &str,
        _: snowpea_svc_scheduler::runner::OriginEvent,
    ) -> Result<(), SessionError> {
        Ok(())
    }
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn job(i: usize, next_ms: i64, now_ms: i64) -> JobRow {
    let (spec, kind, normalized) = match i % 3 {
        0 => ("*/5 * * * *".to_owned(), "cron", "*/5 * * * *".to_owned()),
        1 => (
            format!("every {}s", 3600 + i),
            "interval",
            format!("every {}s", 3600 + i),
        ),
        _ => ("daily at 9:00".to_owned(), "cron", "0 9 * * *".to_owned()),
    };
    JobRow {
        job_id: format!("job_{i:06}"),
        spec,
        kind: kind.into(),
        normalized,
        anchor_ms: now_ms,
        time_zone: "UTC".into(),
        task: format!("task number {i}: summarise the inbox and post it"),
        mode: "accept".into(),
        agent: None,
        channel: None,
        workdir: "/tmp".into(),
        host_tools_from: None,
        host_wait_sec: 300,
        catch_up_window_minutes: 60,
        meta: None,
        owner_client_id: None,
        fingerprint: None,
        origin_session_id: None,
        created_via: "rpc".into(),
        enabled: true,
        cancelled: false,
        running: false,
        next_run_ms: Some(next_ms),
        last_run_ms: None,
        last_status: None,
        created_ms: now_ms,
        updated_ms: now_ms,
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let rss0 = rss_kb();
    let store = Arc::new(Store::open(&dir.path().join("scheduler.db")).unwrap());
    let now_ms = Timestamp::now().as_millisecond();
    let t = Instant::now();
    for i in 0..JOBS {
        // Spread over the next day, none due now.
        store
            .insert_job(&job(i, now_ms + 60_000 + (i as i64 * 8_640), now_ms))
            .unwrap();
    }
    let insert = t.elapsed();
    let hub = BusHub::new();
    let bus = BusService::new(hub.clone());
    let mut events = bus
        .subscribe(tonic::Request::new(SubscribeRequest::default()))
        .await
        .unwrap()
        .into_inner();
    let sched = Scheduler::new(
        store.clone(),
        Arc::new(RealClock),
        Arc::new(Instant0),
        hub,
        Config::default(),
    );

    // Tick cost with nothing due: the due query + the next-due query (what each wake costs).
    let n = 2_000;
    let t = Instant::now();
    for _ in 0..n {
        assert_eq!(sched.process_due().unwrap(), 0);
        std::hint::black_box(store.earliest_due().unwrap());
    }
    let idle_tick_us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    let rss_jobs = rss_kb();

    // Due time → job.event started, with the tick loop running on the real clock.
    let tick = tokio::spawn(snowpea_svc_scheduler::tick::run(
        sched.clone(),
        std::future::pending(),
    ));
    let samples = 200;
    let base = Timestamp::now().as_millisecond() + 500;
    for i in 0..samples {
        let due = base + i as i64 * 15;
        store
            .insert_job(&JobRow {
                job_id: format!("lat_{i:04}"),
                ..job(JOBS + i, due, now_ms)
            })
            .unwrap();
    }
    sched.wake();
    let mut lat = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while lat.len() < samples && Instant::now() < deadline {
        let item = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Some(outbound::Item::Notification(nf)) = item.item else {
            continue;
        };
        let v: Value = serde_json::from_str(&nf.params_json).unwrap();
        if v["kind"] == "started" && v["jobId"].as_str().unwrap().starts_with("lat_") {
            let got = Timestamp::now().as_millisecond() as f64;
            let i: i64 = v["jobId"].as_str().unwrap()[4..].parse().unwrap();
            lat.push(got - (base + i * 15) as f64);
        }
    }
    tick.abort();

    // A burst: 1,000 of the 10,000 jobs due at once, claimed by one tick pass.
    let now = Timestamp::now().as_millisecond();
    {
        let ids: Vec<String> = (0..1000).map(|i| format!("job_{:06}", i * 10)).collect();
        for id in &ids {
            let mut j = store.job(id).unwrap().unwrap();
            j.next_run_ms = Some(now - 1);
            store.update_job(&j).unwrap();
        }
    }
    let t = Instant::now();
    let started = sched.process_due().unwrap();
    let burst = t.elapsed();
    let rss_end = rss_kb();
    let db = std::fs::metadata(dir.path().join("scheduler.db"))
        .map(|m| m.len())
        .unwrap_or(0);

    println!("svc-scheduler bench ({JOBS} jobs, file-backed SQLite WAL)");
    println!(
        "  insert {JOBS} jobs:                {:.1} ms ({:.1} µs/job)",
        insert.as_secs_f64() * 1e3,
        insert.as_secs_f64() * 1e6 / JOBS as f64
    );
    println!("  idle tick (due + next-due query):  {idle_tick_us:.1} µs");
    println!(
        "  burst: {started} due jobs claimed in   {:.1} ms ({:.0} µs/claim)",
        burst.as_secs_f64() * 1e3,
        burst.as_secs_f64() * 1e6 / started.max(1) as f64
    );
    println!(
        "  due → job.event started ({} samples): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        percentile(&mut lat, 0.5),
        percentile(&mut lat, 0.99),
        percentile(&mut lat, 1.0)
    );
    println!(
        "  RSS: start {} KB, with {JOBS} jobs {} KB, after the burst {} KB; database {} KB",
        rss0,
        rss_jobs,
        rss_end,
        db / 1024
    );
    let _ = spec::iso(Timestamp::now());
}
