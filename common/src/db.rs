//! SQLite for service state (DESIGN.md §6): one database per service under
//! `$SNOWPEA_HOME/state/`, WAL journal, `busy_timeout`, `synchronous=NORMAL` (in WAL mode a
//! committed transaction survives a process crash — kill -9 — which is the durability the
//! suite promises), and versioned migrations tracked in `PRAGMA user_version`.
//!
//! **SQLite never runs on an async worker thread** (issue 13 §3/§4): a service reaches its
//! database only through [`blocking`], which runs the work on tokio's blocking pool and waits
//! for it at most [`CALL_TIMEOUT`]. Every service does it this way; a store keeps its
//! connections behind its own locks and exposes synchronous methods that are only ever
//! called from inside [`blocking`].

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use rusqlite::Connection;

/// The longest a caller waits for database work handed to [`blocking`] (six times SQLite's
/// `busy_timeout`, so a slow but progressing writer is not cut off).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why database work handed to [`blocking`] produced no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DbError {
    /// The work did not finish within the wait (it may still finish later; its result is
    /// dropped). Services answer it `unavailable`.
    #[error("{what}: the database did not answer within {waited:?}")]
    Timeout {
        /// What was being done (for the message).
        what: &'static str,
        /// How long the caller waited.
        waited: Duration,
    },
    /// The work panicked (a bug); services answer it `internal`.
    #[error("{what}: database work panicked: {message}")]
    Panicked {
        /// What was being done.
        what: &'static str,
        /// The panic message.
        message: String,
    },
}

/// Runs synchronous database work `f` on tokio's blocking pool (never on an async worker
/// thread) inside the caller's span, and waits for it at most [`CALL_TIMEOUT`]. `what`
/// names the work in errors (`"memory.search"`).
pub async fn blocking<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, DbError> {
    blocking_within(what, CALL_TIMEOUT, f).await
}

/// [`blocking`] with an explicit wait.
pub async fn blocking_within<T: Send + 'static>(
    what: &'static str,
    wait: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, DbError> {
    let span = tracing::Span::current();
    let task = tokio::task::spawn_blocking(move || span.in_scope(f));
    match tokio::time::timeout(wait, task).await {
        Err(_) => Err(DbError::Timeout { what, waited: wait }),
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(DbError::Panicked {
            what,
            message: panic_message(e),
        }),
    }
}

fn panic_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-text panic".into()),
        Err(e) => e.to_string(),
    }
}

/// Opens (creating) the database at `path` and applies `migrations` in order: migration
/// `i` (0-based) brings the schema to `user_version = i + 1`. Each runs in its own
/// transaction together with its version bump.
pub fn open(path: &Path, migrations: &[&str]) -> anyhow::Result<Connection> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    owner_only(path)?;
    let mut conn = Connection::open(path).with_context(|| format!("open {}", path.display()))?;
    configure(&conn)?;
    migrate(&mut conn, migrations)?;
    Ok(conn)
}

/// Creates the database file readable by the owner only (0600) before SQLite opens it —
/// SQLite gives its `-wal` and `-shm` files the database file's mode — and tightens an
/// existing database and its `-wal`/`-shm` files to 0600 (DESIGN.md: state is the owner's).
fn owner_only(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("create {}", path.display()))?;
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let p = std::path::PathBuf::from(p);
        match std::fs::metadata(&p) {
            Ok(m) if m.permissions().mode() & 0o077 != 0 => {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                    .with_context(|| format!("chmod 0600 {}", p.display()))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Applies the connection pragmas used by every service.
pub fn configure(conn: &Connection) -> anyhow::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(())
}

/// Brings `conn` to the latest version of `migrations`.
pub fn migrate(conn: &mut Connection, migrations: &[&str]) -> anyhow::Result<()> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    anyhow::ensure!(
        current as usize <= migrations.len(),
        "database schema version {current} is newer than this binary knows ({})",
        migrations.len()
    );
    for (i, sql) in migrations.iter().enumerate().skip(current as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)
            .with_context(|| format!("migration {}", i + 1))?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_files_are_the_owners_only() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("x.db");
        let c = open(&p, &["CREATE TABLE a(x INTEGER);"]).unwrap();
        c.execute("INSERT INTO a VALUES (1)", []).unwrap();
        let mode = |s: &str| {
            std::fs::metadata(t.path().join(s))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("x.db"), 0o600);
        assert_eq!(mode("x.db-wal"), 0o600);
        assert_eq!(mode("x.db-shm"), 0o600);
        drop(c);
        // An older database left world-readable is tightened on the next open.
        std::fs::set_permissions(
            t.path().join("x.db"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let _c = open(&p, &["CREATE TABLE a(x INTEGER);"]).unwrap();
        assert_eq!(mode("x.db"), 0o600);
    }

    #[test]
    fn migrations_apply_once_and_in_order() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("x.db");
        let m1 = ["CREATE TABLE a(x INTEGER);"];
        let c = open(&p, &m1).unwrap();
        c.execute("INSERT INTO a VALUES (1)", []).unwrap();
        drop(c);
        let m2 = [
            "CREATE TABLE a(x INTEGER);",
            "ALTER TABLE a ADD COLUMN y TEXT;",
        ];
        let c = open(&p, &m2).unwrap();
        let v: i64 = c
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, 2);
        let n: i64 = c
            .query_row("SELECT count(*) FROM a", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1, "old rows survive");
        let mode: String = c
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[tokio::test]
    async fn blocking_work_runs_on_another_thread_and_reports_panics_and_timeouts() {
        let caller = std::thread::current().id();
        let worker = blocking("probe", || std::thread::current().id())
            .await
            .unwrap();
        assert_ne!(caller, worker);
        let e = blocking("boom", || -> () { panic!("bad row") })
            .await
            .unwrap_err();
        assert_eq!(
            e,
            DbError::Panicked {
                what: "boom",
                message: "bad row".into()
            }
        );
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let e = blocking_within("slow", Duration::from_millis(10), move || {
            let _ = rx.recv_timeout(Duration::from_secs(5));
        })
        .await
        .unwrap_err();
        assert!(matches!(e, DbError::Timeout { what: "slow", .. }));
        drop(tx);
    }

    #[test]
    fn newer_database_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("x.db");
        open(&p, &["CREATE TABLE a(x);", "CREATE TABLE b(x);"]).unwrap();
        assert!(open(&p, &["CREATE TABLE a(x);"]).is_err());
    }
}
