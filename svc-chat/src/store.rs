//! `$SNOWPEA_HOME/state/chat.db`: bindings, platform cursors, conversations.
//!
//! * `bindings` — one row per `gateway.bind` (source `manual`) or automatic binding made by
//!   `gateway.sync` from `settings.gateway.<platform>` (source `auto`).
//! * `cursors` — per platform connection (platform + credentialsRef): Telegram's last handled
//!   `update_id`, Discord's session id / sequence / resume URL. Written only after the inbound
//!   message's turn was accepted by svc-session (or the message was handled without a turn), so
//!   a kill -9 never loses a message and never answers one twice.
//! * `seen` — keys of inbound items already handled where the platform has no ordered cursor
//!   (Slack envelope ids, Discord message ids), kept for [`SEEN_KEEP_MS`].
//! * `conversations` — the current session of each (binding, channel) pair and the highest
//!   `session.event` seq whose effects (the answer sent back) are done, so a restarted service
//!   resumes from there and sends every missed `message.done` exactly once.
//! * `conversation_sessions` — every session a conversation used (`/sessions`, `/resume`).
//!
//! Every method is synchronous; callers reach it only through `snowpea_common::db::blocking`.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

/// How long a handled Slack envelope / Discord message key is remembered, in ms (a day; the
/// platforms redeliver within minutes).
pub const SEEN_KEEP_MS: i64 = 24 * 3600 * 1000;

/// Schema migrations, in order (see `snowpea_common::db::migrate`).
pub const MIGRATIONS: &[&str] = &[r#"
CREATE TABLE bindings (
    binding_id TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    credentials_ref TEXT NOT NULL,
    target TEXT NOT NULL,
    channel_id TEXT,
    user_id TEXT,
    source TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE cursors (
    platform TEXT NOT NULL,
    credentials_ref TEXT NOT NULL,
    cursor TEXT NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (platform, credentials_ref)
);
CREATE TABLE seen (
    platform TEXT NOT NULL,
    credentials_ref TEXT NOT NULL,
    key TEXT NOT NULL,
    seen_ms INTEGER NOT NULL,
    PRIMARY KEY (platform, credentials_ref, key)
);
CREATE TABLE conversations (
    binding_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    session_id TEXT NOT NULL,
    last_seq INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (binding_id, channel)
);
CREATE INDEX conversations_session ON conversations(session_id);
CREATE TABLE conversation_sessions (
    binding_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    session_id TEXT NOT NULL,
    workdir TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (binding_id, channel, session_id)
);
"#];

/// One stored binding.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingRow {
    /// `gw-` + 12 hex.
    pub binding_id: String,
    /// `telegram`, `discord` or `slack`.
    pub platform: String,
    /// Credential name (never the secret itself).
    pub credentials_ref: String,
    /// The validated target object (`{"agent": …}`, `{"session": …}`, `{"new_session": …}`).
    pub target: Value,
    /// Chat the binding is limited to.
    pub channel_id: Option<String>,
    /// Platform user allowed to answer approvals.
    pub user_id: Option<String>,
    /// `manual` (gateway.bind) or `auto` (gateway.sync).
    pub source: String,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
}

/// The current session of a (binding, channel) pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationRow {
    /// The binding.
    pub binding_id: String,
    /// Platform channel id.
    pub channel: String,
    /// The session the channel talks to now.
    pub session_id: String,
    /// Highest session seq already handled (answers sent).
    pub last_seq: u64,
}

/// The chat database.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
}

impl Store {
    /// Opens (creating and migrating) the database at `path` (0600, WAL).
    pub fn open(path: &Path) -> anyhow::Result<Store> {
        Ok(Store {
            conn: Mutex::new(snowpea_common::db::open(path, MIGRATIONS)?),
        })
    }

    /// A private in-memory database (unit tests).
    pub fn open_in_memory() -> anyhow::Result<Store> {
        let mut conn = Connection::open_in_memory()?;
        snowpea_common::db::migrate(&mut conn, MIGRATIONS)?;
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Inserts a binding.
    pub fn insert_binding(&self, b: &BindingRow) -> anyhow::Result<()> {
        self.conn().execute(
            "INSERT INTO bindings (binding_id, platform, credentials_ref, target, channel_id, \
             user_id, source, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                b.binding_id,
                b.platform,
                b.credentials_ref,
                b.target.to_string(),
                b.channel_id,
                b.user_id,
                b.source,
                b.created_ms
            ],
        )?;
        Ok(())
    }

    /// Every binding, oldest first.
    pub fn bindings(&self) -> anyhow::Result<Vec<BindingRow>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT binding_id, platform, credentials_ref, target, channel_id, user_id, source, \
             created_ms FROM bindings ORDER BY created_ms, binding_id",
        )?;
        let rows = stmt.query_map([], |r| {
            let target: String = r.get(3)?;
            Ok(BindingRow {
                binding_id: r.get(0)?,
                platform: r.get(1)?,
                credentials_ref: r.get(2)?,
                target: serde_json::from_str(&target).unwrap_or(Value::Null),
                channel_id: r.get(4)?,
                user_id: r.get(5)?,
                source: r.get(6)?,
                created_ms: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Deletes a binding and its conversations; false when there was none.
    pub fn delete_binding(&self, binding_id: &str) -> anyhow::Result<bool> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let n = tx.execute("DELETE FROM bindings WHERE binding_id = ?1", [binding_id])?;
        tx.execute(
            "DELETE FROM conversations WHERE binding_id = ?1",
            [binding_id],
        )?;
        tx.execute(
            "DELETE FROM conversation_sessions WHERE binding_id = ?1",
            [binding_id],
        )?;
        tx.commit()?;
        Ok(n > 0)
    }

    /// The stored cursor of a platform connection.
    pub fn cursor(&self, platform: &str, credentials_ref: &str) -> anyhow::Result<Option<Value>> {
        let text: Option<String> = self
            .conn()
            .query_row(
                "SELECT cursor FROM cursors WHERE platform = ?1 AND credentials_ref = ?2",
                [platform, credentials_ref],
                |r| r.get(0),
            )
            .optional()?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// Commits the cursor of a platform connection.
    pub fn set_cursor(
        &self,
        platform: &str,
        credentials_ref: &str,
        cursor: &Value,
    ) -> anyhow::Result<()> {
        self.conn().execute(
            "INSERT INTO cursors (platform, credentials_ref, cursor, updated_ms) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (platform, credentials_ref) \
             DO UPDATE SET cursor = excluded.cursor, updated_ms = excluded.updated_ms",
            params![
                platform,
                credentials_ref,
                cursor.to_string(),
                snowpea_common::time::now_ms()
            ],
        )?;
        Ok(())
    }

    /// Whether an inbound key was handled already.
    pub fn seen(&self, platform: &str, credentials_ref: &str, key: &str) -> anyhow::Result<bool> {
        Ok(self
            .conn()
            .query_row(
                "SELECT 1 FROM seen WHERE platform = ?1 AND credentials_ref = ?2 AND key = ?3",
                [platform, credentials_ref, key],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Records an inbound key as handled (and forgets keys older than [`SEEN_KEEP_MS`]).
    pub fn mark_seen(
        &self,
        platform: &str,
        credentials_ref: &str,
        key: &str,
    ) -> anyhow::Result<()> {
        let now = snowpea_common::time::now_ms();
        let conn = self.conn();
        conn.execute(
            "INSERT OR IGNORE INTO seen (platform, credentials_ref, key, seen_ms) \
             VALUES (?1, ?2, ?3, ?4)",
            params![platform, credentials_ref, key, now],
        )?;
        conn.execute("DELETE FROM seen WHERE seen_ms < ?1", [now - SEEN_KEEP_MS])?;
        Ok(())
    }

    /// The conversation of (binding, channel).
    pub fn conversation(
        &self,
        binding_id: &str,
        channel: &str,
    ) -> anyhow::Result<Option<ConversationRow>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT binding_id, channel, session_id, last_seq FROM conversations \
                 WHERE binding_id = ?1 AND channel = ?2",
                [binding_id, channel],
                conversation_row,
            )
            .optional()?)
    }

    /// Every conversation.
    pub fn conversations(&self) -> anyhow::Result<Vec<ConversationRow>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT binding_id, channel, session_id, last_seq FROM conversations \
             ORDER BY binding_id, channel",
        )?;
        let rows = stmt.query_map([], conversation_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Points (binding, channel) at `session_id` (a new or resumed session), remembering it in
    /// the conversation's history. `last_seq` is where its events are handled up to.
    pub fn set_conversation(
        &self,
        binding_id: &str,
        channel: &str,
        session_id: &str,
        workdir: &str,
        last_seq: u64,
    ) -> anyhow::Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO conversations (binding_id, channel, session_id, last_seq) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (binding_id, channel) \
             DO UPDATE SET session_id = excluded.session_id, last_seq = excluded.last_seq",
            params![binding_id, channel, session_id, last_seq as i64],
        )?;
        tx.execute(
            "INSERT OR IGNORE INTO conversation_sessions \
             (binding_id, channel, session_id, workdir, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                binding_id,
                channel,
                session_id,
                workdir,
                snowpea_common::time::now_ms()
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Forgets the current session of (binding, channel) (the next message starts a new one).
    pub fn delete_conversation(&self, binding_id: &str, channel: &str) -> anyhow::Result<()> {
        self.conn().execute(
            "DELETE FROM conversations WHERE binding_id = ?1 AND channel = ?2",
            [binding_id, channel],
        )?;
        Ok(())
    }

    /// Forgets every conversation on `session_id` (it was deleted): the next message of those
    /// chats starts a new session. Returns the (binding, channel) pairs that used it.
    pub fn forget_session(&self, session_id: &str) -> anyhow::Result<Vec<(String, String)>> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let pairs = {
            let mut stmt =
                tx.prepare("SELECT binding_id, channel FROM conversations WHERE session_id = ?1")?;
            let rows = stmt.query_map([session_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        tx.execute(
            "DELETE FROM conversations WHERE session_id = ?1",
            [session_id],
        )?;
        tx.execute(
            "DELETE FROM conversation_sessions WHERE session_id = ?1",
            [session_id],
        )?;
        tx.commit()?;
        Ok(pairs)
    }

    /// Records that the events of `session_id` up to `seq` are handled (never moves back).
    pub fn advance(&self, session_id: &str, seq: u64) -> anyhow::Result<()> {
        self.conn().execute(
            "UPDATE conversations SET last_seq = ?2 WHERE session_id = ?1 AND last_seq < ?2",
            params![session_id, seq as i64],
        )?;
        Ok(())
    }

    /// The sessions a conversation used, newest first: (session id, workdir).
    pub fn conversation_sessions(
        &self,
        binding_id: &str,
        channel: &str,
    ) -> anyhow::Result<Vec<(String, String)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT session_id, workdir FROM conversation_sessions \
             WHERE binding_id = ?1 AND channel = ?2 ORDER BY created_ms DESC, rowid DESC",
        )?;
        let rows = stmt.query_map([binding_id, channel], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

fn conversation_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ConversationRow> {
    Ok(ConversationRow {
        binding_id: r.get(0)?,
        channel: r.get(1)?,
        session_id: r.get(2)?,
        last_seq: r.get::<_, i64>(3)?.max(0) as u64,
    })
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
