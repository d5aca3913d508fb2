//! The [`Lsp`] component: language servers started lazily, one per (server, root), on the
//! daemon host (`lsp.status`, `lsp.catalog`, diagnostics after edits, the `lsp_*` tools).
//!
//! A server starts on the first edit (or `lsp_*` call) of a matching file; `initialize` is
//! bounded by [`client::INIT_TIMEOUT`]. A server that crashes (or never answers
//! `initialize`) is restarted once; the second failure marks it `broken` and it is not
//! started again for that root. A server unused for [`IDLE_STOP`] is stopped (`stopped`),
//! and starts again on the next use.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lsp_types::{Diagnostic, DiagnosticSeverity};
use serde_json::Value;
use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use super::catalog::{self, Catalog, ServerDef};
use super::client::{self, Client};
use snowpea_session_error::Result;

/// Idle time after which a server is stopped (reference: 600 s).
pub const IDLE_STOP: Duration = Duration::from_secs(600);
/// Longest wait for a server's `publishDiagnostics` after an edit.
pub const DIAGNOSTICS_WAIT: Duration = Duration::from_secs(5);
/// Most diagnostic lines appended to a tool result per file.
pub const MAX_LINES: usize = 20;

/// Timing knobs (tests shorten them).
#[derive(Debug, Clone, Copy)]
pub struct LspTimes {
    /// Idle stop.
    pub idle: Duration,
    /// `initialize` timeout.
    pub init: Duration,
    /// Wait for diagnostics after an edit.
    pub diagnostics: Duration,
}

impl Default for LspTimes {
    fn default() -> Self {
        LspTimes {
            idle: IDLE_STOP,
            init: client::INIT_TIMEOUT,
            diagnostics: DIAGNOSTICS_WAIT,
        }
    }
}

/// `lsp.status` state of one (server, root).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Spawned, `initialize` not answered yet.
    Starting,
    /// Answering.
    Ready,
    /// Failed twice; not started again.
    Broken,
    /// Stopped after being idle (starts again on use).
    Stopped,
}

impl State {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Ready => "ready",
            State::Broken => "broken",
            State::Stopped => "stopped",
        }
    }
}

struct SlotState {
    state: State,
    client: Option<Arc<Client>>,
    failures: u32,
    last_used: Instant,
    language_id: String,
}

struct Slot {
    def: ServerDef,
    program: PathBuf,
    root: PathBuf,
    start: tokio::sync::Mutex<()>,
    st: Mutex<SlotState>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What an edit's diagnostics say (`lsp.diagnostics` event + the tool result block).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Diagnostics of every severity.
    pub count: usize,
    /// Errors among them.
    pub errors: usize,
    /// Warnings among them.
    pub warnings: usize,
    /// The block appended to the tool result (errors and warnings, at most 20 lines).
    pub text: String,
}

/// The language servers of the process.
pub struct Lsp {
    home: Home,
    mark: Option<String>,
    times: LspTimes,
    slots: Mutex<HashMap<(String, PathBuf), Arc<Slot>>>,
}

impl std::fmt::Debug for Lsp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lsp").finish_non_exhaustive()
    }
}

/// The language id of `path` for `def` (by extension where the server has several).
fn language_for(def: &ServerDef, path: &Path) -> String {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default();
    let by_ext = match ext.as_str() {
        "ts" | "mts" | "cts" => Some("typescript"),
        "tsx" => Some("typescriptreact"),
        "js" | "mjs" | "cjs" => Some("javascript"),
        "jsx" => Some("javascriptreact"),
        "c" | "h" => Some("c"),
        "cpp" | "cc" | "cxx" | "hpp" | "hh" | "hxx" | "c++" | "h++" => Some("cpp"),
        _ => None,
    };
    match by_ext {
        Some(l) if def.language_ids.iter().any(|x| x == l) => l.to_owned(),
        _ => def
            .language_ids
            .first()
            .cloned()
            .unwrap_or_else(|| ext.clone()),
    }
}

impl Lsp {
    /// The component for `home`; servers' processes carry the orphan `mark`.
    pub fn new(home: Home, mark: Option<String>, times: LspTimes) -> Arc<Lsp> {
        let lsp = Arc::new(Lsp {
            home,
            mark,
            times,
            slots: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&lsp);
        let tick = (times.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(tick).await;
                let Some(lsp) = weak.upgrade() else { return };
                lsp.stop_idle().await;
            }
        });
        lsp
    }

    /// The catalog in force for `workdir`.
    pub fn catalog_for(&self, workdir: Option<&Path>) -> Catalog {
        let settings =
            snowpea_common::settings::load_effective(&self.home, workdir).unwrap_or(Value::Null);
        Catalog::from_settings(&settings)
    }

    /// True when LSP is on for `workdir` (`lsp.enabled`, default true).
    pub fn enabled(&self, workdir: &Path) -> bool {
        self.catalog_for(Some(workdir)).enabled
    }

    /// `lsp.catalog`: every registered server with its languages, extensions, whether it is
    /// installable (no `lsp.install` in this build: false), its install hint and `disabled`.
    pub fn catalog(&self) -> Result<pb::LspCatalogResult> {
        let cat = self.catalog_for(None);
        Ok(pb::LspCatalogResult {
            servers: cat
                .servers
                .into_iter()
                .map(|s| pb::lsp_catalog_result::Server {
                    disabled: s.disabled || !cat.enabled,
                    extensions: s.extensions,
                    id: s.id,
                    install_hint: s.install_hint,
                    installable: false,
                    language_ids: s.language_ids,
                })
                .collect(),
        })
    }

    /// `lsp.status`: every (server, root) started so far with its state and pid.
    pub fn status(&self) -> Result<pb::LspStatusResult> {
        let mut rows: Vec<_> = lock(&self.slots)
            .values()
            .map(|slot| {
                let st = lock(&slot.st);
                pb::lsp_status_result::Server {
                    id: slot.def.id.clone(),
                    language_id: st.language_id.clone(),
                    pid: st
                        .client
                        .as_ref()
                        .filter(|_| matches!(st.state, State::Starting | State::Ready))
                        .map(|c| i64::from(c.pid())),
                    root: slot.root.display().to_string(),
                    state: st.state.as_str().into(),
                }
            })
            .collect();
        rows.sort_by(|a, b| (&a.id, &a.root).cmp(&(&b.id, &b.root)));
        Ok(pb::LspStatusResult { servers: rows })
    }

    /// The running clients for `path` (starting them as needed), with their language id.
    pub async fn clients_for(
        self: &Arc<Self>,
        workdir: &Path,
        path: &Path,
    ) -> Vec<(Arc<Client>, String)> {
        let cat = self.catalog_for(Some(workdir));
        let mut out = Vec::new();
        for def in cat.for_file(path) {
            let Some(program) = def.command.first().and_then(|p| catalog::which(p, None)) else {
                continue; // Not installed: never an error.
            };
            let root = catalog::root_for(def, path, workdir);
            let slot = {
                let mut slots = lock(&self.slots);
                slots
                    .entry((def.id.clone(), root.clone()))
                    .or_insert_with(|| {
                        Arc::new(Slot {
                            def: def.clone(),
                            program,
                            root: root.clone(),
                            start: tokio::sync::Mutex::new(()),
                            st: Mutex::new(SlotState {
                                state: State::Stopped,
                                client: None,
                                failures: 0,
                                last_used: Instant::now(),
                                language_id: language_for(def, path),
                            }),
                        })
                    })
                    .clone()
            };
            if let Some(c) = self.ensure(&slot).await {
                out.push((c, language_for(def, path)));
            }
        }
        out
    }

    /// The slot's live client, starting it (restart once after a failure, then `broken`).
    fn ensure<'a>(
        self: &'a Arc<Self>,
        slot: &'a Arc<Slot>,
    ) -> futures::future::BoxFuture<'a, Option<Arc<Client>>> {
        Box::pin(async move {
            let _start = slot.start.lock().await;
            loop {
                {
                    let mut st = lock(&slot.st);
                    st.last_used = Instant::now();
                    match (&st.state, &st.client) {
                        (State::Broken, _) => return None,
                        (State::Ready, Some(c)) if !c.has_exited() => return Some(c.clone()),
                        (State::Ready, Some(_)) => {
                            // It crashed and its watcher has not seen it yet: count it here.
                            st.failures += 1;
                            st.client = None;
                            if st.failures >= 2 {
                                st.state = State::Broken;
                                return None;
                            }
                        }
                        _ => {}
                    }
                    st.state = State::Starting;
                }
                match self.start(slot).await {
                    Ok(c) => return Some(c),
                    Err(why) => {
                        let mut st = lock(&slot.st);
                        st.failures += 1;
                        st.client = None;
                        tracing::warn!(server = %slot.def.id, root = %slot.root.display(), error = %why, failures = st.failures, "language server failed to start");
                        if st.failures >= 2 {
                            st.state = State::Broken;
                            return None;
                        }
                    }
                }
            }
        })
    }

    async fn start(self: &Arc<Self>, slot: &Arc<Slot>) -> std::result::Result<Arc<Client>, String> {
        let client = Client::spawn(
            &slot.program,
            &slot.def.command[1..],
            &slot.root,
            self.mark.as_deref(),
        )
        .map_err(|e| format!("cannot start {}: {e}", slot.program.display()))?;
        let client = Arc::new(client);
        lock(&slot.st).client = Some(client.clone());
        if let Err(e) = client.initialize(&slot.root, self.times.init).await {
            client.kill();
            return Err(e);
        }
        {
            let mut st = lock(&slot.st);
            st.state = State::Ready;
            st.client = Some(client.clone());
        }
        tracing::info!(server = %slot.def.id, root = %slot.root.display(), pid = client.pid(), "language server ready");
        // Watch for a crash: restart once, then `broken`.
        let watched = client.clone();
        let slot2 = slot.clone();
        let lsp = Arc::downgrade(self);
        tokio::spawn(async move {
            watched.wait_exit().await;
            let crashed = {
                let mut st = lock(&slot2.st);
                let current = st.client.as_ref().is_some_and(|c| Arc::ptr_eq(c, &watched));
                if current && st.state == State::Ready {
                    st.failures += 1;
                    st.client = None;
                    st.state = if st.failures >= 2 {
                        State::Broken
                    } else {
                        State::Stopped
                    };
                    st.state == State::Stopped
                } else {
                    false
                }
            };
            tracing::warn!(server = %slot2.def.id, root = %slot2.root.display(), "language server exited");
            if let (true, Some(lsp)) = (crashed, lsp.upgrade()) {
                // Restart once now, so the status shows it answering again.
                lsp.ensure(&slot2).await;
            }
        });
        Ok(client)
    }

    async fn stop_idle(&self) {
        let slots: Vec<_> = lock(&self.slots).values().cloned().collect();
        for slot in slots {
            let client = {
                let mut st = lock(&slot.st);
                if st.state == State::Ready && st.last_used.elapsed() >= self.times.idle {
                    st.state = State::Stopped;
                    st.client.take()
                } else {
                    None
                }
            };
            if let Some(c) = client {
                tracing::info!(server = %slot.def.id, root = %slot.root.display(), "language server stopped after being idle");
                c.stop().await;
            }
        }
    }

    /// After a write or edit of `path` (absolute; its new `text`) in `workdir`: the file's
    /// diagnostics from every matching server, or `None` when no server serves it.
    pub async fn after_write(
        self: &Arc<Self>,
        workdir: &Path,
        path: &Path,
        display: &str,
        text: &str,
    ) -> Option<Report> {
        let clients = self.clients_for(workdir, path).await;
        if clients.is_empty() {
            return None;
        }
        let wait = self
            .catalog_for(Some(workdir))
            .diagnostics_wait
            .unwrap_or(self.times.diagnostics);
        let mut all: Vec<Diagnostic> = Vec::new();
        for (c, lang) in clients {
            let since = c.sync(path, &lang, text);
            if let Some(d) = c.diagnostics(path, since, wait).await {
                all.extend(d);
            }
        }
        Some(report(display, &all))
    }

    /// Stops every server (service shutdown).
    pub async fn shutdown(&self) {
        let slots: Vec<_> = lock(&self.slots).drain().map(|(_, s)| s).collect();
        for slot in slots {
            let c = lock(&slot.st).client.take();
            if let Some(c) = c {
                c.stop().await;
            }
        }
    }
}

/// The report of `diags` for the file shown as `display`.
pub fn report(display: &str, diags: &[Diagnostic]) -> Report {
    let sev = |d: &Diagnostic| d.severity.unwrap_or(DiagnosticSeverity::ERROR);
    let errors = diags
        .iter()
        .filter(|d| sev(d) == DiagnosticSeverity::ERROR)
        .count();
    let warnings = diags
        .iter()
        .filter(|d| sev(d) == DiagnosticSeverity::WARNING)
        .count();
    let mut shown: Vec<&Diagnostic> = diags
        .iter()
        .filter(|d| {
            matches!(
                sev(d),
                DiagnosticSeverity::ERROR | DiagnosticSeverity::WARNING
            )
        })
        .collect();
    shown.sort_by_key(|d| {
        (
            sev(d) != DiagnosticSeverity::ERROR,
            d.range.start.line,
            d.range.start.character,
        )
    });
    let mut text = if errors + warnings == 0 {
        format!("\n\nLSP diagnostics for {display}: no errors or warnings.")
    } else {
        format!("\n\nLSP diagnostics for {display} ({errors} errors, {warnings} warnings):")
    };
    for d in shown.iter().take(MAX_LINES) {
        let label = if sev(d) == DiagnosticSeverity::ERROR {
            "ERROR"
        } else {
            "WARN"
        };
        let source = d
            .source
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        let msg = d.message.replace('\n', " ");
        text.push_str(&format!(
            "\n{label} [{}:{}] {msg}{source}",
            d.range.start.line + 1,
            d.range.start.character + 1
        ));
    }
    if shown.len() > MAX_LINES {
        text.push_str(&format!("\n… {} more", shown.len() - MAX_LINES));
    }
    Report {
        count: diags.len(),
        errors,
        warnings,
        text,
    }
}
