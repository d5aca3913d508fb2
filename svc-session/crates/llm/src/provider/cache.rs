//! The models cache of `provider.models` ([`ModelCache`]): live listings kept in memory and
//! in `$SNOWPEA_HOME/models-cache.json` (0600), fresh for [`CACHE_TTL`], the last good one
//! kept after. `models.rs` reads and fills it; the `Providers` component owns it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// How long a live listing is served from the cache without asking again.
pub const CACHE_TTL: Duration = Duration::from_secs(600);

/// One vendor's listing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    /// Model ids, in the order the picker shows them.
    pub models: Vec<String>,
    /// Which models take images, when known.
    pub vision: HashMap<String, bool>,
}

/// One vendor's cached listing, as kept in memory and in the cache file.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cached {
    /// When it was fetched, Unix seconds.
    fetched_at: i64,
    /// The endpoint it came from (a changed `baseUrl` does not reuse it).
    base_url: String,
    models: Vec<String>,
    #[serde(default)]
    vision: HashMap<String, bool>,
}

impl Cached {
    fn age(&self) -> Duration {
        let now = jiff::Timestamp::now().as_second();
        Duration::from_secs(now.saturating_sub(self.fetched_at).max(0) as u64)
    }
}

/// The cache file's document: `{"version": 1, "vendors": {vendor: Cached}}`.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct CacheFile {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    vendors: HashMap<String, Cached>,
}

/// The last good live listing per vendor: in memory, and persisted to
/// `$SNOWPEA_HOME/models-cache.json` (mode 0600, temp file + fsync + rename) so a restarted
/// svc-session serves a listing younger than [`CACHE_TTL`] without asking the vendor again,
/// and still has the last good one when the vendor is unreachable. The file holds model ids
/// only, never a key. A missing or unreadable file is an empty cache (a warning, never an
/// error); it is read once, at the first use.
#[derive(Debug)]
pub struct ModelCache {
    path: PathBuf,
    entries: Mutex<Option<HashMap<String, Cached>>>,
    /// Serialises writers of the file (the temp name is per process).
    write: std::sync::Arc<Mutex<()>>,
}

impl ModelCache {
    /// The cache persisted at `path` (`$SNOWPEA_HOME/models-cache.json`).
    pub fn new(path: PathBuf) -> Self {
        ModelCache {
            path,
            entries: Mutex::new(None),
            write: Default::default(),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Cached>) -> T) -> T {
        let mut guard = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let map = guard.get_or_insert_with(|| load_cache(&self.path));
        f(map)
    }

    pub(super) fn get(&self, vendor: &str, base_url: &str) -> Option<(Duration, Listing)> {
        self.with(|map| {
            map.get(vendor).filter(|c| c.base_url == base_url).map(|c| {
                (
                    c.age(),
                    Listing {
                        models: c.models.clone(),
                        vision: c.vision.clone(),
                    },
                )
            })
        })
    }

    pub(super) async fn put(&self, vendor: &str, base_url: &str, listing: Listing) {
        let snapshot = self.with(|map| {
            map.insert(
                vendor.to_string(),
                Cached {
                    fetched_at: jiff::Timestamp::now().as_second(),
                    base_url: base_url.to_string(),
                    models: listing.models,
                    vision: listing.vision,
                },
            );
            map.clone()
        });
        self.persist(snapshot).await;
    }

    /// Drops `vendor`'s listing (its configuration changed), in memory and in the file.
    pub async fn forget(&self, vendor: &str) {
        let snapshot = self.with(|map| map.remove(vendor).map(|_| map.clone()));
        if let Some(snapshot) = snapshot {
            self.persist(snapshot).await;
        }
    }

    /// Writes `vendors` to the file on the blocking pool (a failure is logged: the cache
    /// is only an optimisation).
    async fn persist(&self, vendors: HashMap<String, Cached>) {
        let path = self.path.clone();
        let lock = self.write.clone();
        let written = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            let _w = lock.lock().unwrap_or_else(|e| e.into_inner());
            let mut bytes = serde_json::to_vec_pretty(&CacheFile {
                version: 1,
                vendors,
            })?;
            bytes.push(b'\n');
            snowpea_common::home::write_private(&path, &bytes)
        })
        .await
        .map_err(anyhow::Error::new)
        .and_then(|r| r);
        if let Err(e) = written {
            tracing::warn!(error = %format!("{e:#}"), "cannot store the model list cache");
        }
    }
}

/// Reads the cache file; missing → empty, unreadable → empty with a warning.
fn load_cache(path: &Path) -> HashMap<String, Cached> {
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<CacheFile>(&bytes) {
            Ok(f) => f.vendors,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "model list cache unreadable; starting empty");
                HashMap::new()
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "model list cache unreadable; starting empty");
            HashMap::new()
        }
    }
}
