//! The restart policy of one supervised process (DESIGN.md §5): a pure state machine.
//! [`RestartPolicy::handle`] takes an [`Event`] and the current time and returns the
//! [`Action`] the supervisor must perform, so backoff, the healthy-period reset and the
//! restart-intensity limit are unit-tested without processes (STYLE.md "Processes and
//! supervision", after Horust's supervisor).
//!
//! Rules:
//! * an unexpected exit schedules a restart after a backoff that starts at 100 ms and
//!   doubles up to 30 s;
//! * an instance that stayed running (SERVING) for 60 s resets the backoff and forgets
//!   earlier crashes;
//! * more than 5 crashes within 60 s mark the process `failed`; it stays down until a
//!   manual restart, and nothing else is affected;
//! * manual restarts (`snowpea supervisor restart`) restart at once and never count
//!   against the intensity limit.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Tunables of the restart policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyConfig {
    /// Delay before the first restart after a crash.
    pub initial_backoff: Duration,
    /// Upper bound of the doubling backoff.
    pub max_backoff: Duration,
    /// An instance running this long is healthy: backoff and crash history reset.
    pub healthy_reset: Duration,
    /// Crashes tolerated within [`PolicyConfig::intensity_window`]; one more marks the
    /// process failed.
    pub max_restarts: usize,
    /// The sliding window of the restart-intensity limit.
    pub intensity_window: Duration,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(30),
            healthy_reset: Duration::from_secs(60),
            max_restarts: 5,
            intensity_window: Duration::from_secs(60),
        }
    }
}

/// Lifecycle state of a supervised process; the strings are those of
/// `snowpea.supervisor.v1.ProcessStatus.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcState {
    /// Spawned, not yet SERVING (services) or answering `/health` (gateway).
    Starting,
    /// Ready and serving.
    Running,
    /// Crashed; a restart is scheduled after the backoff.
    Backoff,
    /// Crashed too often (restart-intensity limit); stays down until a manual restart.
    Failed,
    /// SIGTERM sent; waiting for the exit.
    Stopping,
    /// Not running and not scheduled to run.
    Stopped,
}

impl ProcState {
    /// The wire name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            ProcState::Starting => "starting",
            ProcState::Running => "running",
            ProcState::Backoff => "backoff",
            ProcState::Failed => "failed",
            ProcState::Stopping => "stopping",
            ProcState::Stopped => "stopped",
        }
    }
}

/// Something that happened to a supervised process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The supervisor wants the process running (initial start).
    Start,
    /// The current instance became ready (SERVING / `/health` answers).
    Ready,
    /// The current instance did not become ready in time.
    ReadyTimeout,
    /// The current instance exited (for any reason).
    Exited,
    /// The backoff delay scheduled by [`Action::ScheduleRestart`] elapsed.
    BackoffElapsed,
    /// An operator asked for a restart (`Restart` on the control socket).
    ManualRestart,
    /// The suite is stopping: bring the process down and keep it down.
    Stop,
}

/// What the supervisor must do after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Spawn a new instance and wait for it to become ready.
    Spawn,
    /// SIGTERM the instance's process group.
    Terminate,
    /// SIGKILL the instance's process group.
    Kill,
    /// Deliver [`Event::BackoffElapsed`] after this delay.
    ScheduleRestart(Duration),
    /// The restart-intensity limit was hit: the process is now [`ProcState::Failed`].
    GiveUp,
}

/// Restart policy and lifecycle state of one supervised process.
#[derive(Debug, Clone)]
pub struct RestartPolicy {
    config: PolicyConfig,
    state: ProcState,
    next_backoff: Duration,
    /// Times of recent crashes (the intensity window).
    crashes: VecDeque<Instant>,
    restarts: u64,
    /// The delay of the restart scheduled by the last crash.
    scheduled: Option<Duration>,
    running_since: Option<Instant>,
    /// A manual restart is waiting for the current instance to exit.
    restart_pending: bool,
}

impl RestartPolicy {
    /// A stopped process with `config`.
    pub fn new(config: PolicyConfig) -> Self {
        RestartPolicy {
            next_backoff: config.initial_backoff,
            config,
            state: ProcState::Stopped,
            crashes: VecDeque::new(),
            restarts: 0,
            scheduled: None,
            running_since: None,
            restart_pending: false,
        }
    }

    /// Current lifecycle state.
    pub fn state(&self) -> ProcState {
        self.state
    }

    /// Restarts since the supervisor started (crash restarts and manual ones).
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// The backoff the next crash would get.
    pub fn next_backoff(&self) -> Duration {
        self.next_backoff
    }

    /// The backoff to report (issue 24 §5): while [`ProcState::Backoff`], the delay of the
    /// scheduled restart; otherwise the one the next crash would get.
    pub fn current_backoff(&self) -> Duration {
        match (self.state, self.scheduled) {
            (ProcState::Backoff, Some(d)) => d,
            _ => self.next_backoff,
        }
    }

    /// Crashes counted in the restart-intensity window at `now`.
    pub fn restarts_in_window(&self, now: Instant) -> usize {
        self.crashes
            .iter()
            .filter(|t| now.saturating_duration_since(**t) < self.config.intensity_window)
            .count()
    }

    /// The restart-intensity limit (crashes tolerated within the window).
    pub fn max_restarts(&self) -> usize {
        self.config.max_restarts
    }

    /// Applies `event` at time `now` and returns the action to perform, if any.
    pub fn handle(&mut self, event: Event, now: Instant) -> Option<Action> {
        use ProcState::*;
        match (event, self.state) {
            (Event::Start, Stopped) => self.spawn(false),
            (Event::Start, _) => None,

            (Event::Ready, Starting) => {
                self.state = Running;
                self.running_since = Some(now);
                None
            }
            (Event::Ready, _) => None,

            (Event::ReadyTimeout, Starting) => Some(Action::Kill),
            (Event::ReadyTimeout, _) => None,

            (Event::Exited, Stopping) => {
                self.running_since = None;
                if std::mem::take(&mut self.restart_pending) {
                    self.spawn(true)
                } else {
                    self.state = Stopped;
                    None
                }
            }
            (Event::Exited, Starting | Running) => self.crashed(now),
            (Event::Exited, _) => None,

            (Event::BackoffElapsed, Backoff) => self.spawn(true),
            (Event::BackoffElapsed, _) => None,

            (Event::ManualRestart, Starting | Running) => {
                self.state = Stopping;
                self.restart_pending = true;
                Some(Action::Terminate)
            }
            (Event::ManualRestart, Stopping) => {
                self.restart_pending = true;
                None
            }
            (Event::ManualRestart, Failed) => {
                // An operator gives a failed process a fresh start.
                self.next_backoff = self.config.initial_backoff;
                self.crashes.clear();
                self.spawn(true)
            }
            (Event::ManualRestart, Backoff | Stopped) => self.spawn(true),

            (Event::Stop, Starting | Running) => {
                self.state = Stopping;
                self.restart_pending = false;
                Some(Action::Terminate)
            }
            (Event::Stop, Stopping) => {
                self.restart_pending = false;
                None
            }
            (Event::Stop, Backoff) => {
                self.state = Stopped;
                None
            }
            (Event::Stop, Failed | Stopped) => None,
        }
    }

    fn spawn(&mut self, is_restart: bool) -> Option<Action> {
        if is_restart {
            self.restarts += 1;
        }
        self.state = ProcState::Starting;
        self.running_since = None;
        Some(Action::Spawn)
    }

    fn crashed(&mut self, now: Instant) -> Option<Action> {
        if let Some(since) = self.running_since.take() {
            if now.saturating_duration_since(since) >= self.config.healthy_reset {
                self.next_backoff = self.config.initial_backoff;
                self.crashes.clear();
            }
        }
        while let Some(&t) = self.crashes.front() {
            if now.saturating_duration_since(t) >= self.config.intensity_window {
                self.crashes.pop_front();
            } else {
                break;
            }
        }
        self.crashes.push_back(now);
        if self.crashes.len() > self.config.max_restarts {
            self.state = ProcState::Failed;
            return Some(Action::GiveUp);
        }
        let delay = self.next_backoff;
        self.scheduled = Some(delay);
        self.next_backoff = (delay * 2).min(self.config.max_backoff);
        self.state = ProcState::Backoff;
        Some(Action::ScheduleRestart(delay))
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
