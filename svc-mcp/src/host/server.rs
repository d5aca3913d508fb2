//! One hosted MCP server: a supervisor task owning its connection (issue 6 "Hosting").
//!
//! States `stopped → starting → ready | error`; every change is published through the
//! [`Notifier`] (`mcp.changed`). A failed start or a connection that ends (child exit, crash,
//! transport closed) is `error` with the reason, then restarted with exponential backoff
//! ([`Backoff`]: 500 ms doubling to 30 s, reset after a minute ready). Calls in flight on a
//! connection that ends fail at once: the status leaves `ready` (callers watch it, see
//! [`ServerHandle::subscribe`]) and rmcp fails pending requests when the transport closes.
//!
//! A server that stops answering while its process lives on (a hang) ends the same way, as
//! `error` with [`Status::not_responding`] set and the text `not responding: …`; its child
//! is SIGKILLed (whole process group, reaped) instead of being asked to stop. A hang is
//! detected two ways ([`Liveness`]):
//! * while no call is in flight, an MCP `ping` every [`Liveness::interval`] must be answered
//!   within [`Liveness::timeout`] (any answer counts, even an error: the server is alive);
//! * a call that reaches its `toolTimeoutSec` makes the caller ping the server
//!   ([`ServerHandle::answers_ping`]); no answer → [`ServerHandle::report_not_responding`].
//!
//! No periodic ping is sent while calls are in flight, so a server that handles requests one
//! at a time is not killed for running a long tool within its `toolTimeoutSec`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{ClientRequest, PingRequest, Tool};
use rmcp::service::{Peer, RoleClient};
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::Declared;
use crate::host::connect::{self, SpawnContext};

/// Where a server got to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not running (disabled, or stopped by a change).
    Stopped,
    /// Connecting: spawn, initialize, tools/list.
    Starting,
    /// Connected; its tools are offered.
    Ready,
    /// Failed; `error` says why. A restart is scheduled unless the entry is invalid.
    Error,
}

impl State {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Stopped => "stopped",
            State::Starting => "starting",
            State::Ready => "ready",
            State::Error => "error",
        }
    }
}

/// The observable status of a server.
#[derive(Debug, Clone)]
pub struct Status {
    /// Current state.
    pub state: State,
    /// Why it is in the error state.
    pub error: Option<String>,
    /// Its tools after the include/exclude filters (empty unless ready).
    pub tools: Arc<Vec<Tool>>,
    /// True in the `error` state when the server was alive but stopped answering (a hang,
    /// see the module doc); false for every other state and error.
    pub not_responding: bool,
}

impl Status {
    fn new(state: State, error: Option<String>) -> Status {
        Status {
            state,
            error,
            tools: Arc::new(Vec::new()),
            not_responding: false,
        }
    }
}

/// How a ready server is checked for hangs (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// Time between two pings of an idle server.
    pub interval: Duration,
    /// How long a ping (periodic, or after a call's `toolTimeoutSec`) may go unanswered
    /// before the server is declared not responding.
    pub timeout: Duration,
}

impl Liveness {
    /// Default [`Liveness::interval`]: 30 s.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
    /// Default [`Liveness::timeout`]: 10 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
    /// Env var overriding [`Liveness::interval`], in milliseconds (tests use short ones).
    pub const INTERVAL_ENV: &'static str = "SNOWPEA_MCP_PING_INTERVAL_MS";
    /// Env var overriding [`Liveness::timeout`], in milliseconds.
    pub const TIMEOUT_ENV: &'static str = "SNOWPEA_MCP_PING_TIMEOUT_MS";

    /// The defaults, overridden by [`Liveness::INTERVAL_ENV`] / [`Liveness::TIMEOUT_ENV`]
    /// when they hold a positive number of milliseconds (anything else is ignored).
    pub fn from_env() -> Liveness {
        let ms = |k: &str| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v > 0)
                .map(Duration::from_millis)
        };
        Liveness {
            interval: ms(Self::INTERVAL_ENV).unwrap_or(Self::DEFAULT_INTERVAL),
            timeout: ms(Self::TIMEOUT_ENV).unwrap_or(Self::DEFAULT_TIMEOUT),
        }
    }
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness {
            interval: Self::DEFAULT_INTERVAL,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

/// The live connection of a ready server: what calls go through.
#[derive(Debug, Clone)]
pub struct Live {
    /// Which connection this is (increases with every successful start); a hang report for
    /// an older connection is ignored.
    pub epoch: u64,
    /// Sends requests.
    pub peer: Peer<RoleClient>,
}

/// Counts a tool call as in flight until dropped (the periodic ping waits for none).
#[derive(Debug)]
pub struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Renders a duration for error texts: whole seconds as `5s`, else milliseconds.
fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Publishes a status change of a server (the host turns it into `mcp.changed`).
pub type Notifier = Arc<dyn Fn(&Declared, &Status) + Send + Sync>;

/// Restart delays: 500 ms doubling to 30 s.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    /// First delay.
    pub const MIN: Duration = Duration::from_millis(500);
    /// Longest delay.
    pub const MAX: Duration = Duration::from_secs(30);
    /// A connection ready this long resets the backoff.
    pub const HEALTHY: Duration = Duration::from_secs(60);

    /// Starts at [`Backoff::MIN`].
    pub fn new() -> Backoff {
        Backoff { next: Self::MIN }
    }
    /// The delay to wait now; doubles the next one.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        d
    }
    /// Back to [`Backoff::MIN`].
    pub fn reset(&mut self) {
        self.next = Self::MIN;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

enum Ctl {
    Restart,
    Stop(oneshot::Sender<()>),
}

/// A hosted server.
pub struct ServerHandle {
    /// How it is declared.
    pub declared: Declared,
    status: watch::Sender<Status>,
    live: Mutex<Option<Live>>,
    pid: Mutex<Option<u32>>,
    ctl: mpsc::UnboundedSender<Ctl>,
    /// Hang reports `(epoch, why)` from callers; kept apart from [`Ctl`] so that a report
    /// arriving while connecting never interrupts the attempt.
    hung: mpsc::UnboundedSender<(u64, String)>,
    epochs: AtomicU64,
    in_flight: AtomicUsize,
    liveness: Liveness,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("name", &self.declared.name)
            .field("scope", &self.declared.scope)
            .field("state", &self.status().state)
            .finish()
    }
}

/// Longest error text of a status (issue 6: a huge entry once broadcast a 100 KB error on
/// every restart), in characters.
pub const ERROR_TEXT_MAX: usize = 1000;

/// An error text about the server at `url` as it is shown and logged: its URL secrets
/// masked ([`crate::redact::scrub`]) and clipped to [`ERROR_TEXT_MAX`].
pub fn tidy_error(text: &str, url: &str) -> String {
    crate::clip::clip_to(&crate::redact::scrub(text, url), ERROR_TEXT_MAX).into_owned()
}

fn tidy(declared: &Declared, mut status: Status) -> Status {
    let url = declared.entry.url.as_deref().unwrap_or("");
    status.error = status.error.map(|e| tidy_error(&e, url));
    status
}

impl ServerHandle {
    /// Starts supervising `declared` (a disabled entry stays stopped; an invalid one, or one
    /// the trust step blocked, stays in error with the reason and is never started).
    pub fn spawn(declared: Declared, ctx: SpawnContext, notify: Notifier) -> Arc<ServerHandle> {
        let initial = if let Some(why) = &declared.invalid {
            Status::new(State::Error, Some(why.clone()))
        } else if !declared.entry.enabled() {
            Status::new(State::Stopped, None)
        } else if let Some(why) = &declared.blocked {
            Status::new(State::Error, Some(why.clone()))
        } else {
            Status::new(State::Starting, None)
        };
        let initial = tidy(&declared, initial);
        let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
        let (hung_tx, hung_rx) = mpsc::unbounded_channel();
        let handle = Arc::new(ServerHandle {
            declared,
            status: watch::channel(initial.clone()).0,
            live: Mutex::new(None),
            pid: Mutex::new(None),
            ctl: ctl_tx,
            hung: hung_tx,
            epochs: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            liveness: ctx.liveness,
        });
        notify(&handle.declared, &initial);
        let runs = initial.state == State::Starting;
        let h = handle.clone();
        tokio::spawn(async move {
            if runs {
                h.supervise(ctx, notify, ctl_rx, hung_rx).await;
            } else {
                idle(ctl_rx).await;
            }
        });
        handle
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// A receiver of status changes.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    /// The connection to call through, when ready.
    pub fn peer(&self) -> Option<Peer<RoleClient>> {
        self.live().map(|l| l.peer)
    }

    /// The connection to call through and its epoch, when ready.
    pub fn live(&self) -> Option<Live> {
        self.live.lock().expect("live lock").clone()
    }

    /// How hangs are detected.
    pub fn liveness(&self) -> Liveness {
        self.liveness
    }

    /// Counts a tool call as in flight until the guard is dropped.
    pub fn begin_call(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(&self.in_flight)
    }

    /// Pings the server through `peer`: `None` when it answered within
    /// [`Liveness::timeout`] (an error answer counts; so does a closed transport, whose end
    /// the supervisor reports itself), else why it is considered hung.
    pub async fn answers_ping(&self, peer: &Peer<RoleClient>) -> Option<String> {
        let ping = peer.send_request(ClientRequest::PingRequest(PingRequest::default()));
        match tokio::time::timeout(self.liveness.timeout, ping).await {
            Ok(_) => None,
            Err(_) => Some(format!(
                "no answer to ping within {}",
                human(self.liveness.timeout)
            )),
        }
    }

    /// Reports that connection `epoch` stopped answering (`why` says how that was seen):
    /// the supervisor marks the server `error` (not responding), fails the calls in flight,
    /// kills its processes and restarts it with backoff. Ignored when `epoch` is no longer
    /// the live connection.
    pub fn report_not_responding(&self, epoch: u64, why: String) {
        let _ = self.hung.send((epoch, why));
    }

    /// Pid of the guard process of a running stdio server.
    pub fn pid(&self) -> Option<u32> {
        *self.pid.lock().expect("pid lock")
    }

    /// Restarts the server now (backoff reset).
    pub fn restart(&self) {
        let _ = self.ctl.send(Ctl::Restart);
    }

    /// Stops the server and waits until its processes are gone.
    pub async fn stop(&self) {
        let (tx, rx) = oneshot::channel();
        if self.ctl.send(Ctl::Stop(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    fn set(&self, notify: &Notifier, status: Status) {
        let status = tidy(&self.declared, status);
        self.status.send_replace(status.clone());
        notify(&self.declared, &status);
    }

    async fn supervise(
        self: Arc<Self>,
        ctx: SpawnContext,
        notify: Notifier,
        mut ctl: mpsc::UnboundedReceiver<Ctl>,
        mut hung: mpsc::UnboundedReceiver<(u64, String)>,
    ) {
        let mut backoff = Backoff::new();
        let name = self.declared.name.clone();
        let mut first = true;
        loop {
            if !first {
                self.set(&notify, Status::new(State::Starting, None));
            }
            first = false;
            let attempt = connect::connect(&self.declared.entry, &ctx);
            let outcome = tokio::select! {
                r = attempt => r,
                c = ctl.recv() => match c {
                    Some(Ctl::Restart) => { backoff.reset(); continue }
                    Some(Ctl::Stop(ack)) => { self.set(&notify, Status::new(State::Stopped, None)); let _ = ack.send(()); return }
                    None => return,
                },
            };
            match outcome {
                Ok(mut conn) => {
                    let tools: Vec<Tool> = conn
                        .tools
                        .iter()
                        .filter(|t| self.declared.entry.tool_allowed(&t.name))
                        .cloned()
                        .collect();
                    tracing::info!(server = %name, tools = tools.len(), pid = ?conn.pid(), "MCP server ready");
                    let epoch = self.epochs.fetch_add(1, Ordering::SeqCst) + 1;
                    let peer = conn.peer.clone();
                    *self.live.lock().expect("live lock") = Some(Live {
                        epoch,
                        peer: peer.clone(),
                    });
                    *self.pid.lock().expect("pid lock") = conn.pid();
                    self.set(
                        &notify,
                        Status {
                            state: State::Ready,
                            error: None,
                            tools: Arc::new(tools),
                            not_responding: false,
                        },
                    );
                    let since = Instant::now();
                    let ended = loop {
                        tokio::select! {
                            why = conn.wait_end() => break Ended::Exited(why),
                            why = self.watch_liveness(&peer) => break Ended::NotResponding(why),
                            Some((e, why)) = hung.recv() => {
                                if e == epoch {
                                    break Ended::NotResponding(why);
                                }
                                // A report about an earlier connection.
                            }
                            c = ctl.recv() => break Ended::Ctl(c),
                        }
                    };
                    *self.live.lock().expect("live lock") = None;
                    *self.pid.lock().expect("pid lock") = None;
                    match ended {
                        Ended::Exited(why) => {
                            let why =
                                tidy_error(&why, self.declared.entry.url.as_deref().unwrap_or(""));
                            tracing::warn!(server = %name, reason = %why, "MCP server ended; restarting with backoff");
                            // Error first: the calls in flight fail at once with the reason.
                            self.set(&notify, Status::new(State::Error, Some(why)));
                            connect::shutdown(conn).await;
                        }
                        Ended::NotResponding(why) => {
                            let why =
                                tidy_error(&why, self.declared.entry.url.as_deref().unwrap_or(""));
                            tracing::warn!(server = %name, reason = %why, "MCP server not responding; killing and restarting it with backoff");
                            self.set(
                                &notify,
                                Status {
                                    not_responding: true,
                                    ..Status::new(
                                        State::Error,
                                        Some(format!(
                                            "not responding: {why}; its processes were killed and it is restarted with backoff"
                                        )),
                                    )
                                },
                            );
                            connect::kill(conn).await;
                        }
                        Ended::Ctl(c) => {
                            connect::shutdown(conn).await;
                            match c {
                                Some(Ctl::Restart) => {
                                    backoff.reset();
                                    self.set(&notify, Status::new(State::Stopped, None));
                                    continue;
                                }
                                Some(Ctl::Stop(ack)) => {
                                    self.set(&notify, Status::new(State::Stopped, None));
                                    let _ = ack.send(());
                                    return;
                                }
                                None => return,
                            }
                        }
                    }
                    if since.elapsed() >= Backoff::HEALTHY {
                        backoff.reset();
                    }
                }
                Err(e) => {
                    let e = tidy_error(&e.0, self.declared.entry.url.as_deref().unwrap_or(""));
                    tracing::warn!(server = %name, error = %e, "MCP server failed to start");
                    self.set(&notify, Status::new(State::Error, Some(e)));
                }
            }
            // Wait out the backoff, still obeying commands.
            tokio::select! {
                _ = tokio::time::sleep(backoff.next_delay()) => {}
                c = ctl.recv() => match c {
                    Some(Ctl::Restart) => backoff.reset(),
                    Some(Ctl::Stop(ack)) => { self.set(&notify, Status::new(State::Stopped, None)); let _ = ack.send(()); return }
                    None => return,
                },
            }
        }
    }
}

impl ServerHandle {
    /// Resolves when the idle server (no call in flight) leaves a ping unanswered, with why.
    async fn watch_liveness(&self, peer: &Peer<RoleClient>) -> String {
        loop {
            tokio::time::sleep(self.liveness.interval).await;
            if self.in_flight.load(Ordering::SeqCst) > 0 {
                continue;
            }
            if let Some(why) = self.answers_ping(peer).await {
                // A call that started during the ping may have kept a one-at-a-time server
                // busy; only an idle server's silence counts.
                if self.in_flight.load(Ordering::SeqCst) == 0 {
                    return why;
                }
            }
        }
    }
}

/// How a ready connection ended.
enum Ended {
    /// The process exited or the transport closed; why.
    Exited(String),
    /// The server stopped answering; why.
    NotResponding(String),
    /// A command (or the handle is gone).
    Ctl(Option<Ctl>),
}

/// A server that does not run answers stop at once.
async fn idle(mut ctl: mpsc::UnboundedReceiver<Ctl>) {
    while let Some(c) = ctl.recv().await {
        if let Ctl::Stop(ack) = c {
            let _ = ack.send(());
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_resets() {
        let mut b = Backoff::new();
        assert_eq!(b.next_delay(), Duration::from_millis(500));
        assert_eq!(b.next_delay(), Duration::from_secs(1));
        for _ in 0..10 {
            b.next_delay();
        }
        assert_eq!(b.next_delay(), Backoff::MAX);
        b.reset();
        assert_eq!(b.next_delay(), Backoff::MIN);
    }
}
