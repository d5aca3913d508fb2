//! One hosted MCP server: a supervisor task owning its connection (issue 6 "Hosting").
//!
//! States `stopped → starting → ready | error`; every change is published through the
//! [`Notifier`] (`mcp.changed`). A failed start or a connection that ends (child exit, crash,
//! transport closed) is `error` with the reason, then restarted with exponential backoff
//! ([`Backoff`]: 500 ms doubling to 30 s, reset after a minute ready). Calls in flight on a
//! connection that ends fail at once (rmcp fails pending requests when the transport closes).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::Tool;
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
}

impl Status {
    fn new(state: State, error: Option<String>) -> Status {
        Status {
            state,
            error,
            tools: Arc::new(Vec::new()),
        }
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
    peer: Mutex<Option<Peer<RoleClient>>>,
    pid: Mutex<Option<u32>>,
    ctl: mpsc::UnboundedSender<Ctl>,
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

impl ServerHandle {
    /// Starts supervising `declared` (a disabled entry stays stopped; an invalid one stays in
    /// error).
    pub fn spawn(declared: Declared, ctx: SpawnContext, notify: Notifier) -> Arc<ServerHandle> {
        let initial = if let Some(why) = &declared.invalid {
            Status::new(State::Error, Some(why.clone()))
        } else if !declared.entry.enabled() {
            Status::new(State::Stopped, None)
        } else {
            Status::new(State::Starting, None)
        };
        let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
        let handle = Arc::new(ServerHandle {
            declared,
            status: watch::channel(initial.clone()).0,
            peer: Mutex::new(None),
            pid: Mutex::new(None),
            ctl: ctl_tx,
        });
        notify(&handle.declared, &initial);
        let runs = initial.state == State::Starting;
        let h = handle.clone();
        tokio::spawn(async move {
            if runs {
                h.supervise(ctx, notify, ctl_rx).await;
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
        self.peer.lock().expect("peer lock").clone()
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
        self.status.send_replace(status.clone());
        notify(&self.declared, &status);
    }

    async fn supervise(
        self: Arc<Self>,
        ctx: SpawnContext,
        notify: Notifier,
        mut ctl: mpsc::UnboundedReceiver<Ctl>,
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
                    *self.peer.lock().expect("peer lock") = Some(conn.peer.clone());
                    *self.pid.lock().expect("pid lock") = conn.pid();
                    self.set(
                        &notify,
                        Status {
                            state: State::Ready,
                            error: None,
                            tools: Arc::new(tools),
                        },
                    );
                    let since = Instant::now();
                    let ended = tokio::select! {
                        why = conn.wait_end() => Err(why),
                        c = ctl.recv() => Ok(c),
                    };
                    *self.peer.lock().expect("peer lock") = None;
                    *self.pid.lock().expect("pid lock") = None;
                    connect::shutdown(conn).await;
                    match ended {
                        Err(why) => {
                            tracing::warn!(server = %name, reason = %why, "MCP server ended; restarting with backoff");
                            if since.elapsed() >= Backoff::HEALTHY {
                                backoff.reset();
                            }
                            self.set(
                                &notify,
                                Status::new(State::Error, Some(format!("server {why}"))),
                            );
                        }
                        Ok(Some(Ctl::Restart)) => {
                            backoff.reset();
                            self.set(&notify, Status::new(State::Stopped, None));
                            continue;
                        }
                        Ok(Some(Ctl::Stop(ack))) => {
                            self.set(&notify, Status::new(State::Stopped, None));
                            let _ = ack.send(());
                            return;
                        }
                        Ok(None) => return,
                    }
                }
                Err(e) => {
                    tracing::warn!(server = %name, error = %e, "MCP server failed to start");
                    self.set(&notify, Status::new(State::Error, Some(e.0)));
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
