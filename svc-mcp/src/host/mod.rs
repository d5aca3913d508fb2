//! The MCP host (issue 6 "Hosting"): every configured server, one supervisor task each
//! ([`server`]), started concurrently so a slow one never delays the others.
//!
//! Servers are keyed by `(root, name)`: global, settings and plugin servers have no root and
//! run once for every project; project servers run per workdir once that workdir has been
//! seen (`mcp.list`, `ListTools`, …). [`Host::reconcile`] compares the files with what runs
//! and starts, restarts (changed entry) or stops (removed entry) servers — `mcp.add`,
//! `mcp.update`, `mcp.remove`, `mcp.reload` and a periodic check of the config files' mtimes
//! all go through it. Stopping always reaps the child's whole process group ([`guard`]).
//! A server that hangs is caught by [`server::Liveness`] (MCP `ping`; interval and timeout
//! from `SNOWPEA_MCP_PING_INTERVAL_MS` / `SNOWPEA_MCP_PING_TIMEOUT_MS`, default 30 s / 10 s),
//! marked `error` (not responding), killed and restarted like one that exited.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;
use snowpea_proto::mcp::v1::McpChangedNotification;

use crate::config::{self, Declared, Scope};
use crate::host::connect::SpawnContext;
use crate::host::server::{Liveness, Notifier, ServerHandle, State, Status};

pub mod connect;
pub mod guard;
pub mod server;
pub mod sse;

/// Identity of a hosted server: the project root (project scope only) and the name.
pub type ServerKey = (Option<PathBuf>, String);

/// How often the config files' mtimes are compared with the last reconcile.
const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Every hosted server.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

struct Inner {
    home: Home,
    hub: Arc<BusHub>,
    guard_exe: PathBuf,
    daemon_dir: PathBuf,
    liveness: Liveness,
    servers: Mutex<BTreeMap<ServerKey, Arc<ServerHandle>>>,
    roots: Mutex<RecentRoots>,
    /// The last `mcp.changed` of every server, so an identical one is not sent twice (a
    /// disabled server's stop and its replacement's first state are both `stopped`).
    published: Arc<Mutex<std::collections::HashMap<ServerKey, McpChangedNotification>>>,
    reconcile: tokio::sync::Mutex<Option<Vec<Option<SystemTime>>>>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("home", &self.inner.home)
            .finish()
    }
}

impl Host {
    /// A host for `home` publishing through `hub`; stdio servers run behind `guard_exe`
    /// (this binary in guard mode). Hangs are detected with [`Liveness::from_env`].
    pub fn new(home: Home, hub: Arc<BusHub>, guard_exe: PathBuf, daemon_dir: PathBuf) -> Host {
        Host {
            inner: Arc::new(Inner {
                home,
                hub,
                guard_exe,
                daemon_dir,
                liveness: Liveness::from_env(),
                servers: Mutex::new(BTreeMap::new()),
                roots: Mutex::new(RecentRoots::default()),
                published: Arc::default(),
                reconcile: tokio::sync::Mutex::new(None),
            }),
        }
    }

    /// The Snowpea home.
    pub fn home(&self) -> &Home {
        &self.inner.home
    }

    /// The daemon's working directory (the default project).
    pub fn daemon_dir(&self) -> &Path {
        &self.inner.daemon_dir
    }

    /// Starts the servers of the global scopes and the daemon's project, and the watcher that
    /// reconciles when a config file changes on disk.
    pub async fn start(&self) {
        // Canonical, like every workdir of a call (so it is one project, not two).
        let dir = crate::sessions::canonical(&self.inner.daemon_dir);
        self.inner.roots.lock().expect("roots lock").pin(dir);
        self.reconcile().await;
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(WATCH_INTERVAL).await;
                let Some(inner) = weak.upgrade() else { return };
                let host = Host { inner };
                let stamps = host.stamps();
                let changed = host.inner.reconcile.lock().await.as_ref() != Some(&stamps);
                if changed {
                    tracing::info!("MCP configuration changed on disk; reconciling");
                    host.reconcile().await;
                }
            }
        });
    }

    /// Makes sure the project servers of `workdir` (an existing, canonical folder) are
    /// hosted. At most [`MAX_ROOTS`] projects besides the daemon's are remembered; the least
    /// recently used one beyond that has its servers stopped.
    pub async fn ensure_root(&self, workdir: &Path) {
        let new = self.inner.roots.lock().expect("roots lock").touch(workdir);
        if new {
            self.reconcile().await;
        }
    }

    /// The project directories whose servers are hosted.
    pub fn roots(&self) -> Vec<PathBuf> {
        self.inner
            .roots
            .lock()
            .expect("roots lock")
            .iter()
            .cloned()
            .collect()
    }

    fn config_files(&self) -> Vec<PathBuf> {
        let mut files = vec![
            config::global_path(&self.inner.home),
            self.inner.home.settings_path(),
        ];
        if let Ok(dir) = std::fs::read_dir(config::plugins_dir(&self.inner.home)) {
            let mut p: Vec<PathBuf> = dir
                .filter_map(|e| e.ok())
                .map(|e| e.path().join(".mcp.json"))
                .collect();
            p.sort();
            files.extend(p);
        }
        for r in self.inner.roots.lock().expect("roots lock").iter() {
            files.push(config::project_path(r));
            files.push(r.join(".snowpea").join("settings.json"));
        }
        files
    }

    fn stamps(&self) -> Vec<Option<SystemTime>> {
        self.config_files()
            .iter()
            .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
            .collect()
    }

    /// What the files declare, keyed like the running servers.
    fn desired(&self) -> BTreeMap<ServerKey, Declared> {
        let mut out = BTreeMap::new();
        for d in config::discover_global(&self.inner.home) {
            out.insert((None, d.name.clone()), d);
        }
        let roots: Vec<PathBuf> = self
            .inner
            .roots
            .lock()
            .expect("roots lock")
            .iter()
            .cloned()
            .collect();
        for r in roots {
            if config::is_global_file(&self.inner.home, &r) {
                continue;
            }
            for d in config::discover_project(&self.inner.home, &r) {
                out.insert((Some(r.clone()), d.name.clone()), d);
            }
        }
        out
    }

    /// Applies a change of the `mcp` settings (`mcp.servers`, `mcp.trustedProjects`,
    /// `mcp.permissions`, `mcp.enabled`) the settings owner announces
    /// (`ServiceBus.SettingsChanged`) without a restart: the servers are reconciled with the
    /// files at once ([`Host::reconcile`]), as `mcp.reload` does.
    pub fn follow_settings(&self) -> tokio::task::JoinHandle<()> {
        use tokio::sync::broadcast::error::RecvError;
        let mut changes = self.inner.hub.settings_changes();
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                match changes.recv().await {
                    Ok(c) if !c.keys.iter().any(|k| k == "mcp") => continue,
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                }
                me.reconcile().await;
                tracing::info!("mcp settings applied");
            }
        })
    }

    /// Brings the running servers in line with the files: new entries start, changed ones
    /// restart, removed ones stop (their processes reaped) and are announced `removed`.
    pub async fn reconcile(&self) {
        let mut stamp_guard = self.inner.reconcile.lock().await;
        let stamps = self.stamps();
        let desired = self.desired();
        let roots = self.roots();
        let mut to_stop: Vec<(Arc<ServerHandle>, bool)> = Vec::new();
        let mut to_start: Vec<Declared> = Vec::new();
        {
            let mut servers = self.inner.servers.lock().expect("servers lock");
            let keys: Vec<ServerKey> = servers.keys().cloned().collect();
            for k in keys {
                match desired.get(&k) {
                    Some(d) if servers[&k].declared == *d => {}
                    Some(d) => {
                        let old = servers.remove(&k).expect("present");
                        to_stop.push((old, false));
                        to_start.push(d.clone());
                    }
                    None => {
                        // Gone from its file (`removed`), or its project is no longer hosted
                        // (forgotten by the bound on projects: just stopped).
                        let removed = k.0.as_ref().is_none_or(|r| roots.contains(r));
                        let old = servers.remove(&k).expect("present");
                        to_stop.push((old, removed));
                    }
                }
            }
            for (k, d) in &desired {
                if !servers.contains_key(k)
                    && !to_start.iter().any(|s| s.root == k.0 && s.name == k.1)
                {
                    to_start.push(d.clone());
                }
            }
        }
        futures::future::join_all(to_stop.iter().map(|(h, _)| h.stop())).await;
        for (h, removed) in &to_stop {
            if *removed {
                self.publish_removed(&h.declared);
            }
        }
        let mut servers = self.inner.servers.lock().expect("servers lock");
        for d in to_start {
            let key = (d.root.clone(), d.name.clone());
            let ctx = self.spawn_context(&d);
            let handle = ServerHandle::spawn(d, ctx, self.notifier());
            servers.insert(key, handle);
        }
        *stamp_guard = Some(stamps);
    }

    /// The spawn settings of a server.
    pub fn spawn_context(&self, d: &Declared) -> SpawnContext {
        SpawnContext {
            guard_exe: self.inner.guard_exe.clone(),
            owner: self.inner.home.root().display().to_string(),
            base_dir: d
                .root
                .clone()
                .unwrap_or_else(|| self.inner.daemon_dir.clone()),
            liveness: self.inner.liveness,
        }
    }

    fn notifier(&self) -> Notifier {
        let hub = self.inner.hub.clone();
        let published = self.inner.published.clone();
        Arc::new(move |d: &Declared, s: &Status| {
            let params = McpChangedNotification {
                name: d.name.clone(),
                scope: d.scope.as_str().to_owned(),
                state: s.state.as_str().to_owned(),
                tool_count: s.tools.len() as i64,
                error: s.error.clone(),
                removed: false,
            };
            publish(&hub, &published, d, params);
        })
    }

    fn publish_removed(&self, d: &Declared) {
        let params = McpChangedNotification {
            name: d.name.clone(),
            scope: d.scope.as_str().to_owned(),
            state: "stopped".to_owned(),
            removed: true,
            tool_count: 0,
            error: None,
        };
        publish(&self.inner.hub, &self.inner.published, d, params);
    }

    /// The servers visible from `workdir` (project entries win over global ones), by name.
    pub fn view(&self, workdir: Option<&Path>) -> Vec<Arc<ServerHandle>> {
        let servers = self.inner.servers.lock().expect("servers lock");
        let mut by_name: BTreeMap<String, Arc<ServerHandle>> = BTreeMap::new();
        for ((root, name), h) in servers.iter() {
            match root {
                None => {
                    by_name.entry(name.clone()).or_insert_with(|| h.clone());
                }
                Some(r) if Some(r.as_path()) == workdir => {
                    by_name.insert(name.clone(), h.clone());
                }
                Some(_) => {}
            }
        }
        // A project entry may have been inserted before the global one of the same name.
        for ((root, name), h) in servers.iter() {
            if root.as_deref() == workdir && root.is_some() {
                by_name.insert(name.clone(), h.clone());
            }
        }
        by_name.into_values().collect()
    }

    /// The server `name` visible from `workdir`.
    pub fn get(&self, workdir: Option<&Path>, name: &str) -> Option<Arc<ServerHandle>> {
        self.view(workdir)
            .into_iter()
            .find(|h| h.declared.name == name)
    }

    /// Waits up to `wait` until no server visible from `workdir` is starting.
    pub async fn settle(&self, workdir: Option<&Path>, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        for h in self.view(workdir) {
            let mut rx = h.subscribe();
            let _ = tokio::time::timeout_at(deadline, rx.wait_for(|s| s.state != State::Starting))
                .await;
        }
    }

    /// Stops every server (svc-mcp shutdown) and waits until their processes are gone.
    pub async fn shutdown(&self) {
        let all: Vec<Arc<ServerHandle>> = {
            let mut servers = self.inner.servers.lock().expect("servers lock");
            std::mem::take(&mut *servers).into_values().collect()
        };
        futures::future::join_all(all.iter().map(|h| h.stop())).await;
    }

    /// The declared scope of a server visible from `workdir`, if any.
    pub fn scope_of(&self, workdir: Option<&Path>, name: &str) -> Option<Scope> {
        self.get(workdir, name).map(|h| h.declared.scope)
    }
}

/// Sends `mcp.changed` with `params` for `d`, unless it is exactly the last one sent for
/// that server.
fn publish(
    hub: &BusHub,
    published: &Mutex<std::collections::HashMap<ServerKey, McpChangedNotification>>,
    d: &Declared,
    params: McpChangedNotification,
) {
    let key = (d.root.clone(), d.name.clone());
    let mut last = published.lock().expect("published lock");
    if last.get(&key) == Some(&params) {
        return;
    }
    hub.publish(&params, Vec::new());
    last.insert(key, params);
}

/// Most projects hosted at once besides the daemon's own (least recently used forgotten).
pub const MAX_ROOTS: usize = 256;

/// The project folders whose servers are hosted: the daemon's own (pinned) and the
/// [`MAX_ROOTS`] most recently used others.
#[derive(Debug, Default)]
pub struct RecentRoots {
    pinned: Option<PathBuf>,
    recent: VecDeque<PathBuf>,
}

impl RecentRoots {
    /// Pins `dir` (never forgotten).
    pub fn pin(&mut self, dir: PathBuf) {
        self.recent.retain(|r| *r != dir);
        self.pinned = Some(dir);
    }

    /// Marks `dir` as just used; true when it was not remembered before. Forgets the least
    /// recently used folder beyond [`MAX_ROOTS`].
    pub fn touch(&mut self, dir: &Path) -> bool {
        if self.pinned.as_deref() == Some(dir) {
            return false;
        }
        if let Some(i) = self.recent.iter().position(|r| r == dir) {
            let r = self.recent.remove(i).expect("present");
            self.recent.push_back(r);
            return false;
        }
        self.recent.push_back(dir.to_path_buf());
        while self.recent.len() > MAX_ROOTS {
            self.recent.pop_front();
        }
        true
    }

    /// Every remembered folder, the pinned one first.
    pub fn iter(&self) -> impl Iterator<Item = &PathBuf> {
        self.pinned.iter().chain(self.recent.iter())
    }

    /// How many folders are remembered.
    pub fn len(&self) -> usize {
        self.pinned.iter().count() + self.recent.len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_bounded_least_recently_used_first_and_the_pinned_one_stays() {
        let mut r = RecentRoots::default();
        r.pin(PathBuf::from("/daemon"));
        assert!(!r.touch(Path::new("/daemon")));
        for i in 0..MAX_ROOTS {
            assert!(r.touch(&PathBuf::from(format!("/p/{i}"))));
        }
        assert_eq!(r.len(), MAX_ROOTS + 1);
        // Using /p/0 again makes /p/1 the least recently used.
        assert!(!r.touch(Path::new("/p/0")));
        assert!(r.touch(Path::new("/p/new")));
        assert_eq!(r.len(), MAX_ROOTS + 1, "bounded");
        let all: Vec<&PathBuf> = r.iter().collect();
        assert_eq!(all[0], Path::new("/daemon"), "pinned never forgotten");
        assert!(all.iter().any(|p| *p == Path::new("/p/0")));
        assert!(
            !all.iter().any(|p| *p == Path::new("/p/1")),
            "LRU forgotten"
        );
        assert!(r.touch(Path::new("/p/1")), "forgotten, so new again");
    }
}
