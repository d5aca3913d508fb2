//! Harness: starts `snowpea-svc-scheduler` on a temp home with the manual clock, serves a fake
//! svc-session on `run/session.sock`, hands back generated tonic clients; kills everything on
//! drop. Every await on another process has a timeout.

mod crash;
mod service;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use snowpea_common::client::unix_channel;
use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;
use snowpea_proto::rpc::v1::{outbound, SubscribeRequest};
use snowpea_proto::scheduler::v1::job_service_client::JobServiceClient;
use snowpea_proto::scheduler::v1::scheduler_internal_service_client::SchedulerInternalServiceClient;
use snowpea_proto::scheduler::v1::SetClockRequest;
use snowpea_proto::session::v1::session_internal_service_server::{
    SessionInternalService, SessionInternalServiceServer,
};
use snowpea_proto::session::v1::*;
use snowpea_testkit::{CheckedTask, ServiceProcess};
use tokio_stream::StreamExt;
use tonic::transport::Channel;

/// Timeout of every await on another process.
pub const T: Duration = Duration::from_secs(15);

/// Start time of the manual clock.
pub const T0: &str = "2026-01-15T10:00:00Z";

/// What the fake svc-session saw: (job id, scheduled at, trigger) per run.
pub type Runs = Arc<Mutex<Vec<(String, String, String)>>>;

/// A fake `SessionInternalService`.
#[derive(Debug, Clone)]
pub struct FakeSession {
    /// Every RunUnattended call.
    pub runs: Runs,
    /// Hold new runs open (no `done`) until [`FakeSession::release`] or [`FakeSession::dead`].
    pub hold: Arc<std::sync::atomic::AtomicBool>,
    /// Events emitted on origin sessions: (session, kind).
    pub events: Arc<Mutex<Vec<(String, String)>>>,
    /// Set to true to "kill" svc-session: held runs' streams fail as a dropped connection does.
    pub dead: Arc<tokio::sync::watch::Sender<bool>>,
    /// Set to true to let every held run finish (its turn "ends" in svc-session).
    pub release: Arc<tokio::sync::watch::Sender<bool>>,
    /// The sessions runs opened: id → (held, task).
    pub sessions: Arc<Mutex<std::collections::HashMap<String, (bool, String)>>>,
    /// Every WatchRun call's session.
    pub watches: Arc<Mutex<Vec<String>>>,
    /// Every session DeleteSessions deleted.
    pub deleted: Arc<Mutex<Vec<String>>>,
}

impl Default for FakeSession {
    fn default() -> Self {
        FakeSession {
            runs: Runs::default(),
            hold: Arc::default(),
            events: Arc::default(),
            dead: Arc::new(tokio::sync::watch::channel(false).0),
            release: Arc::new(tokio::sync::watch::channel(false).0),
            sessions: Arc::default(),
            watches: Arc::default(),
            deleted: Arc::default(),
        }
    }
}

impl FakeSession {
    /// The stream of a run in session `sid`: its id at once, then `done` — at once, or for a
    /// held run when released (an error when svc-session "dies" first).
    fn stream(
        &self,
        sid: &str,
        task: &str,
        held: bool,
    ) -> tonic::codegen::BoxStream<RunUnattendedUpdate> {
        let first = RunUnattendedUpdate {
            session_id: sid.into(),
            done: None,
        };
        let done = RunUnattendedUpdate {
            session_id: sid.into(),
            done: Some(RunUnattendedReply {
                session_id: sid.into(),
                status: "finished".into(),
                text: format!("ran {task}"),
                error: String::new(),
            }),
        };
        async_stream(
            first,
            done,
            held,
            self.dead.subscribe(),
            self.release.subscribe(),
        )
    }
}

#[tonic::async_trait]
impl SessionInternalService for FakeSession {
    async fn run_unattended(
        &self,
        req: tonic::Request<RunUnattendedRequest>,
    ) -> Result<tonic::Response<tonic::codegen::BoxStream<RunUnattendedUpdate>>, tonic::Status>
    {
        let r = req.into_inner();
        let job = r.job.unwrap_or_default();
        let n = {
            let mut runs = self.runs.lock().unwrap();
            runs.push((r.job_id.clone(), job.scheduled_at, job.trigger));
            runs.len()
        };
        let sid = format!("s_fake_{n}");
        let hold = self.hold.load(std::sync::atomic::Ordering::SeqCst);
        self.sessions
            .lock()
            .unwrap()
            .insert(sid.clone(), (hold, r.task.clone()));
        Ok(tonic::Response::new(self.stream(&sid, &r.task, hold)))
    }

    async fn watch_run(
        &self,
        req: tonic::Request<WatchRunRequest>,
    ) -> Result<tonic::Response<tonic::codegen::BoxStream<RunUnattendedUpdate>>, tonic::Status>
    {
        let sid = req.into_inner().session_id;
        self.watches.lock().unwrap().push(sid.clone());
        let Some((held, task)) = self.sessions.lock().unwrap().get(&sid).cloned() else {
            return Err(tonic::Status::not_found(format!("no session {sid:?}")));
        };
        Ok(tonic::Response::new(self.stream(&sid, &task, held)))
    }

    async fn delete_sessions(
        &self,
        req: tonic::Request<DeleteSessionsRequest>,
    ) -> Result<tonic::Response<DeleteSessionsReply>, tonic::Status> {
        let ids = req.into_inner().session_ids;
        let n = ids.len() as i64;
        self.deleted.lock().unwrap().extend(ids);
        Ok(tonic::Response::new(DeleteSessionsReply {
            deleted: n,
            skipped: vec![],
        }))
    }

    async fn emit_event(
        &self,
        req: tonic::Request<EmitEventRequest>,
    ) -> Result<tonic::Response<EmitEventReply>, tonic::Status> {
        let r = req.into_inner();
        let kind = snowpea_svc_scheduler::runner::origin_event_json(&r.event.expect("an event"))
            .0
            .to_owned();
        self.events.lock().unwrap().push((r.session_id, kind));
        Ok(tonic::Response::new(EmitEventReply { seq: 1 }))
    }
}

fn async_stream(
    first: RunUnattendedUpdate,
    done: RunUnattendedUpdate,
    held: bool,
    mut dead: tokio::sync::watch::Receiver<bool>,
    mut release: tokio::sync::watch::Receiver<bool>,
) -> tonic::codegen::BoxStream<RunUnattendedUpdate> {
    // A held run keeps its stream open until it is released (then `done`) or svc-session
    // "dies" (then it fails like a reset connection); a finished one ends after `done`.
    let head = tokio_stream::iter(std::iter::once(Ok(first)));
    if held {
        let tail = futures::stream::once(async move {
            tokio::select! {
                _ = dead.wait_for(|d| *d) => Err(tonic::Status::unavailable("connection reset by peer")),
                _ = release.wait_for(|r| *r) => Ok(done),
            }
        });
        Box::pin(head.chain(tail))
    } else {
        Box::pin(head.chain(tokio_stream::iter(std::iter::once(Ok(done)))))
    }
}

/// A fake svc-session serving on a socket until dropped or [`SessionServer::kill`]ed.
pub struct SessionServer {
    task: CheckedTask<()>,
}

impl SessionServer {
    /// Serves `fake` on `socket`.
    pub fn start(fake: FakeSession, socket: PathBuf) -> SessionServer {
        let _ = std::fs::remove_file(&socket);
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let task = CheckedTask::spawn("fake svc-session", async move {
            // With grpc.health.v1 like the real svc-session: runs wait for SERVING.
            let routes = snowpea_common::service::with_health_and_reflection(
                tonic::service::Routes::new(SessionInternalServiceServer::new(fake)),
                &["snowpea.session.v1.SessionInternalService"],
            )
            .await
            .unwrap();
            let _ = tonic::transport::Server::builder()
                .add_routes(routes)
                .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
                .await;
        });
        SessionServer { task }
    }

    /// Stops serving at once and fails the open run streams (svc-session "killed").
    pub fn kill(self, fake: &FakeSession) {
        fake.dead.send_replace(true);
        // Dropping the running task aborts it (a panic it already had fails the test).
        drop(self.task);
    }
}

/// One scheduler process on a temp home.
pub struct Scheduler {
    process: ServiceProcess,
    /// `job.*`.
    pub jobs: JobServiceClient<Channel>,
    /// Internal rpcs (clock, tools).
    pub internal: SchedulerInternalServiceClient<Channel>,
    events: Option<tonic::Streaming<snowpea_proto::rpc::v1::Outbound>>,
}

impl Scheduler {
    /// A fresh home with `scheduler.timeZone` UTC.
    pub fn home() -> Arc<tempfile::TempDir> {
        Self::home_with(r#"{"scheduler":{"timeZone":"UTC"}}"#)
    }

    /// A fresh home whose `settings.json` is `settings`.
    pub fn home_with(settings: &str) -> Arc<tempfile::TempDir> {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("settings.json"), settings).unwrap();
        std::fs::create_dir_all(home.path().join("run")).unwrap();
        Arc::new(home)
    }

    /// The scheduler's log so far (stderr of every start on `home`).
    pub fn log(home: &tempfile::TempDir) -> String {
        Self::log_of(home)
    }

    /// The socket path of a service in `home`.
    pub fn socket(home: &tempfile::TempDir, name: &str) -> PathBuf {
        home.path().join("run").join(format!("{name}.sock"))
    }

    /// Starts the binary on `home` with the manual clock at `clock` and waits for SERVING.
    pub async fn start(home: Arc<tempfile::TempDir>, clock: &str) -> Scheduler {
        let process = ServiceProcess::new(
            "scheduler",
            env!("CARGO_BIN_EXE_snowpea-svc-scheduler"),
            home.path(),
        )
        .env("SNOWPEA_SCHEDULER_CLOCK", format!("manual:{clock}"))
        .start()
        .await;
        let socket = process.socket().to_owned();
        let channel = unix_channel(&socket);
        let mut bus = ServiceBusClient::new(channel.clone());
        let events = tokio::time::timeout(
            T,
            bus.subscribe(SubscribeRequest {
                gateway_id: "test".into(),
            }),
        )
        .await
        .unwrap()
        .unwrap()
        .into_inner();
        Scheduler {
            process,
            jobs: JobServiceClient::new(channel.clone()),
            internal: SchedulerInternalServiceClient::new(channel),
            events: Some(events),
        }
    }

    fn log_of(home: &tempfile::TempDir) -> String {
        std::fs::read_to_string(home.path().join("scheduler.log")).unwrap_or_default()
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        self.process.kill9();
    }

    /// Moves the manual clock forward.
    pub async fn advance(&mut self, secs: i64) -> String {
        let r = tokio::time::timeout(
            T,
            self.internal.set_clock(SetClockRequest {
                advance_ms: secs * 1000,
                set_to: None,
            }),
        )
        .await
        .unwrap()
        .unwrap();
        r.into_inner().now
    }

    /// The next `job.event` (kind, payload).
    pub async fn event(&mut self) -> (String, Value) {
        let events = self.events.as_mut().unwrap();
        loop {
            let item = tokio::time::timeout(T, events.next())
                .await
                .expect("a job.event in time")
                .unwrap()
                .unwrap();
            if let Some(outbound::Item::Notification(n)) = item.item {
                assert_eq!(n.method, "job.event");
                let v: Value = serde_json::from_str(&n.params_json).unwrap();
                return (v["kind"].as_str().unwrap().to_owned(), v["payload"].clone());
            }
        }
    }

    /// Asserts the next events are of `kinds`, returns their payloads.
    pub async fn expect(&mut self, kinds: &[&str]) -> Vec<Value> {
        let mut out = vec![];
        for k in kinds {
            let (kind, p) = self.event().await;
            assert_eq!(&kind, k, "payload {p}");
            out.push(p);
        }
        out
    }

    /// Opens the scheduler's database read-only (for what no rpc shows: every occurrence row).
    pub fn occurrences(home: &tempfile::TempDir) -> Vec<(String, i64, String)> {
        let c = rusqlite::Connection::open_with_flags(
            home.path().join("state/scheduler.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let mut st = c.prepare("SELECT job_id, scheduled_ms, status FROM occurrences ORDER BY job_id, scheduled_ms").unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}
