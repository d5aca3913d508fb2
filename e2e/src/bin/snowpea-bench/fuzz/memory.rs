//! Watching the suite's memory: every process's RSS (`/proc/<pid>/status` `VmRSS`) and PSS
//! (`/proc/<pid>/smaps_rollup` `Pss`) sampled several times a second through the phases of
//! a run — the idle baseline after warm-up, the fuzz, the drain and the settle — and the
//! supervisor's status polled for restarts (a new pid, a higher restart count, a state
//! other than `running`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use snowpea_e2e::Suite;

/// Time between memory samples.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Time between supervisor status polls (each runs `snowpea supervisor status --json`).
const STATUS_EVERY: Duration = Duration::from_secs(2);
/// Longest a status poll may take.
const STATUS_WAIT: Duration = Duration::from_secs(20);

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Phase {
    /// Starting and warming up: not recorded.
    Warmup = 0,
    /// Quiet after warm-up: the baseline.
    Idle = 1,
    /// Requests going out, then their answers coming back.
    Fuzz = 2,
    /// Quiet after the fuzz: what stays.
    Settle = 3,
}

/// RSS and PSS in KiB.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Mem {
    /// Resident set size.
    pub rss_kb: u64,
    /// Proportional set size (shared pages split between their users).
    pub pss_kb: u64,
}

/// One process's figures.
#[derive(Debug, Default, Clone)]
pub struct Figures {
    /// Highest RSS/PSS while idle.
    pub idle: Mem,
    /// Highest RSS/PSS during the fuzz and its drain.
    pub peak: Mem,
    /// The last sample of the settle phase.
    pub after: Mem,
    /// Samples taken during the fuzz.
    pub samples: u64,
}

/// A supervised process as the status reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    /// `gateway`, `session`, … or `supervisor`.
    pub name: String,
    /// Its pid (0 when not running).
    pub pid: i32,
    /// Its state.
    pub state: String,
    /// Restarts since the supervisor started.
    pub restarts: i64,
}

/// What the watcher collects.
#[derive(Debug, Default)]
pub struct Watched {
    /// Figures by process name.
    pub figures: BTreeMap<String, Figures>,
    /// Restarts and state changes seen after warm-up, word for word.
    pub restarts: Vec<String>,
    /// Set when a process went over the abort limit (the run stops early).
    pub aborted: Option<String>,
}

/// Samples the suite's processes until dropped.
pub struct Watcher {
    phase: Arc<AtomicU8>,
    /// What was collected so far.
    pub watched: Arc<Mutex<Watched>>,
    /// Set when a process passed the abort limit.
    pub abort: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Watcher {
    /// Starts sampling `suite`'s processes; a process over `abort_kb` of RSS sets
    /// [`Watcher::abort`] (so a run that eats the machine stops).
    pub async fn start(suite: Arc<Suite>, abort_kb: u64) -> Watcher {
        let phase = Arc::new(AtomicU8::new(Phase::Warmup as u8));
        let watched = Arc::new(Mutex::new(Watched::default()));
        let abort = Arc::new(AtomicBool::new(false));
        let procs = status(&suite).await;
        let task = tokio::spawn(sample_loop(
            suite,
            procs,
            phase.clone(),
            watched.clone(),
            abort.clone(),
            abort_kb,
        ));
        Watcher {
            phase,
            watched,
            abort,
            task,
        }
    }

    /// Moves to `p`.
    pub fn set_phase(&self, p: Phase) {
        self.phase.store(p as u8, Ordering::SeqCst);
    }

    /// A copy of what was collected.
    pub fn snapshot(&self) -> (BTreeMap<String, Figures>, Vec<String>, Option<String>) {
        let w = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        (w.figures.clone(), w.restarts.clone(), w.aborted.clone())
    }
}

async fn sample_loop(
    suite: Arc<Suite>,
    mut procs: Vec<Proc>,
    phase: Arc<AtomicU8>,
    watched: Arc<Mutex<Watched>>,
    abort: Arc<AtomicBool>,
    abort_kb: u64,
) {
    // The baseline of restarts: taken when the idle phase starts.
    let mut baseline: Option<Vec<Proc>> = None;
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    let mut last_status = tokio::time::Instant::now();
    loop {
        tick.tick().await;
        let p = phase.load(Ordering::SeqCst);
        if last_status.elapsed() >= STATUS_EVERY {
            last_status = tokio::time::Instant::now();
            let fresh = status(&suite).await;
            if !fresh.is_empty() {
                procs = fresh;
            }
            if p >= Phase::Idle as u8 {
                let base = baseline.get_or_insert_with(|| procs.clone());
                let mut w = watched.lock().unwrap_or_else(|e| e.into_inner());
                for now in &procs {
                    let Some(was) = base.iter().find(|b| b.name == now.name) else {
                        continue;
                    };
                    if now != was {
                        let what = format!(
                            "{}: pid {} → {}, restarts {} → {}, state {} → {}",
                            now.name,
                            was.pid,
                            now.pid,
                            was.restarts,
                            now.restarts,
                            was.state,
                            now.state
                        );
                        if !w.restarts.contains(&what) {
                            w.restarts.push(what);
                        }
                    }
                }
            }
        }
        if p == Phase::Warmup as u8 {
            continue;
        }
        let mut w = watched.lock().unwrap_or_else(|e| e.into_inner());
        for pr in procs.iter().filter(|pr| pr.pid > 0) {
            let m = read_mem(pr.pid);
            if m.rss_kb == 0 {
                continue;
            }
            let f = w.figures.entry(pr.name.clone()).or_default();
            match p {
                1 => f.idle = max(f.idle, m),
                2 => {
                    f.peak = max(f.peak, m);
                    f.samples += 1;
                }
                _ => {
                    f.peak = max(f.peak, m);
                    f.after = m;
                }
            }
            if m.rss_kb > abort_kb && w.aborted.is_none() {
                w.aborted = Some(format!(
                    "{} reached {} MB RSS (abort limit {} MB; killed)",
                    pr.name,
                    m.rss_kb / 1024,
                    abort_kb / 1024
                ));
                abort.store(true, Ordering::SeqCst);
                // The machine is shared: the process goes now, not after the drain.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pr.pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

fn max(a: Mem, b: Mem) -> Mem {
    Mem {
        rss_kb: a.rss_kb.max(b.rss_kb),
        pss_kb: a.pss_kb.max(b.pss_kb),
    }
}

/// The processes the supervisor reports, and the supervisor itself (bounded wait; empty
/// when the status cannot be read).
pub async fn status(suite: &Arc<Suite>) -> Vec<Proc> {
    let s = suite.clone();
    let st = tokio::time::timeout(STATUS_WAIT, tokio::task::spawn_blocking(move || s.status()))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(Value::Null);
    let mut out: Vec<Proc> = st["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| Proc {
            name: p["name"].as_str().unwrap_or("?").to_owned(),
            pid: p["pid"].as_i64().unwrap_or(0) as i32,
            state: p["state"].as_str().unwrap_or("").to_owned(),
            restarts: p["restarts"].as_i64().unwrap_or(0),
        })
        .collect();
    if let Some(pid) = st["pid"].as_i64() {
        out.push(Proc {
            name: "supervisor".into(),
            pid: pid as i32,
            state: "running".into(),
            restarts: 0,
        });
    }
    out
}

/// RSS and PSS of `pid` (zeros when it is gone).
pub fn read_mem(pid: i32) -> Mem {
    let field = |path: String, name: &str| -> u64 {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(name))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    };
    Mem {
        rss_kb: field(format!("/proc/{pid}/status"), "VmRSS:"),
        pss_kb: field(format!("/proc/{pid}/smaps_rollup"), "Pss:"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own figures are read (RSS ≥ PSS > 0).
    #[test]
    fn reads_its_own_memory() {
        let m = read_mem(std::process::id() as i32);
        assert!(
            m.rss_kb > 0 && m.pss_kb > 0 && m.pss_kb <= m.rss_kb,
            "{m:?}"
        );
        assert_eq!(read_mem(i32::MAX), Mem::default());
    }
}
