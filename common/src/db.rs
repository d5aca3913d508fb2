//! SQLite for service state (DESIGN.md §6): one database per service under
//! `$SNOWPEA_HOME/state/`, WAL journal, `busy_timeout`, `synchronous=NORMAL` (in WAL mode a
//! committed transaction survives a process crash — kill -9 — which is the durability the
//! suite promises), and versioned migrations tracked in `PRAGMA user_version`.
//!
//! SQLite calls never run on an async worker thread (issue 13 §4): a service reaches its
//! database through a [`Db`], a connection owned by one dedicated thread that runs the
//! closures sent to it in order and hands each result back over a oneshot channel.

use std::path::Path;

use anyhow::Context;
use rusqlite::Connection;

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

/// Why a [`Db::call`] failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The statement failed (constraint, I/O, busy past `busy_timeout`, …).
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The connection thread is gone (it panicked, or could not be started).
    #[error("the database thread of {0} is gone")]
    Gone(String),
}

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A connection actor: one SQLite connection owned by a dedicated thread
/// (`db-<name>`), reached from async code with [`Db::call`]. Calls run one at a time in
/// the order they were sent. Cheap to clone; the thread ends (closing the connection) when
/// the last handle is dropped.
#[derive(Debug, Clone)]
pub struct Db {
    name: std::sync::Arc<str>,
    tx: tokio::sync::mpsc::UnboundedSender<Job>,
}

impl Db {
    /// Opens (creating and migrating, see [`open`]) the database at `path` on a new
    /// connection thread named after `name` (e.g. the service).
    pub fn open(name: &str, path: &Path, migrations: &[&str]) -> anyhow::Result<Db> {
        Db::new(name, open(path, migrations)?)
    }

    /// Moves `conn` onto a new connection thread.
    pub fn new(name: &str, conn: Connection) -> anyhow::Result<Db> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
        std::thread::Builder::new()
            .name(format!("db-{name}"))
            .spawn(move || {
                let mut conn = conn;
                while let Some(job) = rx.blocking_recv() {
                    job(&mut conn);
                }
            })
            .with_context(|| format!("start the database thread of {name}"))?;
        Ok(Db {
            name: name.into(),
            tx,
        })
    }

    /// Runs `f` with the connection on the connection thread and returns its result.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, DbError> {
        let (done, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let _ = done.send(f(conn));
        });
        if self.tx.send(job).is_err() {
            return Err(DbError::Gone(self.name.to_string()));
        }
        match rx.await {
            Ok(r) => Ok(r?),
            Err(_) => Err(DbError::Gone(self.name.to_string())),
        }
    }
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
    async fn db_calls_run_in_order_off_the_runtime() {
        let t = tempfile::tempdir().unwrap();
        let db = Db::open(
            "test",
            &t.path().join("x.db"),
            &["CREATE TABLE a(x INTEGER);"],
        )
        .unwrap();
        for i in 0..3 {
            db.call(move |c| c.execute("INSERT INTO a VALUES (?1)", [i]).map(|_| ()))
                .await
                .unwrap();
        }
        let (xs, thread) = db
            .call(|c| {
                let mut st = c.prepare("SELECT x FROM a ORDER BY rowid")?;
                let xs = st
                    .query_map([], |r| r.get::<_, i64>(0))?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok((xs, std::thread::current().name().map(str::to_owned)))
            })
            .await
            .unwrap();
        assert_eq!(xs, vec![0, 1, 2]);
        assert_eq!(thread.as_deref(), Some("db-test"));
        let err = db
            .call(|c| c.execute("INSERT INTO nope VALUES (1)", []))
            .await;
        assert!(matches!(err, Err(DbError::Sqlite(_))), "{err:?}");
    }

    #[test]
    fn newer_database_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("x.db");
        open(&p, &["CREATE TABLE a(x);", "CREATE TABLE b(x);"]).unwrap();
        assert!(open(&p, &["CREATE TABLE a(x);"]).is_err());
    }
}
