//! SQLite storage of svc-memory (`$SNOWPEA_HOME/state/memory.db`, DESIGN.md §6): the
//! schema and its migrations, one writer connection and a few reader connections (WAL lets
//! readers run next to the writer). Every write runs in one `BEGIN IMMEDIATE` transaction
//! and returns only after `COMMIT`, so an acknowledged write survives kill -9.
//!
//! [`memories`] holds the ranked memories (FTS5, trigram tokenizer, bm25, ranked top-k by
//! [`rank`]; two-character non-ASCII words in [`grams`]); [`sites`] the site-memory entries.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Error, Result};

pub mod grams;
pub mod memories;
pub mod rank;
pub mod sites;

/// Schema migrations; migration `i` brings `user_version` to `i + 1`. Never edit a shipped
/// one: append.
pub const MIGRATIONS: &[&str] = &[
    // 1: memories + their full-text index, site-memory entries.
    r#"
    CREATE TABLE memories (
        rowid        INTEGER PRIMARY KEY,
        id           TEXT NOT NULL UNIQUE,
        namespace    TEXT NOT NULL,
        text         TEXT NOT NULL,
        tags         TEXT NOT NULL DEFAULT '',
        title        TEXT NOT NULL DEFAULT '',
        created_ms   INTEGER NOT NULL,
        created_at   TEXT NOT NULL,
        url          TEXT,
        origin       TEXT,
        content_hash TEXT,
        session_id   TEXT
    );
    CREATE INDEX memories_by_namespace ON memories(namespace, created_ms);
    CREATE INDEX memories_by_origin ON memories(origin) WHERE origin IS NOT NULL;
    CREATE INDEX memories_by_url ON memories(url) WHERE url IS NOT NULL;
    CREATE UNIQUE INDEX memories_page_once ON memories(namespace, content_hash)
        WHERE content_hash IS NOT NULL;
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        text, tags, title,
        content = 'memories', content_rowid = 'rowid',
        tokenize = 'trigram'
    );
    CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, text, tags, title)
        VALUES (new.rowid, new.text, new.tags, new.title);
    END;
    CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, text, tags, title)
        VALUES ('delete', old.rowid, old.text, old.tags, old.title);
    END;

    CREATE TABLE site_entries (
        entry_id         TEXT PRIMARY KEY,
        profile          TEXT NOT NULL,
        origin           TEXT NOT NULL,
        page_type        TEXT NOT NULL,
        body             BLOB NOT NULL,
        last_verified_ms INTEGER NOT NULL,
        UNIQUE (profile, origin, page_type)
    );
    CREATE INDEX site_entries_by_verified ON site_entries(profile, last_verified_ms);
    "#,
    // migration 2: the index of two-character non-ASCII words (issue 14 "Recall").
    grams::MIGRATION,
];

/// Reader connections (searches run in parallel with each other and with the writer).
const READERS: usize = 2;
/// Most bytes of the database a reader maps (`PRAGMA mmap_size`): 1 GiB, ≈ 2M memories.
const READER_MMAP: i64 = 1 << 30;

/// The database: one writer, [`READERS`] readers. Called only from inside
/// `snowpea_common::db::blocking` (the rpc handlers' `blocking`), never on an async worker
/// thread.
#[derive(Debug)]
pub struct Store {
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
}

impl Store {
    /// Opens (creating and migrating) the database at `path`.
    pub fn open(path: &Path) -> anyhow::Result<Store> {
        let mut writer = snowpea_common::db::open(path, MIGRATIONS)?;
        check_trigram(&writer)?;
        let indexed = grams::backfill(&mut writer)?;
        if indexed > 0 {
            tracing::info!(
                memories = indexed,
                "indexed two-character words of older memories"
            );
        }
        let mut readers = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            let c = Connection::open(path)?;
            snowpea_common::db::configure(&c)?;
            // Readers map the database instead of copying each page into their own cache:
            // a 100k-memory search touches hundreds of pages, and `pread` into the 2 MB
            // page cache was a sixth of its time (docs/PERFORMANCE.md "Recall"). The
            // mapping is file-backed and shared with the kernel's page cache: it adds no
            // anonymous memory, and untouched pages cost nothing.
            c.pragma_update(None, "mmap_size", READER_MMAP)?;
            readers.push(Mutex::new(c));
        }
        Ok(Store {
            writer: Mutex::new(writer),
            readers,
            next_reader: AtomicUsize::new(0),
        })
    }

    /// Runs `f` in a write transaction and commits it before returning (the durability
    /// rule: nothing is acknowledged before its commit). An `Err` rolls back.
    pub fn write<T>(&self, f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self
            .writer
            .lock()
            .map_err(|_| Error::Internal("writer lock poisoned".into()))?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Runs `f` on a reader connection.
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        // Prefer an idle reader; otherwise wait for the one round-robin picked.
        for i in 0..self.readers.len() {
            if let Ok(c) = self.readers[(start + i) % self.readers.len()].try_lock() {
                return f(&c);
            }
        }
        let c = self.readers[start % self.readers.len()]
            .lock()
            .map_err(|_| Error::Internal("reader lock poisoned".into()))?;
        f(&c)
    }
}

/// Fails clearly when the linked SQLite lacks the FTS5 trigram tokenizer (SQLite ≥ 3.34).
fn check_trigram(conn: &Connection) -> anyhow::Result<()> {
    conn.execute_batch(
        "CREATE VIRTUAL TABLE temp.trigram_probe USING fts5(x, tokenize='trigram'); \
         DROP TABLE temp.trigram_probe;",
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "SQLite {} lacks the FTS5 trigram tokenizer: {e}",
            rusqlite::version()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_and_trigram_exists() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(&t.path().join("memory.db")).unwrap();
        let v: i64 = s
            .read(|c| Ok(c.pragma_query_value(None, "user_version", |r| r.get(0))?))
            .unwrap();
        assert_eq!(v as usize, MIGRATIONS.len());
        // Reopening an up-to-date database is a no-op.
        drop(s);
        Store::open(&t.path().join("memory.db")).unwrap();
    }
}
