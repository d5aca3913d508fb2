//! The table of live WebSocket connections, by connection id: notification fan-out,
//! server→client requests and `SyncConnections` snapshots read it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::connection::Connection;

/// Live connections.
#[derive(Debug, Default)]
pub struct Registry {
    map: RwLock<HashMap<String, Arc<Connection>>>,
}

impl Registry {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Connection>>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Connection>>> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a connection.
    pub fn insert(&self, conn: Arc<Connection>) {
        self.write().insert(conn.id.clone(), conn);
    }

    /// Removes a connection.
    pub fn remove(&self, id: &str) {
        self.write().remove(id);
    }

    /// The connection with this id.
    pub fn get(&self, id: &str) -> Option<Arc<Connection>> {
        self.read().get(id).cloned()
    }

    /// Calls `f` for every authenticated connection (under the read lock: `f` must not block).
    pub fn for_each_authenticated(&self, mut f: impl FnMut(&Arc<Connection>)) {
        for c in self.read().values() {
            if c.peer().is_some() {
                f(c);
            }
        }
    }

    /// Asks every connection to close with `code` and `reason`.
    pub fn close_all(&self, code: u16, reason: &str) {
        for c in self.read().values() {
            c.close(code, reason);
        }
    }
}
