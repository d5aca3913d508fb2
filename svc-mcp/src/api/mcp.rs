//! [`McpApi`]: the logic of `mcp.add`, `mcp.catalog`, `mcp.list`, `mcp.reload`,
//! `mcp.remove`, `mcp.test`, `mcp.update` (spec "mcp.*", issue 6); `rpc/mcp.rs` only
//! implements the generated `McpService` trait over it.
//!
//! Writes go to the file of the target scope under [`App::write_lock`], atomically and
//! keeping unknown entries and keys; then the host reconciles (start, restart or stop).
//! `env`/`headers` values never leave this service: rows carry `envKeys`/`headerKeys`.
//! `mcp.update` keeps absent fields and clears fields sent as `null`, `{}` or `[]` (their
//! presence arrives in the [`crate::patch::CLEARED_FIELDS`] metadata from the gateway) or
//! as `""`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use snowpea_proto::mcp::v1::{
    McpAddParams, McpAddResult, McpCatalogEntry, McpCatalogResult, McpListParams, McpListResult,
    McpReloadParams, McpReloadResult, McpRemoveParams, McpServer, McpServerDraft, McpServerTool,
    McpTestParams, McpTestResult, McpUpdateParams,
};
use snowpea_proto::rpc::v1::OkResult;

use crate::config::{self, file::McpFile, Declared, Scope, ServerEntry, ToolsFilter};
use crate::error::{Error, Result};
use crate::rpc::App;
use crate::{catalog, probe, trust, validate};

/// The `mcp.*` logic over the service state; one public method per JSON-RPC method.
#[derive(Debug, Clone)]
pub struct McpApi {
    app: Arc<App>,
}

impl McpApi {
    /// The logic over `app`.
    pub fn new(app: Arc<App>) -> Self {
        McpApi { app }
    }

    /// `mcp.catalog`: the curated list of well-known servers.
    pub fn catalog(&self) -> McpCatalogResult {
        catalog()
    }
}

fn opt_vec(v: Vec<String>) -> Option<Vec<String>> {
    (!v.is_empty()).then_some(v)
}

fn opt_map(m: std::collections::HashMap<String, String>) -> Option<IndexMap<String, String>> {
    if m.is_empty() {
        return None;
    }
    let mut pairs: Vec<(String, String)> = m.into_iter().collect();
    pairs.sort();
    Some(pairs.into_iter().collect())
}

fn tools_filter(include: Vec<String>, exclude: Vec<String>) -> Option<ToolsFilter> {
    let f = ToolsFilter {
        include: opt_vec(include),
        exclude: opt_vec(exclude),
    };
    (f != ToolsFilter::default()).then_some(f)
}

/// The server definition that flat params (`mcp.add`, `mcp.test`: the draft keys stand
/// flat in them) carry, as one [`McpServerDraft`].
macro_rules! flat_draft {
    ($p:expr) => {{
        let p = $p;
        McpServerDraft {
            args: p.args.clone(),
            command: p.command.clone(),
            cwd: p.cwd.clone(),
            disabled: p.disabled,
            env: p.env.clone(),
            headers: p.headers.clone(),
            permission: p.permission.clone(),
            timeout_sec: p.timeout_sec,
            tool_timeout_sec: p.tool_timeout_sec,
            tools_exclude: p.tools_exclude.clone(),
            tools_include: p.tools_include.clone(),
            r#type: p.r#type.clone(),
            url: p.url.clone(),
        }
    }};
}

/// The server definition `mcp.add` params carry.
fn add_draft(p: &McpAddParams) -> McpServerDraft {
    flat_draft!(p)
}

/// The server definition `mcp.test` params carry.
fn test_draft(p: &McpTestParams) -> McpServerDraft {
    flat_draft!(p)
}

/// A draft (`mcp.add`, `mcp.test`) applied over `base`: every key it sets replaces the
/// preset's. `permission` is not part of the entry (it is stored in settings).
fn apply_draft(mut base: ServerEntry, draft: McpServerDraft) -> ServerEntry {
    let McpServerDraft {
        r#type: kind,
        command,
        args,
        env,
        cwd,
        url,
        headers,
        disabled,
        timeout_sec,
        tool_timeout_sec,
        tools_include: include,
        tools_exclude: exclude,
        permission: _,
    } = draft;
    if kind.is_some() {
        base.kind = kind;
    }
    // An explicit command replaces a preset's url and vice versa; both explicit stay both
    // (and fail validation).
    match (command, url) {
        (Some(c), None) => {
            base.command = Some(c);
            base.url = None;
        }
        (None, Some(u)) => {
            base.url = Some(u);
            base.command = None;
        }
        (Some(c), Some(u)) => {
            base.command = Some(c);
            base.url = Some(u);
        }
        (None, None) => {}
    }
    if let Some(a) = opt_vec(args) {
        base.args = Some(a);
    }
    if let Some(e) = opt_map(env) {
        base.env = Some(e);
    }
    if cwd.is_some() {
        base.cwd = cwd;
    }
    if let Some(h) = opt_map(headers) {
        base.headers = Some(h);
    }
    if disabled.is_some() {
        base.disabled = disabled;
    }
    if timeout_sec.is_some() {
        base.timeout_sec = timeout_sec;
    }
    if tool_timeout_sec.is_some() {
        base.tool_timeout_sec = tool_timeout_sec;
    }
    if let Some(f) = tools_filter(include, exclude) {
        base.tools = Some(f);
    }
    base
}

fn write_scope(scope: &str) -> Result<Scope> {
    match scope {
        "" | "global" => Ok(Scope::Global),
        "project" => Ok(Scope::Project),
        other => Err(Error::invalid_params(
            "params.scope",
            format!("{other:?} is not project or global"),
        )),
    }
}

impl McpApi {
    async fn workdir(&self, workdir: Option<&str>, session_id: Option<&str>) -> Result<PathBuf> {
        let dir = self
            .app
            .sessions
            .resolve(workdir, session_id, self.app.host.daemon_dir())
            .await?;
        // Only existing folders are remembered (a session's may have been deleted since).
        if dir.is_dir() {
            self.app.host.ensure_root(&dir).await;
        }
        Ok(dir)
    }

    fn file_path(&self, scope: Scope, workdir: &Path) -> PathBuf {
        match scope {
            Scope::Project => config::project_path(workdir),
            _ => config::global_path(self.app.host.home()),
        }
    }

    /// The writable file declaring `name`: the explicit scope's, else the visible
    /// declaration's. Read-only declarations answer `mcp_read_only`.
    fn declaring_file(
        &self,
        name: &str,
        scope: Option<&str>,
        workdir: &Path,
    ) -> Result<(Scope, McpFile)> {
        let scope = match scope.filter(|s| !s.is_empty()) {
            Some(s) => write_scope(s)?,
            None => {
                let visible = config::discover(self.app.host.home(), Some(workdir));
                match visible.iter().find(|d| d.name == name) {
                    None => return Err(Error::NotFound(format!("no MCP server named {name:?}"))),
                    Some(d) if d.scope.read_only() => {
                        return Err(Error::ReadOnly(format!(
                            "MCP server {name:?} is declared in the read-only {} scope ({})",
                            d.scope.as_str(),
                            d.path.display()
                        )))
                    }
                    Some(d) => d.scope,
                }
            }
        };
        let file = McpFile::load(&self.file_path(scope, workdir))?;
        if file.entry(name).is_none() {
            let read_only = config::read_only_servers(self.app.host.home())
                .into_iter()
                .find(|d| d.name == name);
            if let Some(d) = read_only {
                return Err(Error::ReadOnly(format!(
                    "MCP server {name:?} is declared in the read-only {} scope ({})",
                    d.scope.as_str(),
                    d.path.display()
                )));
            }
            return Err(Error::NotFound(format!(
                "no MCP server named {name:?} in {}",
                file.path.display()
            )));
        }
        Ok((scope, file))
    }

    /// Saves `file`; for a project file, first records entry `name` as written through the
    /// API (its fingerprint, and `force` when its findings were accepted) so the trust step
    /// lets it start. A failed save puts the old records back.
    fn save_trusted(
        &self,
        scope: Scope,
        workdir: &Path,
        file: &McpFile,
        name: &str,
        force: bool,
    ) -> Result<()> {
        if scope != Scope::Project {
            return file.save();
        }
        let home = self.app.host.home();
        let before = trust::Store::load(home);
        let mut store = before.clone();
        let raw = file.entry(name).expect("the entry was just written");
        store.set(workdir, name, trust::fingerprint(raw), force);
        store.save(home)?;
        if let Err(e) = file.save() {
            let _ = before.save(home);
            return Err(e);
        }
        Ok(())
    }

    /// True when project entry `name`, as `raw` is now, was written with force (its security
    /// findings accepted).
    fn written_with_force(&self, workdir: &Path, name: &str, raw: &config::Json) -> bool {
        trust::Store::load(self.app.host.home())
            .get(workdir, name)
            .is_some_and(|r| r.force && r.sha256 == trust::fingerprint(raw))
    }

    /// True when a server named `name` is declared in any scope: the global file, settings,
    /// plugins, or the `.mcp.json` of `workdir` or of any hosted project. Its
    /// `mcp.permissions.<name>` is still in use then.
    fn declared_anywhere(&self, name: &str, workdir: &Path) -> bool {
        let home = self.app.host.home();
        if config::discover_global(home).iter().any(|d| d.name == name) {
            return true;
        }
        let mut roots = self.app.host.roots();
        roots.push(workdir.to_path_buf());
        roots.iter().any(|r| {
            !config::is_global_file(home, r)
                && config::file::McpFile::load(&config::project_path(r))
                    .is_ok_and(|f| f.entry(name).is_some())
        })
    }

    /// `mcp.add`.
    pub async fn add(&self, p: McpAddParams) -> Result<McpAddResult> {
        validate::check_name(&p.name)?;
        if let Some(perm) = p.permission.as_deref() {
            validate::check_permission(perm)?;
        }
        let scope = write_scope(&p.scope)?;
        // A project file is written only where the caller said: never into the folder the
        // daemon happens to run in.
        let named = |v: Option<&str>| v.is_some_and(|s| !s.trim().is_empty());
        if scope == Scope::Project
            && !named(p.workdir.as_deref())
            && !named(p.session_id.as_deref())
        {
            return Err(Error::invalid_params(
                "params.workdir",
                "scope project needs the project: give workdir or sessionId",
            ));
        }
        let workdir = self
            .workdir(p.workdir.as_deref(), p.session_id.as_deref())
            .await?;
        let base = match p.preset.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => {
                let preset = catalog::find(id).ok_or_else(|| {
                    Error::Invalid(format!("unknown preset {id:?} (see mcp.catalog)"))
                })?;
                serde_json::from_value((preset.entry)()).expect("presets are valid entries")
            }
            None => ServerEntry::default(),
        };
        let entry = apply_draft(base, add_draft(&p));
        let findings = validate::validate(&p.name, &entry)?;
        let warnings = validate::enforce(findings, p.force)?;
        if scope == Scope::Project && !workdir.is_dir() {
            // A project file is written into an existing folder only, never one made up.
            return Err(Error::invalid_params(
                "params.workdir",
                format!(
                    "{} does not exist: the project .mcp.json goes into an existing folder",
                    crate::clip::clip(&workdir.display().to_string())
                ),
            ));
        }
        let path = self.file_path(scope, &workdir);
        {
            let file = McpFile::load(&path)?;
            if file.entry(&p.name).is_some() && !p.force {
                return Err(Error::Exists(format!(
                    "MCP server {:?} already exists in {} (use force to overwrite)",
                    p.name,
                    path.display()
                )));
            }
        }
        let mut probe_tools = Vec::new();
        if p.test {
            let declared = Declared {
                name: p.name.clone(),
                scope,
                entry: entry.clone(),
                invalid: None,
                blocked: None,
                path: path.clone(),
                plugin: None,
                root: (scope == Scope::Project).then(|| workdir.clone()),
            };
            let report = probe::probe(&entry, &self.app.host.spawn_context(&declared)).await;
            if !report.ok {
                return Err(Error::StartFailed(
                    report.error.unwrap_or_else(|| "the probe failed".into()),
                ));
            }
            probe_tools = report
                .tools
                .into_iter()
                .map(|t| McpServerTool {
                    name: t.name,
                    description: t.description,
                })
                .collect();
        }
        {
            let _guard = self.app.write_lock.lock().await;
            let mut file = McpFile::load(&path)?;
            if file.entry(&p.name).is_some() && !p.force {
                return Err(Error::Exists(format!(
                    "MCP server {:?} already exists in {}",
                    p.name,
                    path.display()
                )));
            }
            let replaced = file.entry(&p.name).is_some();
            // A permission left by an earlier server of this name is not inherited: without
            // `permission`, a replaced entry or a name declared nowhere else gets the default.
            let shared = !replaced && self.declared_anywhere(&p.name, &workdir);
            if replaced {
                file.replace(&p.name, &entry);
            } else {
                file.upsert(&p.name, &entry);
            }
            self.save_trusted(scope, &workdir, &file, &p.name, !warnings.is_empty())?;
            let settings = self.app.host.home().settings_path();
            match p.permission.as_deref() {
                Some(perm) => config::file::write_permission(&settings, &p.name, perm)?,
                None if !shared => {
                    config::file::remove_permission(&settings, &p.name)?;
                }
                None => {}
            }
        }
        tracing::info!(server = %p.name, scope = scope.as_str(), path = %crate::clip::clip(&path.display().to_string()), "MCP server added");
        self.app.host.reconcile().await;
        let status = self
            .app
            .host
            .get(Some(&workdir), &p.name)
            .map(|h| h.status());
        Ok(McpAddResult {
            ok: true,
            path: path.display().to_string(),
            state: status
                .as_ref()
                .map(|s| s.state.as_str())
                .unwrap_or("stopped")
                .into(),
            error: status.and_then(|s| s.error),
            tools: probe_tools,
            warnings,
        })
    }

    /// `mcp.update`: `cleared` names the patch fields sent as `null`, `{}` or `[]`
    /// ([`crate::patch::CLEARED_FIELDS`]), which clear the field.
    /// `mcp.update`.
    pub async fn update(
        &self,
        p: McpUpdateParams,
        cleared: &std::collections::HashSet<String>,
    ) -> Result<OkResult> {
        validate::check_name(&p.name)?;
        let workdir = self
            .workdir(p.workdir.as_deref(), p.session_id.as_deref())
            .await?;
        let patch = crate::patch::EntryPatch::from_proto(p.patch.unwrap_or_default(), cleared);
        if let crate::patch::Change::Set(perm) = &patch.permission {
            validate::check_permission(perm)?;
        }
        let _guard = self.app.write_lock.lock().await;
        let (scope, mut file) = self.declaring_file(&p.name, p.scope.as_deref(), &workdir)?;
        let old_raw = file.entry(&p.name).expect("checked");
        let old = ServerEntry::from_json(&p.name, old_raw)?;
        // Findings the entry already had were accepted (force) when it was added — for a
        // project entry only if the record says so (one written by hand never was).
        let old_accepted =
            scope != Scope::Project || self.written_with_force(&workdir, &p.name, old_raw);
        let old_findings = if old_accepted {
            validate::validate(&p.name, &old).unwrap_or_default()
        } else {
            Vec::new()
        };
        let permission = patch.permission.clone();
        let entry = patch.apply(old);
        // Only findings the entry did not already have (accepted) refuse the update.
        let findings = validate::validate(&p.name, &entry)?;
        let new_findings: Vec<String> = findings
            .iter()
            .filter(|f| !old_findings.contains(f))
            .cloned()
            .collect();
        validate::enforce(new_findings, false)?;
        file.upsert(&p.name, &entry);
        self.save_trusted(scope, &workdir, &file, &p.name, !findings.is_empty())?;
        let settings = self.app.host.home().settings_path();
        match permission {
            crate::patch::Change::Set(perm) => {
                config::file::write_permission(&settings, &p.name, &perm)?
            }
            crate::patch::Change::Clear => {
                config::file::remove_permission(&settings, &p.name)?;
            }
            crate::patch::Change::Keep => {}
        }
        drop(_guard);
        tracing::info!(server = %p.name, path = %crate::clip::clip(&file.path.display().to_string()), "MCP server updated");
        self.app.host.reconcile().await;
        Ok(OkResult { ok: true })
    }

    /// `mcp.remove`.
    pub async fn remove(&self, p: McpRemoveParams) -> Result<OkResult> {
        validate::check_name(&p.name)?;
        let workdir = self
            .workdir(p.workdir.as_deref(), p.session_id.as_deref())
            .await?;
        {
            let _guard = self.app.write_lock.lock().await;
            let (scope, mut file) = self.declaring_file(&p.name, p.scope.as_deref(), &workdir)?;
            file.remove(&p.name);
            file.save()?;
            if scope == Scope::Project {
                let home = self.app.host.home();
                let mut store = trust::Store::load(home);
                if store.remove(&workdir, &p.name) {
                    store.save(home)?;
                }
            }
            // The last entry of that name is gone: so is its permission, or a new server of
            // the same name would inherit it (e.g. `read`: its tools run without approval).
            if !self.declared_anywhere(&p.name, &workdir) {
                config::file::remove_permission(&self.app.host.home().settings_path(), &p.name)?;
            }
            tracing::info!(server = %p.name, path = %crate::clip::clip(&file.path.display().to_string()), "MCP server removed");
        }
        self.app.host.reconcile().await;
        Ok(OkResult { ok: true })
    }

    /// `mcp.list`.
    pub async fn list(&self, p: McpListParams) -> Result<McpListResult> {
        let workdir = self
            .workdir(p.workdir.as_deref(), p.session_id.as_deref())
            .await?;
        let home = self.app.host.home();
        let servers = self
            .app
            .host
            .view(Some(&workdir))
            .into_iter()
            .map(|h| {
                let d = &h.declared;
                let e = &d.entry;
                let status = h.status();
                let tools: Vec<McpServerTool> = status
                    .tools
                    .iter()
                    .map(|t| McpServerTool {
                        name: t.name.to_string(),
                        description: t.description.as_deref().unwrap_or_default().to_owned(),
                    })
                    .collect();
                McpServer {
                    args: e.args.clone().unwrap_or_default(),
                    command: e.command.clone(),
                    cwd: e.cwd.clone(),
                    disabled: !e.enabled(),
                    env_keys: e.env_keys(),
                    error: status.error.clone(),
                    header_keys: e.header_keys(),
                    name: d.name.clone(),
                    permission: config::permission(home, &d.name),
                    plugin: d.plugin.clone(),
                    scope: d.scope.as_str().into(),
                    state: status.state.as_str().into(),
                    timeout_sec: e.timeout_sec,
                    tool_count: tools.len() as i64,
                    tool_timeout_sec: e.tool_timeout_sec,
                    tools,
                    tools_exclude: e
                        .tools
                        .as_ref()
                        .and_then(|t| t.exclude.clone())
                        .unwrap_or_default(),
                    tools_include: e
                        .tools
                        .as_ref()
                        .and_then(|t| t.include.clone())
                        .unwrap_or_default(),
                    transport: e.transport().as_str().into(),
                    url: e.url.as_deref().map(crate::redact::url),
                }
            })
            .collect();
        Ok(McpListResult { servers })
    }

    /// `mcp.reload`.
    pub async fn reload(&self, p: McpReloadParams) -> Result<McpReloadResult> {
        let workdir = self
            .workdir(p.workdir.as_deref(), p.session_id.as_deref())
            .await?;
        self.app.host.reconcile().await;
        let targets: Vec<_> = match p.name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => vec![self
                .app
                .host
                .get(Some(&workdir), name)
                .ok_or_else(|| Error::NotFound(format!("no MCP server named {name:?}")))?],
            None => self.app.host.view(Some(&workdir)),
        };
        let mut servers = Vec::new();
        for h in targets {
            let d = &h.declared;
            if d.entry.enabled() && d.invalid.is_none() && d.blocked.is_none() {
                h.restart();
                servers.push(h.declared.name.clone());
            }
        }
        Ok(McpReloadResult { ok: true, servers })
    }

    /// `mcp.test`.
    pub async fn test(&self, p: McpTestParams) -> Result<McpTestResult> {
        let workdir = self
            .workdir(p.workdir.as_deref(), p.session_id.as_deref())
            .await?;
        let declared = match p.name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) if p.command.is_none() && p.url.is_none() => {
                let scope = p.scope.as_deref().filter(|s| !s.is_empty());
                let all = match scope {
                    Some(s) => {
                        let scope = Scope::parse(s).ok_or_else(|| {
                            Error::invalid_params("params.scope", "unknown scope")
                        })?;
                        let mut all = config::read_only_servers(self.app.host.home());
                        all.extend(config::read_scope_file(
                            &config::global_path(self.app.host.home()),
                            Scope::Global,
                            None,
                        )?);
                        if !config::is_global_file(self.app.host.home(), &workdir) {
                            all.extend(config::read_project(self.app.host.home(), &workdir)?);
                        }
                        all.into_iter()
                            .filter(|d| d.scope == scope)
                            .collect::<Vec<_>>()
                    }
                    None => config::discover(self.app.host.home(), Some(&workdir)),
                };
                let d = all
                    .into_iter()
                    .find(|d| d.name == name)
                    .ok_or_else(|| Error::NotFound(format!("no MCP server named {name:?}")))?;
                if let Some(why) = &d.invalid {
                    return Err(Error::Invalid(why.clone()));
                }
                validate::validate(name, &d.entry)?;
                // A probe runs the entry: an untrusted project entry is refused like an
                // unsafe draft.
                if let Some(why) = &d.blocked {
                    return Err(Error::Unsafe {
                        message: why.clone(),
                        findings: vec![why.clone()],
                    });
                }
                d
            }
            _ => {
                let name = p
                    .name
                    .clone()
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| "draft".into());
                let entry = apply_draft(ServerEntry::default(), test_draft(&p));
                // A draft is run by this probe: its findings refuse it like mcp.add without force.
                let findings = validate::validate(&name, &entry)?;
                validate::enforce(findings, false)?;
                Declared {
                    name,
                    scope: Scope::Global,
                    entry,
                    invalid: None,
                    blocked: None,
                    path: PathBuf::new(),
                    plugin: None,
                    root: Some(workdir.clone()),
                }
            }
        };
        let report = probe::probe(&declared.entry, &self.app.host.spawn_context(&declared)).await;
        Ok(McpTestResult {
            elapsed_ms: report.elapsed_ms,
            error: report.error.map(|e| {
                crate::host::server::tidy_error(&e, declared.entry.url.as_deref().unwrap_or(""))
            }),
            ok: report.ok,
            state: if report.ok { "ready" } else { "error" }.into(),
            tools: report
                .tools
                .into_iter()
                .map(|t| McpServerTool {
                    name: t.name,
                    description: t.description,
                })
                .collect(),
        })
    }
}

fn catalog() -> McpCatalogResult {
    McpCatalogResult {
        entries: catalog::presets()
            .iter()
            .map(|p| McpCatalogEntry {
                description: p.description.into(),
                entry: Some(snowpea_proto::wkt::to_struct(&(p.entry)())),
                homepage: p.homepage.into(),
                id: p.id.into(),
                label: p.label.into(),
                needs: p.needs.iter().map(|s| s.to_string()).collect(),
                transport: p.transport.into(),
            })
            .collect(),
    }
}
