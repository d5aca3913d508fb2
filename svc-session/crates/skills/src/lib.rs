//! Skills and plugins: `skill.list/read/write/create/remove/reload/search/install`
//! (protocol 1.25.0 "skill.*"; upstream-behaviour §3 "Skills and plugins").
//!
//! [`Skills`] keeps the definitions of the global roots loaded ([`loader`]; reloaded at
//! start, by `skill.reload` and after install, remove, create and write) and scans a
//! workdir's project roots on demand. Every reload is announced on [`Skills::subscribe`]
//! (the command registry turns it into `commands.changed{commands, reason}`). No tables.
//!
//! `skill.create` with a `description` is a model turn and so starts in
//! `Turns::draft_skill` (svc-session's `turn`); everything else is here.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;
use tokio::sync::broadcast;

use snowpea_session_error::{Error, Result};

pub mod install;
pub mod loader;
pub mod search;

pub use loader::{Entry, Kind, Scope};

/// Most workdirs whose project roots `skill.list` scans (the open sessions', newest first).
pub const MAX_WORKDIRS: usize = 50;
/// Shortest and longest skill description, in characters.
pub const DESCRIPTION_CHARS: (usize, usize) = (8, 500);

/// Runs blocking file work of definitions (skills, agents, commands) on the blocking pool
/// (bounded wait; see `common::db::blocking`).
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    snowpea_common::db::blocking("skills.files", f).await?
}

/// Checks a skill or plugin name against `^[a-z0-9][a-z0-9._-]{1,63}$`.
pub fn validate_name(name: &str) -> std::result::Result<(), String> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| regex::Regex::new(r"^[a-z0-9][a-z0-9._-]{1,63}$").expect("regex"));
    if re.is_match(name) {
        Ok(())
    } else {
        Err("must match ^[a-z0-9][a-z0-9._-]{1,63}$".into())
    }
}

/// Checks a SKILL.md text: frontmatter parses, `name` (when given) equals `name`, and
/// `description` has 8–500 characters. Errors name the field as `params.content…`.
pub fn validate_skill(name: &str, content: &str) -> Result<()> {
    let (front, _) = loader::parse(content).map_err(|e| Error::invalid("params.content", e))?;
    if let Some(n) = front.name.as_deref() {
        if n != name {
            return Err(Error::invalid(
                "params.content",
                format!("frontmatter name {n:?} differs from params.name {name:?}"),
            ));
        }
    }
    let d = front.description.unwrap_or_default();
    let n = d.trim().chars().count();
    if n < DESCRIPTION_CHARS.0 || n > DESCRIPTION_CHARS.1 {
        return Err(Error::invalid(
            "params.content",
            format!(
                "frontmatter description must have {}–{} characters (has {n})",
                DESCRIPTION_CHARS.0, DESCRIPTION_CHARS.1
            ),
        ));
    }
    Ok(())
}

/// Writes `content` to `path` (parent folders 0700, the file 0600, atomically).
fn write_skill_file(path: &Path, content: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(anyhow::Error::from)?;
    }
    snowpea_common::home::write_private(path, content.as_bytes())?;
    Ok(())
}

/// The working folders of the open sessions, as `skill.list` reads them: implemented by
/// the session registry above this crate and passed in by `App::open`.
pub trait OpenWorkdirs: Send + Sync {
    /// The workdir of every open session, one entry per session (duplicates allowed).
    fn open_workdirs(&self) -> Vec<String>;
}

/// The skills component (see the module doc).
pub struct Skills {
    home: Home,
    claude_home: Option<PathBuf>,
    workdirs: Arc<dyn OpenWorkdirs>,
    global: RwLock<Vec<Entry>>,
    changed: broadcast::Sender<String>,
}

impl std::fmt::Debug for Skills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skills").finish_non_exhaustive()
    }
}

impl Skills {
    /// Loads the global roots. `claude_home` is `~/.claude` (`None`: not searched).
    /// `workdirs` names the open sessions' folders (their project roots are listed too).
    pub fn open(home: Home, claude_home: Option<PathBuf>, workdirs: Arc<dyn OpenWorkdirs>) -> Self {
        let s = Skills {
            home,
            claude_home,
            workdirs,
            global: RwLock::new(Vec::new()),
            changed: broadcast::channel(16).0,
        };
        s.load_global();
        s
    }

    fn load_global(&self) {
        let roots = loader::global_roots(self.home.root(), self.claude_home.as_deref());
        let entries = loader::load(&roots);
        for e in entries.iter().filter(|e| e.error.is_some()) {
            tracing::warn!(path = %e.path.display(), error = ?e.error, "definition not loaded");
        }
        *self.global.write().unwrap_or_else(|p| p.into_inner()) = entries;
    }

    /// Reload announcements: the reason of each reload.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.changed.subscribe()
    }

    fn reloaded(&self, reason: &str) {
        self.load_global();
        let _ = self.changed.send(reason.to_owned());
    }

    /// The plugins folder, `$SNOWPEA_HOME/plugins`.
    pub fn plugins_dir(&self) -> PathBuf {
        self.home.root().join("plugins")
    }

    fn sources(&self) -> search::Sources {
        let settings =
            snowpea_common::settings::load_effective(&self.home, None).unwrap_or_default();
        search::Sources {
            marketplaces_file: self.home.root().join("marketplaces.json"),
            registry_url: settings
                .pointer("/skills/registry/url")
                .and_then(|v| v.as_str())
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        }
    }

    /// Every definition visible from `workdir` (global roots, then its project roots; a
    /// later root wins a clash), or the global ones only. Reusable by any family that loads
    /// definitions from these roots (commands, agents).
    pub fn catalog(&self, workdir: Option<&Path>) -> Vec<Entry> {
        let global = self
            .global
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(wd) = workdir else {
            return global;
        };
        let project = loader::load(&loader::project_roots(wd));
        let mut by: std::collections::BTreeMap<(Kind, String), Entry> = global
            .into_iter()
            .map(|e| ((e.kind, e.name.clone()), e))
            .collect();
        for e in project {
            by.insert((e.kind, e.name.clone()), e);
        }
        by.into_values().collect()
    }

    fn to_pb(e: &Entry) -> pb::Skill {
        let summary = match &e.error {
            Some(err) => format!("error: {err}"),
            None => e.summary.clone(),
        };
        let plugin = e.source.strip_prefix("plugin:");
        pb::Skill {
            name: e.name.clone(),
            kind: e.kind.as_str().into(),
            source: e.source.clone(),
            summary,
            installed: true,
            install_spec: plugin.map(str::to_owned).unwrap_or_default(),
            id: format!("{}:{}:{}", e.source, e.kind.as_str(), e.name),
            ..Default::default()
        }
    }

    /// `skill.list`: the global definitions plus the project ones of the open sessions'
    /// workdirs (at most [`MAX_WORKDIRS`]); a malformed file is listed with
    /// `summary: "error: …"`.
    pub async fn list(&self) -> Result<pb::SkillListResult> {
        let mut workdirs: Vec<String> = Vec::new();
        for w in self.workdirs.open_workdirs() {
            if !workdirs.contains(&w) {
                workdirs.push(w);
            }
            if workdirs.len() >= MAX_WORKDIRS {
                break;
            }
        }
        let global = self
            .global
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut skills: Vec<pb::Skill> = global.iter().map(Self::to_pb).collect();
        let project = blocking(move || {
            Ok(workdirs
                .iter()
                .flat_map(|w| loader::load(&loader::project_roots(Path::new(w))))
                .collect::<Vec<_>>())
        })
        .await?;
        for e in &project {
            let p = Self::to_pb(e);
            if !skills
                .iter()
                .any(|s| s.id == p.id && s.summary == p.summary)
            {
                skills.push(p);
            }
        }
        Ok(pb::SkillListResult { skills })
    }

    /// `skill.read`: `<wd>/.snowpea`, then `<wd>/.claude`, then the global definitions.
    pub async fn read(&self, p: pb::SkillReadParams) -> Result<pb::SkillReadResult> {
        let wd = PathBuf::from(&p.workdir);
        for d in [".snowpea", ".claude"] {
            let path = wd.join(d).join("skills").join(&p.name).join("SKILL.md");
            if let Ok(content) = tokio::fs::read_to_string(&path).await {
                return Ok(pb::SkillReadResult {
                    content,
                    path: path.to_string_lossy().into_owned(),
                    scope: "project".into(),
                });
            }
        }
        let found = self
            .catalog(None)
            .into_iter()
            .find(|e| e.kind == Kind::Skill && e.name == p.name);
        if let Some(e) = found {
            let content = tokio::fs::read_to_string(&e.path)
                .await
                .map_err(anyhow::Error::from)?;
            return Ok(pb::SkillReadResult {
                content,
                path: e.path.to_string_lossy().into_owned(),
                scope: "global".into(),
            });
        }
        Err(Error::NotFound(format!("no skill named {}", p.name)))
    }

    /// Where a skill of `scope` is written: `<wd>/.snowpea/skills/<name>/SKILL.md`
    /// (project, the default) or `$SNOWPEA_HOME/skills/<name>/SKILL.md` (global).
    fn target(&self, scope: &str, workdir: &str, name: &str) -> Result<PathBuf> {
        match scope {
            "" | "project" => {
                let wd = snowpea_session_core::workdir::check_workdir(workdir)?;
                Ok(wd.join(".snowpea/skills").join(name).join("SKILL.md"))
            }
            "global" => Ok(self.home.root().join("skills").join(name).join("SKILL.md")),
            _ => Err(Error::invalid("params.scope", "must be project or global")),
        }
    }

    /// `skill.write`: validates, writes verbatim, reloads.
    pub async fn write(&self, p: pb::SkillWriteParams) -> Result<snowpea_proto::rpc::v1::OkResult> {
        validate_name(&p.name).map_err(|m| Error::invalid("params.name", m))?;
        validate_skill(&p.name, &p.content)?;
        let path = self.target(&p.scope, &p.workdir, &p.name)?;
        blocking(move || write_skill_file(&path, &p.content)).await?;
        self.reloaded("skill.write");
        Ok(snowpea_proto::rpc::v1::OkResult { ok: true })
    }

    /// `skill.create` with `content`: validates, refuses to overwrite without `force`,
    /// writes, reloads; answers `{name, path}`.
    pub async fn create(&self, p: pb::SkillCreateParams) -> Result<pb::SkillCreateResult> {
        validate_name(&p.name).map_err(|m| Error::invalid("params.name", m))?;
        let Some(content) = p.content.clone() else {
            return Err(Error::invalid(
                "params.content",
                "required unless a description is given",
            ));
        };
        validate_skill(&p.name, &content)?;
        let path = self.target(&p.scope, &p.workdir, &p.name)?;
        if path.exists() && !p.force {
            return Err(Error::invalid(
                "params.force",
                format!("{} exists; pass force to overwrite", path.display()),
            ));
        }
        let at = path.clone();
        blocking(move || write_skill_file(&at, &content)).await?;
        self.reloaded("skill.create");
        Ok(pb::SkillCreateResult {
            name: Some(p.name),
            path: Some(path.to_string_lossy().into_owned()),
            ..Default::default()
        })
    }

    /// Checks a `skill.create` draft before its turn starts: valid name and description,
    /// and no existing file unless `force`. Returns the target path.
    pub fn check_draft(&self, p: &pb::SkillCreateParams) -> Result<PathBuf> {
        validate_name(&p.name).map_err(|m| Error::invalid("params.name", m))?;
        let d = p.description.as_deref().unwrap_or_default().trim();
        let n = d.chars().count();
        if n < DESCRIPTION_CHARS.0 || n > DESCRIPTION_CHARS.1 {
            return Err(Error::invalid(
                "params.description",
                format!(
                    "must have {}–{} characters",
                    DESCRIPTION_CHARS.0, DESCRIPTION_CHARS.1
                ),
            ));
        }
        let path = self.target(&p.scope, &p.workdir, &p.name)?;
        if path.exists() && !p.force {
            return Err(Error::invalid(
                "params.force",
                format!("{} exists; pass force to overwrite", path.display()),
            ));
        }
        Ok(path)
    }

    /// Saves the SKILL.md a drafting turn generated (validated like `skill.write`).
    pub async fn save_draft(&self, name: &str, path: PathBuf, content: String) -> Result<()> {
        validate_skill(name, &content)?;
        blocking(move || write_skill_file(&path, &content)).await?;
        self.reloaded("skill.create");
        Ok(())
    }

    /// `skill.remove`: an installed plugin (`plugins/<name>`; a linked one loses only its
    /// link) or a global skill (`skills/<name>`); `not_found` otherwise.
    pub async fn remove(
        &self,
        p: pb::SkillRemoveParams,
    ) -> Result<snowpea_proto::rpc::v1::OkResult> {
        validate_name(&p.name).map_err(|m| Error::invalid("params.name", m))?;
        let plugin = self.plugins_dir().join(&p.name);
        let skill = self.home.root().join("skills").join(&p.name);
        let removed = blocking(move || {
            for dir in [plugin, skill] {
                match std::fs::symlink_metadata(&dir) {
                    Ok(m) if m.file_type().is_symlink() => {
                        std::fs::remove_file(&dir).map_err(anyhow::Error::from)?;
                        return Ok(true);
                    }
                    Ok(m) if m.is_dir() => {
                        std::fs::remove_dir_all(&dir).map_err(anyhow::Error::from)?;
                        return Ok(true);
                    }
                    _ => {}
                }
            }
            Ok(false)
        })
        .await?;
        if !removed {
            return Err(Error::NotFound(format!(
                "no installed plugin or global skill named {}",
                p.name
            )));
        }
        self.reloaded("skill.remove");
        Ok(snowpea_proto::rpc::v1::OkResult { ok: true })
    }

    /// `skill.reload`: reloads the global roots and announces it.
    pub async fn reload(&self) -> Result<snowpea_proto::rpc::v1::OkResult> {
        self.reloaded("skill.reload");
        Ok(snowpea_proto::rpc::v1::OkResult { ok: true })
    }

    /// `skill.search` (see [`search`]).
    pub async fn search(&self, p: pb::SkillSearchParams) -> Result<pb::SkillSearchResult> {
        let plugins = self.plugins_dir();
        let installed = move |n: &str| {
            validate_name(n).is_ok() && std::fs::symlink_metadata(plugins.join(n)).is_ok()
        };
        Ok(self.sources().search(&p.query, &installed).await)
    }

    /// `skill.install` (see [`install`]); reloads after.
    pub async fn install(
        &self,
        p: pb::SkillInstallParams,
    ) -> Result<snowpea_proto::rpc::v1::OkResult> {
        let name =
            install::install(&self.plugins_dir(), &p.source, p.link, &self.sources()).await?;
        tracing::info!(plugin = %name, link = p.link, "plugin installed");
        self.reloaded("skill.install");
        Ok(snowpea_proto::rpc::v1::OkResult { ok: true })
    }
}

/// Shared handle.
pub type SharedSkills = Arc<Skills>;

#[cfg(test)]
#[path = "skills_tests.rs"]
mod tests;
