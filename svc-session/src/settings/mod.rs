//! `Settings`: the one owner of `$SNOWPEA_HOME/settings.json` and of a project's
//! `<workdir>/.snowpea/settings.json` — `settings.get`, `settings.set`, the
//! `system.reloadSettings` the gateway forwards (`SettingsInternalService.Reload`) and the
//! `settings.changed` notification (protocol 1.25.0; reference behaviour §2). No tables.
//!
//! * Reads are lenient: a missing file is `{}`; a file that is not a JSON object gives the
//!   defaults and ONE warning naming the file (repeated only when the problem changes), and
//!   it is never overwritten — `settings.set` on it answers `unavailable` until the user
//!   fixes it.
//! * `settings.get` shows the defaults ([`schema::defaults`]) under the file's values
//!   (global scope) or the project file as it is (project scope), every secret masked `"***"`
//!   (`snowpea_common::settings::masked`). It always shows the file as it is on disk (other
//!   writers such as `provider.configure` use `update_file` directly); the services learn
//!   of a hand edit only through `system.reloadSettings`.
//! * `settings.set` deep-merges the patch (objects merge, lists and scalars replace, `null`
//!   deletes), validates the sections it touched ([`schema::validate`]) and writes atomically
//!   with mode 0600, keeping unknown keys (`snowpea_common::settings::update_file`). A `"***"`
//!   in a secret field or a validation failure refuses the whole patch with `invalid_params`
//!   naming the field (`params.patch.agent.busy`) and leaves the file byte-for-byte unchanged.
//! * A change of the global document ([`Settings::set`], [`Settings::reload`],
//!   `setup.applyDefaults`) publishes `settings.changed{scope:"global", keys}` to clients
//!   and tells every service ([`notify`]), which re-reads the file and applies the keys it
//!   uses without a restart (docs/ARCHITECTURE.md "Settings"). A project change does not.

pub mod notify;
pub mod schema;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde_json::Value;
use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;
use snowpea_common::settings as common;
use snowpea_proto::rpc::v1::SettingsChange;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::wkt;

use snowpea_session_error::{Error, Result};

/// Keys `settings.set` refuses (`invalid_params` naming the key): they make the daemon run
/// a program (`system.update` runs `updates.command`) or choose where an upgrade comes
/// from, so a client holding the token must not be able to set them without a person
/// editing `settings.json` by hand.
pub const FILE_ONLY_KEYS: &[&str] = &["updates.command", "updates.indexUrl"];

/// Which document a call reads or writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `$SNOWPEA_HOME/settings.json`.
    Global,
    /// `<workdir>/.snowpea/settings.json`.
    Project(PathBuf),
}

/// What the owner last read or wrote of the global file.
#[derive(Debug, Default)]
struct Held {
    /// `(mtime, size)` of the file when read (`None`: missing or unreadable).
    stamp: Option<(SystemTime, u64)>,
    /// The document (`{}` when missing or corrupt).
    doc: Value,
    /// The last problem warned about (one warning per distinct problem).
    warned: Option<String>,
}

/// Result of [`Settings::reload`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// The file differed from what was held and was adopted.
    pub reloaded: bool,
    /// Top-level keys that changed.
    pub changed_keys: Vec<String>,
}

/// The settings component (see the module docs).
#[derive(Debug)]
pub struct Settings {
    home: Home,
    hub: Arc<BusHub>,
    held: Mutex<Held>,
    /// Serialises writers and reloads of this process (the file lock of `update_file`
    /// covers only the write itself).
    write: tokio::sync::Mutex<()>,
}

impl Settings {
    /// The owner of `home`'s settings; reads the global file once (warning if it is corrupt).
    pub fn new(home: Home, hub: Arc<BusHub>) -> Self {
        let s = Settings {
            home,
            hub,
            held: Mutex::new(Held::default()),
            write: tokio::sync::Mutex::new(()),
        };
        let (stamp, doc) = s.read_global();
        let mut held = s.held.lock().unwrap_or_else(|e| e.into_inner());
        held.stamp = stamp;
        held.doc = doc;
        drop(held);
        s
    }

    /// The home whose settings this owns.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// The global document as it is on disk (unmasked, without defaults; `{}` when the file
    /// is missing or corrupt — warned once). Another writer of the file (`provider.*`, the
    /// allowlist, a hand edit) is seen at once; only what the services were told waits for
    /// [`Settings::reload`]. A `stat` per call when nothing changed.
    pub fn global(&self) -> Value {
        let path = self.home.settings_path();
        let now = stamp(&path);
        {
            let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            if now == held.stamp {
                return held.doc.clone();
            }
        }
        common::load_file(&path).unwrap_or_else(|e| {
            self.warn_once(&e);
            Value::Object(Default::default())
        })
    }

    /// What the services were last told (the document [`Settings::reload`] compares with).
    fn announced(&self) -> Value {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .doc
            .clone()
    }

    /// `settings.get{scope, workdir}`.
    pub async fn get(&self, p: pb::SettingsGetParams) -> Result<pb::SettingsGetResult> {
        let scope = scope_of(&p.scope, p.workdir.as_deref())?;
        let shown = match &scope {
            Scope::Global => effective(&self.global()),
            Scope::Project(dir) => {
                let path = project_path(dir);
                common::load_file(&path).unwrap_or_else(|e| {
                    tracing::warn!(error = %format!("{e:#}"), "project settings unreadable; showing none (the file is left as it is)");
                    Value::Object(Default::default())
                })
            }
        };
        Ok(pb::SettingsGetResult {
            settings: Some(wkt::to_struct(&common::masked(&shown))),
        })
    }

    /// `settings.set{scope, workdir, patch}`.
    pub async fn set(&self, p: pb::SettingsSetParams) -> Result<pb::SettingsSetResult> {
        let scope = scope_of(&p.scope, p.workdir.as_deref())?;
        let patch = p
            .patch
            .as_ref()
            .map(wkt::from_struct)
            .ok_or_else(|| Error::invalid("params.patch", "is required"))?;
        let doc = self.patch(&scope, &patch).await?;
        let shown = match scope {
            Scope::Global => effective(&doc),
            Scope::Project(_) => doc,
        };
        Ok(pb::SettingsSetResult {
            settings: Some(wkt::to_struct(&common::masked(&shown))),
        })
    }

    /// Deep-merges `patch` into the document of `scope`, validates and writes it (see the
    /// module docs); a global change is announced. Returns the document written.
    pub async fn patch(&self, scope: &Scope, patch: &Value) -> Result<Value> {
        let Value::Object(fields) = patch else {
            return Err(Error::invalid("params.patch", "must be an object"));
        };
        if let Some(path) = common::masked_echo(patch) {
            return Err(Error::invalid(
                &format!("params.patch.{path}"),
                "is the mask \"***\" that settings.get shows in place of a secret; send the real value, or leave the field out to keep it",
            ));
        }
        if let Some(key) = FILE_ONLY_KEYS.iter().find(|k| {
            patch
                .pointer(&format!("/{}", k.replace('.', "/")))
                .is_some()
        }) {
            return Err(Error::invalid(
                &format!("params.patch.{key}"),
                "names a program the daemon runs or where it fetches one from; it can only be set by editing settings.json by hand",
            ));
        }
        let touched: Vec<String> = fields.keys().cloned().collect();
        let path = match scope {
            Scope::Global => self.home.settings_path(),
            Scope::Project(dir) => project_path(dir),
        };
        let _w = self.write.lock().await;
        // The read, merge, fsync and rename run on the blocking pool, never on an async worker.
        let owned_patch = patch.clone();
        let outcome = common::update_file_blocking(path.clone(), move |doc| {
            common::deep_merge(doc, &owned_patch);
            let keys: Vec<&str> = touched.iter().map(String::as_str).collect();
            schema::validate(doc, &keys).map_err(anyhow::Error::new)?;
            Ok(((), doc.clone()))
        })
        .await;
        let ((), after) = match outcome {
            Ok(v) => v,
            Err(e) => return Err(write_error(e, &path)),
        };
        if *scope == Scope::Global {
            // Against what the services were last told, so a hand edit not yet reloaded is
            // announced too.
            let before = self.announced();
            let stamp = stamp(&path);
            {
                let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
                held.stamp = stamp;
                held.doc = after.clone();
                held.warned = None;
            }
            let keys = common::changed_keys(&before, &after);
            self.announce(keys).await;
        }
        Ok(after)
    }

    /// `system.reloadSettings` (through `SettingsInternalService.Reload`): re-reads the
    /// global file; unchanged (same stamp, or same content) → `reloaded: false`. A file that
    /// became unreadable or corrupt is not adopted (one warning; `reloaded: false`): the
    /// services keep what they hold until it is fixed.
    pub async fn reload(&self) -> Result<Reloaded> {
        let _w = self.write.lock().await;
        let path = self.home.settings_path();
        let now = stamp(&path);
        let held_doc = {
            let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            if now == held.stamp {
                return Ok(Reloaded {
                    reloaded: false,
                    changed_keys: vec![],
                });
            }
            held.doc.clone()
        };
        let doc = match common::load_file(&path) {
            Ok(doc) => doc,
            Err(e) => {
                self.warn_once(&e);
                return Ok(Reloaded {
                    reloaded: false,
                    changed_keys: vec![],
                });
            }
        };
        let keys = common::changed_keys(&held_doc, &doc);
        {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            held.stamp = now;
            held.doc = doc;
            held.warned = None;
        }
        if keys.is_empty() {
            return Ok(Reloaded {
                reloaded: false,
                changed_keys: vec![],
            });
        }
        self.announce(keys.clone()).await;
        Ok(Reloaded {
            reloaded: true,
            changed_keys: keys,
        })
    }

    /// The silent check before `session.create` and `session.prompt` (reference §2): one
    /// `stat` of the global file; when its `(mtime, size)` differs from what was last read,
    /// the file is reloaded exactly as `system.reloadSettings` does (the changed keys
    /// announced with `settings.changed`, every service told). Never fails the call it
    /// precedes: an unreadable file is warned about once and not adopted.
    pub async fn reload_if_changed(&self) {
        let now = stamp(&self.home.settings_path());
        let same = self.held.lock().unwrap_or_else(|e| e.into_inner()).stamp == now;
        if same {
            return;
        }
        match self.reload().await {
            Ok(r) if r.reloaded => {
                tracing::info!(keys = ?r.changed_keys, "settings file changed on disk; reloaded");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "silent settings reload failed"),
        }
    }

    /// Publishes `settings.changed{scope:"global", keys}` and tells every service (waiting
    /// at most [`notify::CALL_TIMEOUT`] for each); nothing when `keys` is empty.
    async fn announce(&self, keys: Vec<String>) {
        if keys.is_empty() {
            return;
        }
        self.hub.publish(
            &pb::SettingsChangedNotification {
                keys: keys.clone(),
                scope: "global".into(),
            },
            vec![],
        );
        let change = SettingsChange {
            scope: "global".into(),
            keys,
        };
        self.hub.settings_changed(change.clone());
        notify::tell_services(&self.home, &change).await;
    }

    fn read_global(&self) -> (Option<(SystemTime, u64)>, Value) {
        let path = self.home.settings_path();
        let stamp = stamp(&path);
        match common::load_file(&path) {
            Ok(doc) => (stamp, doc),
            Err(e) => {
                self.warn_once(&e);
                (stamp, Value::Object(Default::default()))
            }
        }
    }

    fn warn_once(&self, e: &anyhow::Error) {
        let problem = format!("{e:#}");
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.warned.as_deref() != Some(problem.as_str()) {
            tracing::warn!(problem = %problem, "settings file is not a valid JSON object; using the defaults until it is fixed (the file is never overwritten)");
            held.warned = Some(problem);
        }
    }
}

/// The defaults with `doc` over them (a `null` in `doc` keeps the default).
pub fn effective(doc: &Value) -> Value {
    let mut out = schema::defaults();
    overlay(&mut out, doc);
    out
}

fn overlay(base: &mut Value, top: &Value) {
    match (base, top) {
        (Value::Object(b), Value::Object(t)) => {
            for (k, v) in t {
                match b.get_mut(k) {
                    _ if v.is_null() => {}
                    Some(existing) => overlay(existing, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, t) => *b = t.clone(),
    }
}

/// `<workdir>/.snowpea/settings.json`.
pub fn project_path(workdir: &Path) -> PathBuf {
    workdir.join(".snowpea").join("settings.json")
}

/// `(mtime, size)` of a file, `None` when it cannot be read.
fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// The scope of a call: `"global"` (or unset) or `"project"` with an absolute, existing
/// `workdir` (`params.workdir` names the problem).
pub fn scope_of(scope: &str, workdir: Option<&str>) -> Result<Scope> {
    match scope {
        "" | "global" => Ok(Scope::Global),
        "project" => {
            let w = workdir
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .ok_or_else(|| {
                    Error::invalid("params.workdir", "is required when scope is \"project\"")
                })?;
            let dir = PathBuf::from(w);
            if !dir.is_absolute() {
                return Err(Error::invalid("params.workdir", "must be an absolute path"));
            }
            if !dir.is_dir() {
                return Err(Error::invalid(
                    "params.workdir",
                    format!("{w} is not a directory"),
                ));
            }
            Ok(Scope::Project(dir))
        }
        other => Err(Error::invalid(
            "params.scope",
            format!("{other:?} is not \"global\" or \"project\""),
        )),
    }
}

/// Maps a failed `update_file`: a validation failure is `invalid_params` naming
/// `params.patch.<field>`; a file that cannot be parsed is `unavailable` naming it (it is
/// never overwritten); anything else is internal.
fn write_error(e: anyhow::Error, path: &Path) -> Error {
    if let Some(bad) = e.downcast_ref::<schema::Invalid>() {
        return Error::invalid(&format!("params.patch.{}", bad.path), &bad.message);
    }
    if path.exists() && common::load_file(path).is_err() {
        return Error::Unavailable(format!(
            "{e:#}; fix or remove the file first — Snowpea never overwrites a settings file it cannot read"
        ));
    }
    Error::Internal(e)
}

impl std::fmt::Display for schema::Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for schema::Invalid {}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
