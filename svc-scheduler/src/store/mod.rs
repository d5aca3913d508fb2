//! `$SNOWPEA_HOME/state/scheduler.db` (DESIGN.md §6): the jobs and their occurrences.
//!
//! An occurrence is *claimed* by inserting its row — `UNIQUE(job_id, scheduled_ms)` — in the
//! same immediate transaction that marks the job running and moves its `next_run_ms` on
//! ([`Store::claim`]). Whoever commits the row runs the occurrence; everyone else (a second
//! scheduler process on the same file, `job.runNow` racing the tick, a restart that finds the
//! occurrence again) sees the conflict or `running = 1` and does nothing. The occurrences table
//! is also the run history (one run per occurrence: its status, session, text, error).
//!
//! Occurrence status: `claimed` (committed, not handed to svc-session yet) → optionally
//! `waiting_for_host` → `running` (handed to svc-session) → `finished` | `failed` | `denied` |
//! `denied_by_timeout`; or `missed`.

mod jobs;
mod occurrences;

pub use jobs::JobRow;
pub use occurrences::{Claim, OccurrenceRow, Outcome};

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

/// Schema migrations, in order (see `snowpea_common::db::migrate`).
pub const MIGRATIONS: &[&str] = &[r#"
CREATE TABLE jobs (
    job_id TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    kind TEXT NOT NULL,
    normalized TEXT NOT NULL,
    anchor_ms INTEGER NOT NULL,
    time_zone TEXT NOT NULL,
    task TEXT NOT NULL,
    mode TEXT NOT NULL,
    agent TEXT,
    channel TEXT,
    workdir TEXT NOT NULL,
    host_tools_from TEXT,
    host_wait_sec INTEGER NOT NULL,
    catch_up_window_minutes INTEGER NOT NULL,
    meta TEXT,
    owner_client_id TEXT,
    fingerprint TEXT,
    origin_session_id TEXT,
    created_via TEXT NOT NULL,
    enabled INTEGER NOT NULL,
    cancelled INTEGER NOT NULL DEFAULT 0,
    running INTEGER NOT NULL DEFAULT 0,
    next_run_ms INTEGER,
    last_run_ms INTEGER,
    last_status TEXT,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX jobs_due ON jobs(next_run_ms) WHERE enabled = 1 AND running = 0;
CREATE TABLE occurrences (
    job_id TEXT NOT NULL,
    scheduled_ms INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    trigger TEXT NOT NULL,
    status TEXT NOT NULL,
    wait_until_ms INTEGER,
    session_id TEXT,
    text TEXT,
    error TEXT,
    claimed_ms INTEGER NOT NULL,
    started_ms INTEGER,
    ended_ms INTEGER,
    UNIQUE (job_id, scheduled_ms)
);
CREATE INDEX occurrences_open ON occurrences(status)
    WHERE status IN ('claimed', 'waiting_for_host', 'running');
"#];

/// The scheduler database. Its methods are synchronous and are only called on the blocking
/// pool (`Scheduler::db` / `Scheduler::blocking` / `JobApi::blocking`, all through
/// `snowpea_common::db::blocking`), never on an async worker thread.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
}

impl Store {
    /// Opens (creating and migrating) the database at `path`.
    pub fn open(path: &Path) -> anyhow::Result<Store> {
        Ok(Store {
            conn: Mutex::new(snowpea_common::db::open(path, MIGRATIONS)?),
        })
    }

    /// A private in-memory database (unit tests, benchmarks).
    pub fn open_in_memory() -> anyhow::Result<Store> {
        let mut conn = Connection::open_in_memory()?;
        snowpea_common::db::migrate(&mut conn, MIGRATIONS)?;
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A poisoned lock only means another thread panicked: the connection is still usable.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
pub(crate) mod tests;
