//! The durable allowlist (issue 17; spec `permission.allowlist.add/list/remove`, and the
//! `session`/`project`/`always` scopes of `approval.respond`). Owns the `allowlist` table.
//!
//! Where entries live:
//! * `session` — the `allowlist` table of svc-session's database; they die with the session
//!   (a closed session's entries are no longer listed or used, and are deleted);
//! * `project` — key `allowlist` of `<workdir>/.snowpea/settings.json`;
//! * `always` — key `allowlist` of `$SNOWPEA_HOME/settings.json`.
//!
//! Settings files are rewritten with `snowpea_common::settings::update_file` (atomic,
//! owner-only, other keys kept). An entry is `{id: "al-…", pattern, createdAt}`; fields a
//! host wrote beside them (`origin`, `hostToolsFrom`, `reasonCode`, `tool`) are kept and
//! listed. Pattern syntax and matching: [`pattern`].
//!
//! A match only turns the mode matrix's "ask" into "allow" ([`Allowlist::allows`]): never a
//! deny, never in plan mode, never with `denyExec` (a deny already), never for a `config`- or
//! `secret`-tagged call, never for a call touching paths outside the workdir.

pub mod pattern;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use snowpea_common::context::CallContext;
use snowpea_common::home::Home;
use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;

use crate::events::EventLog;
use crate::permissions::{Mode, Verdict};
use crate::session::{Registry, Session};
use crate::store::{self, Store};
use crate::tools::{Permission, ToolPlan};
use pattern::Pattern;
use snowpea_session_error::{Error, Result};

/// Where an entry is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// svc-session's database, for one session.
    Session,
    /// The project's settings file.
    Project,
    /// The global settings file.
    Always,
}

impl Scope {
    /// Parses the protocol's spelling (`session`, `project`, `always`).
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "session" => Some(Scope::Session),
            "project" => Some(Scope::Project),
            "always" => Some(Scope::Always),
            _ => None,
        }
    }

    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::Project => "project",
            Scope::Always => "always",
        }
    }
}

/// One entry as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// `al-…`.
    pub id: String,
    /// The pattern as given.
    pub pattern: String,
    /// Where it is stored.
    pub scope: Scope,
    /// When it was added.
    pub created_at: Option<String>,
    /// Other fields of a settings-file entry (kept as written).
    pub extra: serde_json::Map<String, Value>,
}

impl Entry {
    fn to_proto(&self) -> pb::permission_allowlist_list_result::Pattern {
        let s = |k: &str| self.extra.get(k).and_then(Value::as_str).map(str::to_owned);
        let tool = s("tool").or_else(|| match self.pattern.strip_prefix("tool:") {
            Some(name) => Some(name.to_owned()),
            None => Some("shell".to_owned()),
        });
        pb::permission_allowlist_list_result::Pattern {
            created_at: self.created_at.clone(),
            host_tools_from: s("hostToolsFrom"),
            origin: s("origin"),
            pattern: self.pattern.clone(),
            pattern_id: self.id.clone(),
            reason_code: s("reasonCode"),
            scope: self.scope.as_str().to_owned(),
            tool,
        }
    }
}

/// The settings file of a scope stored on disk.
fn file_of(home: &Home, scope: Scope, workdir: Option<&Path>) -> Option<PathBuf> {
    match scope {
        Scope::Session => None,
        Scope::Project => workdir.map(|w| w.join(".snowpea").join("settings.json")),
        Scope::Always => Some(home.settings_path()),
    }
}

/// Entries of a settings document's `allowlist` (malformed ones are skipped).
fn entries_of(doc: &Value, scope: Scope) -> Vec<Entry> {
    doc.get("allowlist")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|e| {
                    let o = e.as_object()?;
                    let id = o.get("id")?.as_str()?.to_owned();
                    let pattern = o.get("pattern")?.as_str()?.to_owned();
                    let mut extra = o.clone();
                    for k in ["id", "pattern", "createdAt"] {
                        extra.remove(k);
                    }
                    Some(Entry {
                        id,
                        pattern,
                        scope,
                        created_at: o
                            .get("createdAt")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        extra,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

fn read_file(path: &Path, scope: Scope) -> Vec<Entry> {
    match snowpea_common::settings::load_file(path) {
        Ok(doc) => entries_of(&doc, scope),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %format!("{e:#}"), "allowlist: settings file unreadable; its entries are not used");
            vec![]
        }
    }
}

/// Adds `pattern` to a settings file; a duplicate returns the existing id.
fn add_to_file(path: &Path, pattern: &str) -> anyhow::Result<String> {
    snowpea_common::settings::update_file(path, |doc| {
        let obj = doc
            .as_object_mut()
            .ok_or_else(|| anyhow::anyhow!("settings must be a JSON object"))?;
        let list = obj.entry("allowlist").or_insert_with(|| json!([]));
        if !list.is_array() {
            anyhow::bail!("{}: `allowlist` is not a list", path.display());
        }
        let list = list.as_array_mut().expect("checked");
        if let Some(id) = list.iter().find_map(|e| {
            (e.get("pattern").and_then(Value::as_str) == Some(pattern))
                .then(|| e.get("id").and_then(Value::as_str).map(str::to_owned))
                .flatten()
        }) {
            return Ok(id);
        }
        let id = snowpea_common::ids::new_id("al");
        list.push(json!({"id": id, "pattern": pattern, "createdAt": now_iso()}));
        Ok(id)
    })
}

/// Removes entry `id` from a settings file (only when `owner` matches its `hostToolsFrom`,
/// if given); true when it was there.
fn remove_from_file(path: &Path, id: &str, owner: Option<&str>) -> anyhow::Result<bool> {
    if !path.exists() {
        return Ok(false);
    }
    let present = read_file(path, Scope::Always).iter().any(|e| {
        e.id == id
            && owner.is_none_or(|o| e.extra.get("hostToolsFrom").and_then(Value::as_str) == Some(o))
    });
    if !present {
        return Ok(false);
    }
    snowpea_common::settings::update_file(path, |doc| {
        if let Some(list) = doc.get_mut("allowlist").and_then(Value::as_array_mut) {
            let before = list.len();
            list.retain(|e| e.get("id").and_then(Value::as_str) != Some(id));
            return Ok(list.len() < before);
        }
        Ok(false)
    })
}

/// The `permission.allowlist.*` component.
pub struct Allowlist {
    home: Home,
    log: EventLog,
    store: Store,
    sessions: Registry,
}

impl std::fmt::Debug for Allowlist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allowlist").finish_non_exhaustive()
    }
}

async fn off_thread<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> Result<T> {
    snowpea_common::db::blocking(what, f)
        .await?
        .map_err(Error::Internal)
}

impl Allowlist {
    /// The component: global settings of `home`, the `allowlist` table written through
    /// `log` and read through `store`, sessions of `sessions`.
    pub fn new(home: Home, log: EventLog, store: Store, sessions: Registry) -> Self {
        Allowlist {
            home,
            log,
            store,
            sessions,
        }
    }

    /// The caller's session: its connection's most recently active origin session, else
    /// the only open session.
    fn caller_session(&self, ctx: &CallContext) -> Option<std::sync::Arc<Session>> {
        let all = self.sessions.all();
        let mine = ctx.connection_id.as_deref().and_then(|c| {
            all.iter()
                .filter(|s| s.origin().as_deref() == Some(c))
                .max_by_key(|s| {
                    let r = s.row();
                    r.last_activity_at.unwrap_or(r.created_at)
                })
                .cloned()
        });
        mine.or_else(|| (all.len() == 1).then(|| all[0].clone()))
    }

    /// `params.workdir` (absolute, an existing folder) or the caller's session's workdir.
    fn workdir(&self, ctx: &CallContext, given: Option<&str>) -> Result<Option<PathBuf>> {
        match given.filter(|w| !w.is_empty()) {
            Some(w) => {
                let p = Path::new(w);
                if !p.is_absolute() {
                    return Err(Error::invalid("params.workdir", "must be an absolute path"));
                }
                let c = std::fs::canonicalize(p)
                    .ok()
                    .filter(|c| c.is_dir())
                    .ok_or_else(|| {
                        Error::invalid("params.workdir", format!("{w:?} is not an existing folder"))
                    })?;
                Ok(Some(c))
            }
            None => Ok(self.caller_session(ctx).map(|s| s.workdir())),
        }
    }

    /// `permission.allowlist.add`: validates the pattern and stores it in its scope
    /// (default `project`); a duplicate returns the existing id.
    pub async fn add(
        &self,
        ctx: &CallContext,
        p: pb::PermissionAllowlistAddParams,
    ) -> Result<String> {
        let pattern = p.pattern.trim().to_owned();
        Pattern::parse(&pattern).map_err(|e| Error::invalid("params.pattern", e))?;
        let scope = match p.scope.as_str() {
            "" => Scope::Project,
            s => Scope::parse(s).ok_or_else(|| {
                Error::invalid("params.scope", "must be session, project or always")
            })?,
        };
        match scope {
            Scope::Session => {
                let session = self.caller_session(ctx).ok_or_else(|| {
                    Error::invalid(
                        "params.scope",
                        "a session entry needs a session of this connection (create or attach one)",
                    )
                })?;
                Ok(self.add_session(&session.id, &pattern).await?)
            }
            Scope::Project => {
                let workdir = self.workdir(ctx, p.workdir.as_deref())?.ok_or_else(|| {
                    Error::invalid("params.workdir", "a project entry needs a workdir (none given and no session of this connection)")
                })?;
                self.add_file(scope, Some(&workdir), pattern).await
            }
            Scope::Always => self.add_file(scope, None, pattern).await,
        }
    }

    /// `permission.allowlist.add` on behalf of `session` (the `/allow` and `/allowlist add`
    /// commands): validates `pattern` (`invalid_params` on `pattern`) and stores it in
    /// `scope` — the session's own entries, its workdir's project file, or the global file;
    /// a duplicate returns the existing id.
    pub async fn add_for(&self, session: &Session, scope: Scope, pattern: &str) -> Result<String> {
        let pattern = pattern.trim().to_owned();
        Pattern::parse(&pattern).map_err(|e| Error::invalid("pattern", e))?;
        match scope {
            Scope::Session => self.add_session(&session.id, &pattern).await,
            Scope::Project => {
                self.add_file(scope, Some(&session.workdir()), pattern)
                    .await
            }
            Scope::Always => self.add_file(scope, None, pattern).await,
        }
    }

    async fn add_session(&self, session_id: &str, pattern: &str) -> Result<String> {
        let row = store::allowlist::Row {
            pattern_id: snowpea_common::ids::new_id("al"),
            session_id: session_id.to_owned(),
            pattern: pattern.to_owned(),
            created_at: now_iso(),
        };
        // The id of a duplicate is the stored one: read back in the same transaction.
        let (tx, rx) = std::sync::mpsc::channel();
        self.log
            .write(move |c| {
                let _ = tx.send(store::allowlist::insert(c, &row)?);
                Ok(())
            })
            .await
            .map_err(Error::Internal)?;
        rx.try_recv()
            .map_err(|_| Error::Internal(anyhow::anyhow!("allowlist insert gave no id")))
    }

    async fn add_file(
        &self,
        scope: Scope,
        workdir: Option<&Path>,
        pattern: String,
    ) -> Result<String> {
        let path = file_of(&self.home, scope, workdir).expect("a file scope");
        let id = off_thread("permission.allowlist.add", move || {
            add_to_file(&path, &pattern)
        })
        .await?;
        tracing::info!(scope = scope.as_str(), pattern_id = %id, "allowlist entry stored");
        Ok(id)
    }

    /// Session entries of live sessions (of `session_id` when given); entries of sessions
    /// that are gone are deleted.
    async fn session_entries(&self, session_id: Option<&str>) -> Result<Vec<(String, Entry)>> {
        let sid = session_id.map(str::to_owned);
        let rows = self
            .store
            .read("allowlist.session", move |c| {
                store::allowlist::list(c, sid.as_deref())
            })
            .await?;
        let mut out = Vec::new();
        for r in rows {
            if self.sessions.get(&r.session_id).is_err() {
                let sid = r.session_id.clone();
                self.log
                    .write_later(move |c| store::allowlist::remove_session(c, &sid).map(|_| ()));
                continue;
            }
            out.push((
                r.session_id,
                Entry {
                    id: r.pattern_id,
                    pattern: r.pattern,
                    scope: Scope::Session,
                    created_at: Some(r.created_at),
                    extra: Default::default(),
                },
            ));
        }
        Ok(out)
    }

    /// `permission.allowlist.list`: entries of the live sessions (of the workdir, when one
    /// is known), of the project and the global ones; `hostToolsFrom` keeps only that
    /// browser profile's global entries (and those of no profile).
    pub async fn list(
        &self,
        ctx: &CallContext,
        p: pb::PermissionAllowlistListParams,
    ) -> Result<pb::PermissionAllowlistListResult> {
        let scope = match p.scope.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => Some(Scope::parse(s).ok_or_else(|| {
                Error::invalid("params.scope", "must be session, project or always")
            })?),
        };
        let workdir = self.workdir(ctx, p.workdir.as_deref())?;
        let mut out: Vec<Entry> = Vec::new();
        if scope.is_none_or(|s| s == Scope::Session) {
            for (sid, e) in self.session_entries(None).await? {
                let same_project = match (&workdir, self.sessions.get(&sid)) {
                    (Some(w), Ok(s)) => s.workdir() == *w,
                    _ => true,
                };
                if same_project {
                    out.push(e);
                }
            }
        }
        let owner = p.host_tools_from.filter(|h| !h.is_empty());
        let home = self.home.clone();
        let files = off_thread("permission.allowlist.list", move || {
            let mut v = Vec::new();
            if scope.is_none_or(|s| s == Scope::Project) {
                if let Some(path) = file_of(&home, Scope::Project, workdir.as_deref()) {
                    v.extend(read_file(&path, Scope::Project));
                }
            }
            if scope.is_none_or(|s| s == Scope::Always) {
                v.extend(
                    read_file(&home.settings_path(), Scope::Always)
                        .into_iter()
                        .filter(|e| {
                            owner.as_deref().is_none_or(|o| {
                                e.extra
                                    .get("hostToolsFrom")
                                    .and_then(Value::as_str)
                                    .is_none_or(|h| h == o)
                            })
                        }),
                );
            }
            Ok(v)
        })
        .await?;
        out.extend(files);
        Ok(pb::PermissionAllowlistListResult {
            patterns: out.iter().map(Entry::to_proto).collect(),
        })
    }

    /// `permission.allowlist.remove`: deletes the entry from wherever it is stored (a
    /// session's, the project's of `workdir`, the global file); unknown → `not_found`.
    pub async fn remove(
        &self,
        ctx: &CallContext,
        p: pb::PermissionAllowlistRemoveParams,
    ) -> Result<()> {
        let id = p.pattern_id.trim().to_owned();
        if id.is_empty() {
            return Err(Error::invalid("params.patternId", "must not be empty"));
        }
        let rid = id.clone();
        if self
            .store
            .read("allowlist.get", move |c| store::allowlist::get(c, &rid))
            .await?
            .is_some()
        {
            let rid = id.clone();
            self.log
                .write(move |c| store::allowlist::remove(c, &rid).map(|_| ()))
                .await
                .map_err(Error::Internal)?;
            return Ok(());
        }
        let workdir = self.workdir(ctx, p.workdir.as_deref())?;
        let owner = p.host_tools_from.filter(|h| !h.is_empty());
        let home = self.home.clone();
        let rid = id.clone();
        let removed = off_thread("permission.allowlist.remove", move || {
            if let Some(path) = file_of(&home, Scope::Project, workdir.as_deref()) {
                if remove_from_file(&path, &rid, None)? {
                    return Ok(true);
                }
            }
            remove_from_file(&home.settings_path(), &rid, owner.as_deref())
        })
        .await?;
        if removed {
            tracing::info!(pattern_id = %id, "allowlist entry removed");
            Ok(())
        } else {
            Err(Error::NotFound(format!("no allowlist entry {id:?}")))
        }
    }

    /// Every pattern that applies to `session` (its own, its project's, the global ones),
    /// parsed; unparsable stored patterns are skipped.
    async fn patterns_for(&self, session: &Session) -> Vec<Pattern> {
        let mut texts: Vec<String> = self
            .session_entries(Some(&session.id))
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|(_, e)| e.pattern)
            .collect();
        let (home, workdir) = (self.home.clone(), session.workdir());
        let files = off_thread("allowlist.match", move || {
            let mut v = read_file(
                &workdir.join(".snowpea").join("settings.json"),
                Scope::Project,
            );
            v.extend(read_file(&home.settings_path(), Scope::Always));
            Ok(v)
        })
        .await
        .unwrap_or_default();
        // Host rules (a site's or a local dev server's) match only their own asks.
        texts.extend(
            files
                .into_iter()
                .filter(|e| !is_host_rule(e))
                .map(|e| e.pattern),
        );
        texts
            .iter()
            .filter_map(|t| Pattern::parse(t).ok())
            .collect()
    }

    /// True when the allowlist turns the verdict `verdict` of this call into an allow (see
    /// the module doc for what it never does).
    pub async fn allows(
        &self,
        session: &Session,
        verdict: Verdict,
        tool: &str,
        args: &Value,
        plan: &ToolPlan,
    ) -> bool {
        if !promotable(session.mode(), verdict, plan) {
            return false;
        }
        let patterns = self.patterns_for(session).await;
        allowed_by(&patterns, tool, args)
    }

    /// Stores what an "allow" answer with scope `scope` covers (`approval.respond` /
    /// `approval.request` answers): the pattern of the call ([`pattern::derive`]) in that
    /// scope. Returns the entry id, `None` when nothing could be stored (the answer then
    /// covers this call only).
    pub async fn store_answer(
        &self,
        session: &Session,
        scope: Scope,
        tool: &str,
        args: &Value,
    ) -> Option<String> {
        let command = args.get("command").and_then(Value::as_str);
        let pattern = pattern::derive(tool, command)?;
        let r = match scope {
            Scope::Session => self.add_session(&session.id, &pattern).await,
            Scope::Project => {
                self.add_file(scope, Some(&session.workdir()), pattern)
                    .await
            }
            Scope::Always => self.add_file(scope, None, pattern).await,
        };
        match r {
            Ok(id) => Some(id),
            Err(e) => {
                tracing::warn!(error = %e, scope = scope.as_str(), "could not store the allowlist entry of an answer");
                None
            }
        }
    }
}

/// True for an entry keyed by a page origin (`approval.ask`'s `site` rules and
/// local-dev-server rules): only [`Allowlist::host_rule`] matches it.
fn is_host_rule(e: &Entry) -> bool {
    e.extra.contains_key("origin") || e.extra.contains_key("reasonCode")
}

/// Adds a host rule (`pattern` with `extra` fields) to a settings file; the same rule
/// again returns the existing id.
fn add_rule_to_file(
    path: &Path,
    pattern: &str,
    extra: &serde_json::Map<String, Value>,
) -> anyhow::Result<String> {
    snowpea_common::settings::update_file(path, |doc| {
        let obj = doc
            .as_object_mut()
            .ok_or_else(|| anyhow::anyhow!("settings must be a JSON object"))?;
        let list = obj.entry("allowlist").or_insert_with(|| json!([]));
        let list = list
            .as_array_mut()
            .ok_or_else(|| anyhow::anyhow!("{}: `allowlist` is not a list", path.display()))?;
        let same = |e: &Value| {
            e.get("pattern").and_then(Value::as_str) == Some(pattern)
                && extra.iter().all(|(k, v)| e.get(k) == Some(v))
        };
        if let Some(id) = list
            .iter()
            .find(|e| same(e))
            .and_then(|e| e.get("id").and_then(Value::as_str).map(str::to_owned))
        {
            return Ok(id);
        }
        let id = snowpea_common::ids::new_id("al");
        let mut entry = serde_json::Map::new();
        entry.insert("id".into(), json!(id));
        entry.insert("pattern".into(), json!(pattern));
        entry.insert("createdAt".into(), json!(now_iso()));
        entry.extend(extra.clone());
        list.push(Value::Object(entry));
        Ok(id)
    })
}

impl Allowlist {
    /// True when a stored host rule allows `tool` on `origin` for `session` (issue 21,
    /// `approval.ask`): with `reason_code` a project rule of the session's project carrying
    /// that code (the local-dev-server rule), else a `site` rule (global, of the session's
    /// host browser profile when the rule names one) without a reason code.
    pub async fn host_rule(
        &self,
        session: &Session,
        tool: &str,
        origin: &str,
        reason_code: Option<&str>,
    ) -> bool {
        let (home, workdir) = (self.home.clone(), session.workdir());
        let project = reason_code.is_some();
        let entries = off_thread("allowlist.hostRule", move || {
            Ok(if project {
                read_file(
                    &workdir.join(".snowpea").join("settings.json"),
                    Scope::Project,
                )
            } else {
                read_file(&home.settings_path(), Scope::Always)
            })
        })
        .await
        .unwrap_or_default();
        let owner = session.host_tools_from();
        let s = |e: &Entry, k: &str| e.extra.get(k).and_then(Value::as_str).map(str::to_owned);
        entries.iter().any(|e| {
            s(e, "tool").as_deref() == Some(tool)
                && s(e, "origin").as_deref() == Some(origin)
                && s(e, "reasonCode").as_deref() == reason_code
                && s(e, "hostToolsFrom").is_none_or(|h| owner.as_deref() == Some(h.as_str()))
        })
    }

    /// Stores a host rule for `tool` on `origin` ([`Allowlist::host_rule`]) in `scope`'s
    /// file (`project`: the session's project, with `reason_code`; `always`: the global
    /// file, with the session's `hostToolsFrom`). Returns the entry id.
    pub async fn store_host_rule(
        &self,
        session: &Session,
        scope: Scope,
        tool: &str,
        origin: &str,
        reason_code: Option<&str>,
    ) -> Option<String> {
        let path = file_of(&self.home, scope, Some(&session.workdir()))?;
        let mut extra = serde_json::Map::new();
        extra.insert("tool".into(), json!(tool));
        extra.insert("origin".into(), json!(origin));
        if let Some(code) = reason_code {
            extra.insert("reasonCode".into(), json!(code));
        }
        if let Some(h) = session.host_tools_from().filter(|_| scope == Scope::Always) {
            extra.insert("hostToolsFrom".into(), json!(h));
        }
        let pattern = format!("tool:{tool}");
        match off_thread("allowlist.hostRule.add", move || {
            add_rule_to_file(&path, &pattern, &extra)
        })
        .await
        {
            Ok(id) => {
                tracing::info!(scope = scope.as_str(), pattern_id = %id, tool, origin, "host rule stored");
                Some(id)
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not store the host rule of an approval.ask answer");
                None
            }
        }
    }
}

/// Whether a call with this verdict may be promoted at all: only an "ask", never in plan
/// mode, never for `config`/`secret`, never with paths outside the workdir.
pub fn promotable(mode: Mode, verdict: Verdict, plan: &ToolPlan) -> bool {
    verdict == Verdict::Ask
        && mode != Mode::Plan
        && !matches!(plan.permission, Permission::Config | Permission::Secret)
        && plan.outside_workdir.is_empty()
}

/// True when `patterns` allow a call of `tool` with `args`: `shell` by command patterns
/// (every simple command matched), other tools by `tool:` patterns.
pub fn allowed_by(patterns: &[Pattern], tool: &str, args: &Value) -> bool {
    if tool == "shell" {
        let Some(command) = args.get("command").and_then(Value::as_str) else {
            return false;
        };
        let refs: Vec<&Pattern> = patterns.iter().collect();
        pattern::command_allowed(&refs, command)
    } else {
        patterns.iter().any(|p| p.allows_tool(tool))
    }
}

#[cfg(test)]
#[path = "permission_tests.rs"]
mod tests;
