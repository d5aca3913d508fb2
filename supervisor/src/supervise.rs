//! The supervisor's event loop (DESIGN.md §5).
//!
//! It owns every child and wakes only on events — a child exited, a readiness check
//! finished, a backoff or grace timer fired, a control call or SIGTERM/SIGINT arrived —
//! never on a polling timer. Each event goes through the process's
//! [`RestartPolicy`](crate::policy::RestartPolicy), whose [`Action`] is then carried out
//! here. Stale events of an earlier instance are recognised by a per-process generation.
//!
//! Start: the control socket is bound first (under an exclusive lock on
//! `run/supervisor.lock`, so two supervisors never share a home), then the gateway's TCP
//! listener, which the supervisor keeps for its whole life and hands to every gateway
//! instance as fd 3 (a gateway restart keeps the port, with no window in which
//! connections are refused). The services and the gateway start together (issue 14: the
//! gateway answers `system.hello`, `system.health` and `GET /health` at once, and a call
//! to a service still starting waits for it, as during a restart); once every process is
//! ready `daemon.json` is written. A failure during start stops everything and exits 1.
//!
//! Threading: this runs on a current-thread runtime and spawns children from the main
//! thread only, because `PR_SET_PDEATHSIG` is tied to the spawning thread (see
//! [`crate::spawn`]).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::Signal;
use snowpea_common::home::{DaemonJson, Home};
use snowpea_proto::supervisor::v1::{ProcessStatus, StatusReply};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::control::ControlRequest;
use crate::policy::{Action, Event, PolicyConfig, ProcState, RestartPolicy};
use crate::services::{ProcessKind, ServiceSpec};
use crate::spawn::{describe_exit, signal_group, SpawnSpec};

/// Default grace between SIGTERM and SIGKILL on stop.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);
/// Environment variable overriding the grace period in milliseconds (tests).
pub const GRACE_ENV: &str = "SNOWPEA_STOP_GRACE_MS";
/// How long a process may take to become ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// After SIGKILL, how long to wait for the exits before giving up.
const KILL_WAIT: Duration = Duration::from_secs(3);
/// Lines of a failed child's log echoed into the supervisor log.
const TAIL_LINES: usize = 30;

/// Options of a foreground supervisor.
#[derive(Debug, Clone)]
pub struct Options {
    /// The home (already resolved).
    pub home: Home,
    /// Gateway port; `None` picks a free one.
    pub port: Option<u16>,
    /// Grace between SIGTERM and SIGKILL on stop.
    pub grace: Duration,
}

impl Options {
    /// Options for `home` and `port` with the grace from [`GRACE_ENV`] or the default.
    pub fn new(home: Home, port: Option<u16>) -> Self {
        let grace = std::env::var(GRACE_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_GRACE);
        Options { home, port, grace }
    }
}

/// Why the supervisor did not run.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Another supervisor holds `run/supervisor.lock` for this home.
    #[error("another supervisor owns {0}")]
    AlreadyRunning(PathBuf),
    /// Setting up the home, the control socket or the listener failed.
    #[error(transparent)]
    Setup(#[from] anyhow::Error),
}

/// Runs the supervisor in this process until it is stopped. Returns the exit code: 0
/// after a stop, 1 when the suite failed to start.
pub async fn run(opts: Options) -> Result<i32, StartError> {
    let home = opts.home.clone();
    home.ensure_dirs()?;
    let token = home.ensure_token()?;

    let lock_path = home.run_dir().join("supervisor.lock");
    let lock_file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .with_context(|| format!("open {}", lock_path.display()))?;
    let _lock = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock)
        .map_err(|_| StartError::AlreadyRunning(lock_path.clone()))?;

    // Holding the lock, anything left in run/ or daemon.json is stale.
    let control_path = home.supervisor_socket();
    let _ = std::fs::remove_file(&control_path);
    let _ = std::fs::remove_file(home.daemon_json_path());
    // The model settings this suite runs with (read by its services at their start), for a
    // later `start`/`run`/`chat` of a caller with other ones (issue 39 item 1). Written
    // before daemon.json, so whoever sees the suite ready finds it.
    if let Err(e) =
        crate::model_env::ModelEnv::capture(&|k| std::env::var(k).ok(), &token).write(&home)
    {
        tracing::warn!(error = %format!("{e:#}"), "run/model-env.json not written");
    }
    let control_listener = crate::control::bind(&control_path)?;

    let listener = TcpListener::bind(("127.0.0.1", opts.port.unwrap_or(0)))
        .with_context(|| format!("bind 127.0.0.1:{}", opts.port.unwrap_or(0)))?;
    let port = listener.local_addr().context("listener address")?.port();
    tracing::info!(
        version = snowpea_common::VERSION,
        pid = std::process::id(),
        home = %home.root().display(),
        control = %control_path.display(),
        port,
        "supervisor starting"
    );

    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let (server_stop_tx, server_stop_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(crate::control::serve(
        control_listener,
        control_tx,
        async move {
            let _ = server_stop_rx.await;
        },
    ));

    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let mut sup = Supervisor {
        procs: crate::services::all()
            .into_iter()
            .map(|(spec, kind)| Proc::new(spec, kind, &home))
            .collect(),
        home: home.clone(),
        listener,
        port,
        token,
        started_at: snowpea_common::time::now_iso(),
        grace: opts.grace,
        phase: Phase::Startup,
        restart_all: None,
        events_tx,
    };
    let code = sup.event_loop(events_rx, control_rx).await;

    let _ = server_stop_tx.send(());
    match tokio::time::timeout(Duration::from_secs(2), server).await {
        Ok(Ok(Err(e))) => tracing::warn!(error = %format!("{e:#}"), "control server"),
        Err(_) => tracing::warn!("control server did not drain in time"),
        _ => {}
    }
    let _ = std::fs::remove_file(&control_path);
    tracing::info!(code, "supervisor exiting");
    Ok(code)
}

/// Where the suite is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Starting processes in order; any failure aborts.
    Startup,
    /// Everything started; crashes are restarted per policy.
    Running,
    /// Stopping everything; exit with this code when all are gone.
    Stopping { code: i32, killed: bool },
}

/// Events from the tasks around the children.
#[derive(Debug)]
enum Msg {
    Exited {
        idx: usize,
        gen: u64,
        status: String,
    },
    Ready {
        idx: usize,
        gen: u64,
    },
    ReadyTimeout {
        idx: usize,
        gen: u64,
    },
    BackoffElapsed {
        idx: usize,
        gen: u64,
    },
    GraceElapsed,
    KillWaitElapsed,
}

/// One supervised process.
struct Proc {
    spec: ServiceSpec,
    kind: ProcessKind,
    socket: PathBuf,
    log: PathBuf,
    policy: RestartPolicy,
    /// Generation of the current (or last) instance.
    gen: u64,
    /// Pid (= process group id) of the live instance.
    pid: Option<u32>,
    started: Option<Instant>,
    last_exit: Option<String>,
    /// Readiness check or backoff timer of the current instance.
    pending: Option<AbortHandle>,
}

impl Proc {
    fn new(spec: ServiceSpec, kind: ProcessKind, home: &Home) -> Self {
        Proc {
            spec,
            kind,
            socket: home.socket(spec.name),
            log: home.log_file(spec.name),
            policy: RestartPolicy::new(PolicyConfig::default()),
            gen: 0,
            pid: None,
            started: None,
            last_exit: None,
            pending: None,
        }
    }

    fn cancel_pending(&mut self) {
        if let Some(h) = self.pending.take() {
            h.abort();
        }
    }
}

struct Supervisor {
    home: Home,
    procs: Vec<Proc>,
    /// The gateway's listener, kept open for the supervisor's whole life.
    listener: TcpListener,
    port: u16,
    token: String,
    started_at: String,
    grace: Duration,
    phase: Phase,
    /// `Restart{name:"all"}` in progress: the process being restarted and those after it.
    restart_all: Option<(usize, VecDeque<usize>)>,
    events_tx: mpsc::UnboundedSender<Msg>,
}

impl Supervisor {
    async fn event_loop(
        &mut self,
        mut events: mpsc::UnboundedReceiver<Msg>,
        mut control: mpsc::UnboundedReceiver<ControlRequest>,
    ) -> i32 {
        let mut sigterm = signal(SignalKind::terminate()).expect("install SIGTERM handler");
        let mut sigint = signal(SignalKind::interrupt()).expect("install SIGINT handler");
        // Every process starts at once: none needs another to come up (services reconnect
        // lazily; the gateway's calls to a service still starting wait for it within
        // `unavailable_wait`, as during a restart), so early clients are served by the
        // gateway while the services start instead of queueing in the listener's backlog.
        for idx in 0..self.procs.len() {
            self.apply(idx, Event::Start);
        }
        loop {
            if let Phase::Stopping { code, .. } = self.phase {
                if self.procs.iter().all(|p| p.pid.is_none()) {
                    self.cleanup();
                    return code;
                }
            }
            tokio::select! {
                Some(msg) = events.recv() => self.on_event(msg),
                Some(req) = control.recv() => self.on_control(req),
                _ = sigterm.recv() => self.begin_stop("SIGTERM", 0),
                _ = sigint.recv() => self.begin_stop("SIGINT", 0),
            }
        }
    }

    fn on_event(&mut self, msg: Msg) {
        match msg {
            Msg::Exited { idx, gen, status } => {
                let p = &mut self.procs[idx];
                if p.gen != gen {
                    return;
                }
                let expected = p.policy.state() == ProcState::Stopping;
                let pgid = p.pid.take();
                p.started = None;
                p.cancel_pending();
                p.last_exit = Some(status.clone());
                // Reap whatever the instance left in its process group.
                if let Some(pgid) = pgid {
                    signal_group(pgid, Signal::SIGKILL);
                }
                if expected {
                    tracing::info!(process = p.spec.name, pid = pgid, %status, "process exited");
                } else {
                    tracing::warn!(process = p.spec.name, pid = pgid, %status, "process exited unexpectedly");
                }
                if self.phase == Phase::Startup {
                    self.startup_failed(idx, &format!("exited during start ({status})"));
                    return;
                }
                self.apply(idx, Event::Exited);
            }
            Msg::Ready { idx, gen } => {
                let p = &mut self.procs[idx];
                if p.gen != gen || p.pid.is_none() {
                    return;
                }
                p.pending = None;
                tracing::info!(process = p.spec.name, pid = p.pid, "process ready");
                self.apply(idx, Event::Ready);
                if self.phase == Phase::Startup {
                    self.startup_progress(idx);
                }
            }
            Msg::ReadyTimeout { idx, gen } => {
                let p = &mut self.procs[idx];
                if p.gen != gen || p.pid.is_none() {
                    return;
                }
                p.pending = None;
                tracing::warn!(process = p.spec.name, timeout = ?READY_TIMEOUT, "process did not become ready");
                if self.phase == Phase::Startup {
                    self.apply(idx, Event::ReadyTimeout);
                    self.startup_failed(idx, "did not become ready in time");
                    return;
                }
                self.apply(idx, Event::ReadyTimeout);
            }
            Msg::BackoffElapsed { idx, gen } => {
                let p = &mut self.procs[idx];
                if p.gen != gen {
                    return;
                }
                p.pending = None;
                self.apply(idx, Event::BackoffElapsed);
            }
            Msg::GraceElapsed => {
                if let Phase::Stopping {
                    code,
                    killed: false,
                } = self.phase
                {
                    self.phase = Phase::Stopping { code, killed: true };
                    for p in self.procs.iter().rev() {
                        if let Some(pid) = p.pid {
                            tracing::warn!(
                                process = p.spec.name,
                                pid,
                                "grace period over, SIGKILL"
                            );
                            signal_group(pid, Signal::SIGKILL);
                        }
                    }
                    self.after(KILL_WAIT, Msg::KillWaitElapsed);
                }
            }
            Msg::KillWaitElapsed => {
                for p in &mut self.procs {
                    if let Some(pid) = p.pid.take() {
                        tracing::error!(
                            process = p.spec.name,
                            pid,
                            "process did not exit after SIGKILL"
                        );
                    }
                }
            }
        }
        self.advance_restart_all();
    }

    fn on_control(&mut self, req: ControlRequest) {
        match req {
            ControlRequest::Status { reply } => {
                let _ = reply.send(self.status());
            }
            ControlRequest::Restart { name, reply } => {
                let _ = reply.send(self.manual_restart(&name));
            }
            ControlRequest::Stop { reason, reply } => {
                let _ = reply.send(());
                let reason = if reason.is_empty() {
                    "control request".to_owned()
                } else {
                    reason
                };
                self.begin_stop(&reason, 0);
            }
        }
    }

    fn manual_restart(&mut self, name: &str) -> Result<(), tonic::Status> {
        if self.phase != Phase::Running {
            return Err(tonic::Status::failed_precondition(
                "the suite is starting or stopping",
            ));
        }
        if name == "all" {
            tracing::info!("restart of every process requested");
            let mut order: VecDeque<usize> = (0..self.procs.len()).collect();
            let first = order.pop_front().expect("at least the gateway");
            self.restart_all = Some((first, order));
            self.apply(first, Event::ManualRestart);
            return Ok(());
        }
        let idx = self
            .procs
            .iter()
            .position(|p| p.spec.name == name)
            .ok_or_else(|| tonic::Status::not_found(format!("no process named {name:?}")))?;
        tracing::info!(process = name, "restart requested");
        self.apply(idx, Event::ManualRestart);
        Ok(())
    }

    /// Moves a restart of `all` on once the current process is settled.
    fn advance_restart_all(&mut self) {
        while let Some((current, rest)) = &mut self.restart_all {
            if matches!(
                self.procs[*current].policy.state(),
                ProcState::Starting | ProcState::Stopping
            ) {
                return;
            }
            match rest.pop_front() {
                Some(next) => {
                    *current = next;
                    self.apply(next, Event::ManualRestart);
                }
                None => self.restart_all = None,
            }
        }
    }

    /// Feeds `event` to the policy of process `idx` and carries out the action.
    fn apply(&mut self, idx: usize, event: Event) {
        let action = self.procs[idx].policy.handle(event, Instant::now());
        let Some(action) = action else { return };
        let p = &mut self.procs[idx];
        match action {
            Action::Spawn => self.spawn(idx),
            Action::Terminate => {
                if let Some(pid) = p.pid {
                    tracing::info!(process = p.spec.name, pid, "SIGTERM");
                    signal_group(pid, Signal::SIGTERM);
                }
            }
            Action::Kill => {
                if let Some(pid) = p.pid {
                    tracing::warn!(process = p.spec.name, pid, "SIGKILL");
                    signal_group(pid, Signal::SIGKILL);
                }
            }
            Action::ScheduleRestart(delay) => {
                tracing::info!(
                    process = p.spec.name,
                    ?delay,
                    attempt = p.policy.restarts() + 1,
                    "restart scheduled"
                );
                let gen = p.gen;
                let h = self.after(delay, Msg::BackoffElapsed { idx, gen });
                self.procs[idx].pending = Some(h);
            }
            Action::GiveUp => {
                tracing::error!(
                    process = p.spec.name,
                    restarts = p.policy.restarts(),
                    "restarted too often; marked failed (the rest of the suite keeps running)"
                );
            }
        }
    }

    /// Spawns a new instance of process `idx` and watches its exit and readiness.
    fn spawn(&mut self, idx: usize) {
        let home = self.home.clone();
        let port = self.port;
        let listen_fd = self.listener.as_raw_fd();
        let p = &mut self.procs[idx];
        p.gen += 1;
        p.cancel_pending();
        let gen = p.gen;
        let tx = self.events_tx.clone();

        let spec = spawn_spec(p, &home, listen_fd);
        let result = spec.and_then(|spec| crate::spawn::spawn(&spec, &home).map(|c| (spec, c)));
        let (spec, mut child) = match result {
            Ok(ok) => ok,
            Err(e) => {
                let status = format!("spawn failed: {e:#}");
                tracing::error!(process = p.spec.name, error = %status, "spawn failed");
                let _ = tx.send(Msg::Exited { idx, gen, status });
                return;
            }
        };
        let pid = child.id().unwrap_or_default();
        tracing::info!(process = p.spec.name, pid, program = %spec.program.display(), args = ?spec.args, "spawned");
        p.pid = Some(pid);
        p.started = Some(Instant::now());

        let exit_tx = tx.clone();
        tokio::spawn(async move {
            let status = match child.wait().await {
                Ok(s) => describe_exit(&s),
                Err(e) => format!("wait failed: {e}"),
            };
            let _ = exit_tx.send(Msg::Exited { idx, gen, status });
        });

        let kind = p.kind;
        let socket = p.socket.clone();
        let ready = tokio::spawn(async move {
            let ok = match kind {
                ProcessKind::Service => {
                    crate::ready::wait_until(READY_TIMEOUT, || {
                        crate::ready::service_serving(&socket)
                    })
                    .await
                }
                ProcessKind::Gateway => {
                    crate::ready::wait_until(READY_TIMEOUT, || crate::ready::gateway_healthy(port))
                        .await
                }
            };
            let msg = if ok {
                Msg::Ready { idx, gen }
            } else {
                Msg::ReadyTimeout { idx, gen }
            };
            let _ = tx.send(msg);
        });
        p.pending = Some(ready.abort_handle());
    }

    /// Sends `msg` to the loop after `delay`.
    fn after(&self, delay: Duration, msg: Msg) -> AbortHandle {
        let tx = self.events_tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = tx.send(msg);
        })
        .abort_handle()
    }

    /// During start-up, after process `idx` became ready: the suite is up once every
    /// process (the services and the gateway) is.
    fn startup_progress(&mut self, _idx: usize) {
        let all_up = self
            .procs
            .iter()
            .all(|p| p.policy.state() == ProcState::Running);
        if all_up {
            self.startup_done();
        }
    }

    fn startup_done(&mut self) {
        let daemon = DaemonJson {
            port: self.port,
            pid: std::process::id(),
            token: self.token.clone(),
            started_at: self.started_at.clone(),
            protocol_version: snowpea_proto::PROTOCOL_VERSION.to_owned(),
        };
        if let Err(e) = self.home.write_daemon_json(&daemon) {
            tracing::error!(error = %format!("{e:#}"), "cannot write daemon.json");
            self.begin_stop("daemon.json not written", 1);
            return;
        }
        self.phase = Phase::Running;
        tracing::info!(
            port = self.port,
            url = %format!("ws://127.0.0.1:{}/ws", self.port),
            "suite ready"
        );
    }

    fn startup_failed(&mut self, idx: usize, why: &str) {
        let p = &self.procs[idx];
        let tail = crate::cli::logs::tail(&p.log, TAIL_LINES).unwrap_or_default();
        tracing::error!(
            process = p.spec.name,
            "start failed: {why}; last lines of {}:\n{}",
            p.log.display(),
            tail.join("\n")
        );
        self.begin_stop("start failed", 1);
    }

    fn begin_stop(&mut self, reason: &str, code: i32) {
        if matches!(self.phase, Phase::Stopping { .. }) {
            tracing::info!(reason, "already stopping");
            return;
        }
        tracing::info!(reason, "stopping the suite");
        self.phase = Phase::Stopping {
            code,
            killed: false,
        };
        self.restart_all = None;
        for idx in (0..self.procs.len()).rev() {
            self.procs[idx].cancel_pending();
            self.apply(idx, Event::Stop);
        }
        self.after(self.grace, Msg::GraceElapsed);
    }

    /// Removes what a stopped suite must not leave behind: daemon.json and sockets.
    fn cleanup(&mut self) {
        if self
            .home
            .read_daemon_json()
            .is_ok_and(|d| d.pid == std::process::id())
        {
            let _ = std::fs::remove_file(self.home.daemon_json_path());
        }
        for p in &self.procs {
            if p.kind == ProcessKind::Service {
                let _ = std::fs::remove_file(&p.socket);
            }
        }
    }

    fn status(&self) -> StatusReply {
        let now = Instant::now();
        StatusReply {
            pid: i64::from(std::process::id()),
            home: self.home.root().display().to_string(),
            started_at: self.started_at.clone(),
            port: i64::from(self.port),
            processes: self
                .procs
                .iter()
                .map(|p| ProcessStatus {
                    name: p.spec.name.to_owned(),
                    pid: p.pid.map(i64::from).unwrap_or(0),
                    state: p.policy.state().as_str().to_owned(),
                    restarts: p.policy.restarts() as i64,
                    uptime_sec: p
                        .started
                        .filter(|_| p.pid.is_some())
                        .map(|s| s.elapsed().as_secs_f64())
                        .unwrap_or(0.0),
                    socket: match p.kind {
                        ProcessKind::Service => p.socket.display().to_string(),
                        ProcessKind::Gateway => String::new(),
                    },
                    log: p.log.display().to_string(),
                    last_exit: p.last_exit.clone(),
                    backoff_ms: i64::try_from(p.policy.current_backoff().as_millis())
                        .unwrap_or(i64::MAX),
                    restarts_in_window: p.policy.restarts_in_window(now) as i64,
                    max_restarts_in_window: p.policy.max_restarts() as i64,
                })
                .collect(),
        }
    }
}

/// The exact command line of one process:
/// services `snowpea-svc-<name> --home DIR --socket DIR/run/<name>.sock`, the gateway
/// `snowpea-gateway --home DIR --listen-fd 3 --services session,... --services-starting`.
fn spawn_spec(p: &Proc, home: &Home, listen_fd: i32) -> anyhow::Result<SpawnSpec> {
    let program = crate::bins::binary(p.spec.binary)?;
    let mut args: Vec<OsString> = vec!["--home".into(), home.root().into()];
    let listen_fd = match p.kind {
        ProcessKind::Service => {
            args.extend(["--socket".into(), p.socket.clone().into()]);
            None
        }
        ProcessKind::Gateway => {
            args.extend([
                "--listen-fd".into(),
                crate::spawn::LISTEN_FD.to_string().into(),
                "--services".into(),
                crate::services::service_names().into(),
                "--services-starting".into(),
            ]);
            Some(listen_fd)
        }
    };
    Ok(SpawnSpec {
        name: p.spec.name.to_owned(),
        program,
        args,
        listen_fd,
    })
}
