//! The `jobs` table.

use rusqlite::{params, OptionalExtension, Row};

use super::Store;

/// One job as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    /// Job id (`job_…`).
    pub job_id: String,
    /// The spec as given.
    pub spec: String,
    /// `cron`, `once` or `interval`.
    pub kind: String,
    /// The canonical schedule ([`crate::spec::Schedule::normalized`]).
    pub normalized: String,
    /// Interval anchor, ms since the epoch.
    pub anchor_ms: i64,
    /// IANA zone cron rules are read in.
    pub time_zone: String,
    /// Prompt run on each firing.
    pub task: String,
    /// plan, accept or auto.
    pub mode: String,
    /// Named agent, if any.
    pub agent: Option<String>,
    /// Gateway channel, if any.
    pub channel: Option<String>,
    /// Working directory of the runs.
    pub workdir: String,
    /// Browser clientId whose host tools the runs need, if any.
    pub host_tools_from: Option<String>,
    /// How long a run waits for that host.
    pub host_wait_sec: i64,
    /// Catch-up window.
    pub catch_up_window_minutes: i64,
    /// The job's meta (JSON text), if any.
    pub meta: Option<String>,
    /// The owning browser clientId (jobs with meta).
    pub owner_client_id: Option<String>,
    /// The sealed fingerprint (jobs with meta).
    pub fingerprint: Option<String>,
    /// Session that also receives every result.
    pub origin_session_id: Option<String>,
    /// `rpc` or `tool`.
    pub created_via: String,
    /// False when paused, cancelled or run out.
    pub enabled: bool,
    /// True after job.cancel.
    pub cancelled: bool,
    /// True while an occurrence is claimed and not ended.
    pub running: bool,
    /// Next firing, ms since the epoch.
    pub next_run_ms: Option<i64>,
    /// Last firing, ms since the epoch.
    pub last_run_ms: Option<i64>,
    /// ok, error or denied_by_timeout.
    pub last_status: Option<String>,
    /// Creation time, ms.
    pub created_ms: i64,
    /// Last change, ms.
    pub updated_ms: i64,
}

const COLUMNS: &str = "job_id, spec, kind, normalized, anchor_ms, time_zone, task, mode, agent, channel, \
workdir, host_tools_from, host_wait_sec, catch_up_window_minutes, meta, owner_client_id, fingerprint, \
origin_session_id, created_via, enabled, cancelled, running, next_run_ms, last_run_ms, last_status, \
created_ms, updated_ms";

impl JobRow {
    fn from_row(r: &Row<'_>) -> rusqlite::Result<JobRow> {
        Ok(JobRow {
            job_id: r.get(0)?,
            spec: r.get(1)?,
            kind: r.get(2)?,
            normalized: r.get(3)?,
            anchor_ms: r.get(4)?,
            time_zone: r.get(5)?,
            task: r.get(6)?,
            mode: r.get(7)?,
            agent: r.get(8)?,
            channel: r.get(9)?,
            workdir: r.get(10)?,
            host_tools_from: r.get(11)?,
            host_wait_sec: r.get(12)?,
            catch_up_window_minutes: r.get(13)?,
            meta: r.get(14)?,
            owner_client_id: r.get(15)?,
            fingerprint: r.get(16)?,
            origin_session_id: r.get(17)?,
            created_via: r.get(18)?,
            enabled: r.get(19)?,
            cancelled: r.get(20)?,
            running: r.get(21)?,
            next_run_ms: r.get(22)?,
            last_run_ms: r.get(23)?,
            last_status: r.get(24)?,
            created_ms: r.get(25)?,
            updated_ms: r.get(26)?,
        })
    }
}

impl Store {
    /// Inserts a new job.
    pub fn insert_job(&self, j: &JobRow) -> anyhow::Result<()> {
        self.conn().execute(
            &format!("INSERT INTO jobs ({COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,?24,?25,?26,?27)"),
            params![
                j.job_id, j.spec, j.kind, j.normalized, j.anchor_ms, j.time_zone, j.task, j.mode,
                j.agent, j.channel, j.workdir, j.host_tools_from, j.host_wait_sec,
                j.catch_up_window_minutes, j.meta, j.owner_client_id, j.fingerprint,
                j.origin_session_id, j.created_via, j.enabled, j.cancelled, j.running,
                j.next_run_ms, j.last_run_ms, j.last_status, j.created_ms, j.updated_ms
            ],
        )?;
        Ok(())
    }

    /// The job with this id.
    pub fn job(&self, job_id: &str) -> anyhow::Result<Option<JobRow>> {
        Ok(self
            .conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM jobs WHERE job_id = ?1"),
                [job_id],
                JobRow::from_row,
            )
            .optional()?)
    }

    /// Every job, oldest first.
    pub fn jobs(&self) -> anyhow::Result<Vec<JobRow>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM jobs ORDER BY created_ms, job_id"
        ))?;
        let rows = st.query_map([], JobRow::from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Enabled, idle jobs whose next firing is at or before `now_ms`, earliest first.
    pub fn due_jobs(&self, now_ms: i64, limit: usize) -> anyhow::Result<Vec<JobRow>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM jobs WHERE enabled = 1 AND running = 0 AND next_run_ms <= ?1 \
             ORDER BY next_run_ms LIMIT ?2"
        ))?;
        let rows = st.query_map(params![now_ms, limit as i64], JobRow::from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The earliest next firing of an enabled, idle job (what the tick sleeps until).
    pub fn earliest_due(&self) -> anyhow::Result<Option<i64>> {
        Ok(self.conn().query_row(
            "SELECT MIN(next_run_ms) FROM jobs WHERE enabled = 1 AND running = 0",
            [],
            |r| r.get(0),
        )?)
    }

    /// Writes a job's changeable fields (schedule, template, enabled state, next run).
    pub fn update_job(&self, j: &JobRow) -> anyhow::Result<bool> {
        let n = self.conn().execute(
            "UPDATE jobs SET spec = ?2, kind = ?3, normalized = ?4, anchor_ms = ?5, time_zone = ?6, \
             host_wait_sec = ?7, catch_up_window_minutes = ?8, enabled = ?9, cancelled = ?10, \
             next_run_ms = ?11, updated_ms = ?12 WHERE job_id = ?1",
            params![
                j.job_id, j.spec, j.kind, j.normalized, j.anchor_ms, j.time_zone, j.host_wait_sec,
                j.catch_up_window_minutes, j.enabled, j.cancelled, j.next_run_ms, j.updated_ms
            ],
        )?;
        Ok(n == 1)
    }

    /// Deletes a job and its run history; returns the session ids its runs used (those of runs
    /// still in progress excluded: they are left alone).
    pub fn delete_job(&self, job_id: &str) -> anyhow::Result<Option<Vec<String>>> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let sessions: Vec<String> = {
            let mut st = tx.prepare(
                "SELECT session_id FROM occurrences WHERE job_id = ?1 AND session_id IS NOT NULL \
                 AND status NOT IN ('claimed', 'waiting_for_host', 'running')",
            )?;
            let rows = st.query_map([job_id], |r| r.get(0))?;
            rows.collect::<Result<_, _>>()?
        };
        let n = tx.execute("DELETE FROM jobs WHERE job_id = ?1", [job_id])?;
        tx.execute("DELETE FROM occurrences WHERE job_id = ?1", [job_id])?;
        tx.commit()?;
        Ok((n == 1).then_some(sessions))
    }
}
