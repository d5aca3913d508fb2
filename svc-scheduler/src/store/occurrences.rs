//! The `occurrences` table: claims, run state and run history.

use rusqlite::{params, OptionalExtension, Row, TransactionBehavior};

use super::Store;

/// A claim of one occurrence, committed together with the job's move to its next firing.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The job.
    pub job_id: String,
    /// The occurrence's scheduled time, ms.
    pub scheduled_ms: i64,
    /// Id of the run (`run_…`).
    pub run_id: String,
    /// `schedule` or `runNow`.
    pub trigger: String,
    /// When the claim is made, ms.
    pub now_ms: i64,
    /// The job's `next_run_ms` the claimer saw; the claim fails if it changed meanwhile. `None`
    /// skips the check (`job.runNow`).
    pub expect_next_ms: Option<Option<i64>>,
    /// The job's next firing after this claim.
    pub new_next_ms: Option<i64>,
    /// The job's enabled flag after this claim (false once a one-shot has fired).
    pub new_enabled: bool,
    /// Older occurrences recorded as `missed` in the same transaction, each with its reason.
    pub missed: Vec<(i64, String)>,
}

/// One occurrence row.
#[derive(Debug, Clone, PartialEq)]
pub struct OccurrenceRow {
    /// The job.
    pub job_id: String,
    /// Scheduled time, ms.
    pub scheduled_ms: i64,
    /// Run id.
    pub run_id: String,
    /// `schedule` or `runNow`.
    pub trigger: String,
    /// See the module docs of [`crate::store`].
    pub status: String,
    /// Deadline of a `waiting_for_host` occurrence, ms.
    pub wait_until_ms: Option<i64>,
    /// The session the run used.
    pub session_id: Option<String>,
    /// What the run reported.
    pub text: Option<String>,
    /// Why it failed or was missed.
    pub error: Option<String>,
    /// When it was claimed, ms.
    pub claimed_ms: i64,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// finished, failed, denied, denied_by_timeout or missed.
    pub status: String,
    /// The job's `lastStatus` after it (ok, error, denied_by_timeout); `None` for missed.
    pub last_status: Option<String>,
    /// The run's session.
    pub session_id: Option<String>,
    /// What the run reported.
    pub text: String,
    /// Why it failed.
    pub error: Option<String>,
    /// When it ended, ms.
    pub now_ms: i64,
}

const OCC_COLUMNS: &str =
    "job_id, scheduled_ms, run_id, trigger, status, wait_until_ms, session_id, text, error, claimed_ms";

impl OccurrenceRow {
    fn from_row(r: &Row<'_>) -> rusqlite::Result<OccurrenceRow> {
        Ok(OccurrenceRow {
            job_id: r.get(0)?,
            scheduled_ms: r.get(1)?,
            run_id: r.get(2)?,
            trigger: r.get(3)?,
            status: r.get(4)?,
            wait_until_ms: r.get(5)?,
            session_id: r.get(6)?,
            text: r.get(7)?,
            error: r.get(8)?,
            claimed_ms: r.get(9)?,
        })
    }
}

impl Store {
    /// Claims an occurrence: in one immediate transaction, checks the job exists, is idle
    /// (`running = 0`) and still has the `next_run_ms` the claimer saw, inserts the occurrence
    /// row (`UNIQUE(job_id, scheduled_ms)`), records `missed_ms` and moves the job on. Returns
    /// true when this caller won the claim and must run the occurrence.
    pub fn claim(&self, c: &Claim) -> anyhow::Result<bool> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let job: Option<(bool, Option<i64>)> = tx
            .query_row(
                "SELECT running, next_run_ms FROM jobs WHERE job_id = ?1",
                [&c.job_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((running, next)) = job else {
            return Ok(false);
        };
        if running || c.expect_next_ms.is_some_and(|e| e != next) {
            return Ok(false);
        }
        let inserted = tx.execute(
            "INSERT INTO occurrences (job_id, scheduled_ms, run_id, trigger, status, claimed_ms) \
             VALUES (?1, ?2, ?3, ?4, 'claimed', ?5) ON CONFLICT (job_id, scheduled_ms) DO NOTHING",
            params![c.job_id, c.scheduled_ms, c.run_id, c.trigger, c.now_ms],
        )?;
        if inserted == 0 {
            return Ok(false);
        }
        insert_missed(&tx, &c.job_id, &c.missed, c.now_ms)?;
        tx.execute(
            "UPDATE jobs SET running = 1, next_run_ms = ?2, enabled = ?3, updated_ms = ?4 WHERE job_id = ?1",
            params![c.job_id, c.new_next_ms, c.new_enabled, c.now_ms],
        )?;
        tx.commit()?;
        Ok(true)
    }

    /// Records `c.missed` as missed and moves an idle job on without running anything
    /// (every due occurrence was older than the catch-up window); `c.scheduled_ms`,
    /// `run_id` and `trigger` are not used. False when the job changed meanwhile.
    pub fn skip_missed(&self, c: &Claim) -> anyhow::Result<bool> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let n = tx.execute(
            "UPDATE jobs SET next_run_ms = ?3, enabled = ?4, updated_ms = ?5 \
             WHERE job_id = ?1 AND running = 0 AND next_run_ms IS ?2",
            params![
                c.job_id,
                c.expect_next_ms.flatten(),
                c.new_next_ms,
                c.new_enabled,
                c.now_ms
            ],
        )?;
        if n == 0 {
            return Ok(false);
        }
        insert_missed(&tx, &c.job_id, &c.missed, c.now_ms)?;
        tx.commit()?;
        Ok(true)
    }

    /// Marks a claimed occurrence as waiting for its host until `wait_until_ms`.
    pub fn set_waiting(
        &self,
        job_id: &str,
        scheduled_ms: i64,
        wait_until_ms: i64,
    ) -> anyhow::Result<()> {
        self.conn().execute(
            "UPDATE occurrences SET status = 'waiting_for_host', wait_until_ms = ?3 \
             WHERE job_id = ?1 AND scheduled_ms = ?2",
            params![job_id, scheduled_ms, wait_until_ms],
        )?;
        Ok(())
    }

    /// Marks an occurrence as handed to svc-session (committed before the call, so a crash
    /// after it never runs the occurrence again) and records the job's `lastRunAt`.
    pub fn mark_running(&self, job_id: &str, scheduled_ms: i64, now_ms: i64) -> anyhow::Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute(
            "UPDATE occurrences SET status = 'running', started_ms = ?3 WHERE job_id = ?1 AND scheduled_ms = ?2",
            params![job_id, scheduled_ms, now_ms],
        )?;
        tx.execute(
            "UPDATE jobs SET last_run_ms = ?2 WHERE job_id = ?1",
            params![job_id, now_ms],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Records the session a running occurrence uses (as soon as svc-session names it).
    pub fn set_session(
        &self,
        job_id: &str,
        scheduled_ms: i64,
        session_id: &str,
    ) -> anyhow::Result<()> {
        self.conn().execute(
            "UPDATE occurrences SET session_id = ?3 WHERE job_id = ?1 AND scheduled_ms = ?2",
            params![job_id, scheduled_ms, session_id],
        )?;
        Ok(())
    }

    /// Ends an occurrence and frees its job (`running = 0`, `lastStatus`).
    pub fn finish(&self, job_id: &str, scheduled_ms: i64, o: &Outcome) -> anyhow::Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute(
            "UPDATE occurrences SET status = ?3, session_id = COALESCE(?4, session_id), text = ?5, \
             error = ?6, ended_ms = ?7 WHERE job_id = ?1 AND scheduled_ms = ?2",
            params![job_id, scheduled_ms, o.status, o.session_id, o.text, o.error, o.now_ms],
        )?;
        tx.execute(
            "UPDATE jobs SET running = 0, last_status = COALESCE(?2, last_status), updated_ms = ?3 WHERE job_id = ?1",
            params![job_id, o.last_status, o.now_ms],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Ends an occurrence like [`Store::finish`], but only while it is still open (`claimed`,
    /// `waiting_for_host` or `running`). True when it was.
    pub fn finish_open(
        &self,
        job_id: &str,
        scheduled_ms: i64,
        o: &Outcome,
    ) -> anyhow::Result<bool> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let n = tx.execute(
            "UPDATE occurrences SET status = ?3, session_id = COALESCE(?4, session_id), text = ?5, \
             error = ?6, ended_ms = ?7 WHERE job_id = ?1 AND scheduled_ms = ?2 \
             AND status IN ('claimed', 'waiting_for_host', 'running')",
            params![job_id, scheduled_ms, o.status, o.session_id, o.text, o.error, o.now_ms],
        )?;
        if n == 1 {
            tx.execute(
                "UPDATE jobs SET running = 0, last_status = COALESCE(?2, last_status), updated_ms = ?3 WHERE job_id = ?1",
                params![job_id, o.last_status, o.now_ms],
            )?;
        }
        tx.commit()?;
        Ok(n == 1)
    }

    /// Sessions of the job's ended runs beyond the newest `keep` runs that have a session
    /// (runs in progress count towards `keep` but are never returned), oldest last.
    pub fn run_sessions_beyond(&self, job_id: &str, keep: usize) -> anyhow::Result<Vec<String>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT session_id, status FROM occurrences WHERE job_id = ?1 AND session_id IS NOT NULL \
             ORDER BY scheduled_ms DESC LIMIT -1 OFFSET ?2",
        )?;
        let rows = st.query_map(params![job_id, keep as i64], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (sid, status) = row?;
            if !matches!(status.as_str(), "claimed" | "waiting_for_host" | "running") {
                out.push(sid);
            }
        }
        Ok(out)
    }

    /// Forgets the session of the job's occurrences that used one of `session_ids` (deleted
    /// by retention); their status and text stay.
    pub fn forget_sessions(&self, job_id: &str, session_ids: &[String]) -> anyhow::Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        {
            let mut st = tx.prepare_cached(
                "UPDATE occurrences SET session_id = NULL WHERE job_id = ?1 AND session_id = ?2",
            )?;
            for sid in session_ids {
                st.execute(params![job_id, sid])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Occurrences a crash may have left open (`claimed`, `waiting_for_host`, `running`).
    pub fn open_occurrences(&self) -> anyhow::Result<Vec<OccurrenceRow>> {
        let conn = self.conn();
        let mut st = conn.prepare(&format!(
            "SELECT {OCC_COLUMNS} FROM occurrences \
             WHERE status IN ('claimed', 'waiting_for_host', 'running') ORDER BY scheduled_ms"
        ))?;
        let rows = st.query_map([], OccurrenceRow::from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// True when the job has an occurrence row at `scheduled_ms`.
    pub fn occurrence_exists(&self, job_id: &str, scheduled_ms: i64) -> anyhow::Result<bool> {
        Ok(self
            .conn()
            .query_row(
                "SELECT 1 FROM occurrences WHERE job_id = ?1 AND scheduled_ms = ?2",
                params![job_id, scheduled_ms],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// A job's occurrences, newest first (run history).
    pub fn occurrences(&self, job_id: &str, limit: usize) -> anyhow::Result<Vec<OccurrenceRow>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(&format!(
            "SELECT {OCC_COLUMNS} FROM occurrences WHERE job_id = ?1 ORDER BY scheduled_ms DESC LIMIT ?2"
        ))?;
        let rows = st.query_map(params![job_id, limit as i64], OccurrenceRow::from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

fn insert_missed(
    tx: &rusqlite::Transaction<'_>,
    job_id: &str,
    missed: &[(i64, String)],
    now_ms: i64,
) -> anyhow::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT INTO occurrences (job_id, scheduled_ms, run_id, trigger, status, error, claimed_ms, ended_ms) \
         VALUES (?1, ?2, ?3, 'schedule', 'missed', ?4, ?5, ?5) ON CONFLICT (job_id, scheduled_ms) DO NOTHING",
    )?;
    for (ms, reason) in missed {
        st.execute(params![
            job_id,
            ms,
            snowpea_common::ids::new_id("run"),
            reason,
            now_ms
        ])?;
    }
    Ok(())
}
