//! `skill.install{source, link}`: puts a plugin (or a single skill) under
//! `$SNOWPEA_HOME/plugins/<name>` and nowhere else.
//!
//! Sources: a local directory (copied, or with `link` symlinked), a local archive
//! (`.tar`, `.tar.gz`, `.tgz`), a git URL (`https://…`, `ssh://…`, `git@…`, `file://…`, or
//! anything ending in `.git`; cloned with `git clone --depth 1`, no hooks run), `registry:<id>`,
//! `github:owner/repo[@plugin]` and `<marketplace>/<plugin>` (resolved to one of the former).
//!
//! Install never runs code from the plugin. Everything is first staged in
//! `plugins/.staging-<id>` and renamed into place; an archive or directory entry that would
//! land outside it (absolute, `..`, a symlink pointing out) is refused with `invalid_params`
//! and nothing is installed. Files are written 0600, folders 0700.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use snowpea_session_error::{Error, Result};

use super::loader;
use super::search::Sources;

/// Longest a `git clone` may take.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest archive or directory copied, in bytes.
pub const MAX_INSTALL_BYTES: u64 = 256 * 1024 * 1024;

const FIELD: &str = "params.source";

fn invalid(msg: impl std::fmt::Display) -> Error {
    Error::invalid(FIELD, msg)
}

/// How a source string is read.
#[derive(Debug, PartialEq, Eq)]
pub enum Source {
    /// A local directory.
    Dir(PathBuf),
    /// A local archive.
    Archive(PathBuf),
    /// A git URL, with an optional sub-folder holding the plugin.
    Git(String, Option<String>),
    /// `registry:<id>`.
    Registry(String),
    /// `<marketplace>/<plugin>`.
    Marketplace(String, String),
}

fn is_archive(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    l.ends_with(".tar") || l.ends_with(".tar.gz") || l.ends_with(".tgz")
}

/// Classifies `source` (see the module doc).
pub fn classify(source: &str) -> Result<Source> {
    let s = source.trim();
    if s.is_empty() {
        return Err(invalid("must not be empty"));
    }
    if s.contains('\0') {
        return Err(invalid("must not contain NUL"));
    }
    if let Some(id) = s.strip_prefix("registry:") {
        if id.is_empty() {
            return Err(invalid("registry:<id> needs an id"));
        }
        return Ok(Source::Registry(id.to_owned()));
    }
    if let Some(rest) = s.strip_prefix("github:") {
        let (repo, plugin) = match rest.split_once('@') {
            Some((r, p)) => (r, Some(p.to_owned())),
            None => (rest, None),
        };
        let parts: Vec<_> = repo.split('/').collect();
        let ok = |p: &str| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        if parts.len() != 2 || !parts.iter().all(|p| ok(p)) {
            return Err(invalid(
                "github: sources look like github:owner/repo[@plugin]",
            ));
        }
        return Ok(Source::Git(
            format!("https://github.com/{repo}.git"),
            plugin,
        ));
    }
    let path = Path::new(s);
    if s.starts_with("https://")
        || s.starts_with("http://")
        || s.starts_with("ssh://")
        || s.starts_with("git@")
        || s.starts_with("file://")
        || (s.ends_with(".git") && !path.is_dir())
    {
        if s.starts_with('-') {
            return Err(invalid("must not start with '-'"));
        }
        return Ok(Source::Git(s.to_owned(), None));
    }
    if path.is_absolute() || s.starts_with("./") || s.starts_with("../") || s.starts_with('~') {
        if !path.exists() {
            return Err(invalid(format!("{s}: no such file or directory")));
        }
        if path.is_dir() {
            return Ok(Source::Dir(path.to_path_buf()));
        }
        if is_archive(s) {
            return Ok(Source::Archive(path.to_path_buf()));
        }
        return Err(invalid(format!(
            "{s}: neither a directory nor a .tar/.tar.gz/.tgz archive"
        )));
    }
    if let Some((m, p)) = s.split_once('/') {
        if !m.is_empty() && !p.is_empty() && !p.contains('/') {
            return Ok(Source::Marketplace(m.to_owned(), p.to_owned()));
        }
    }
    Err(invalid(format!(
        "{s}: expected an absolute path, a git URL, <marketplace>/<plugin>, registry:<id> or github:owner/repo[@plugin]"
    )))
}

/// A folder in `plugins/` removed on drop unless [`Staging::keep`] is called.
struct Staging {
    dir: PathBuf,
    keep: bool,
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn mkdir_private(p: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(p)?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
}

/// True when `rel` stays inside its base: relative, no `..`, no root or prefix.
fn stays_inside(rel: &Path) -> bool {
    let mut depth: i64 = 0;
    for c in rel.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// True when a symlink at `link_rel` (relative to the base) pointing at `target` resolves
/// inside the base.
fn link_stays_inside(link_rel: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let parent = link_rel.parent().unwrap_or(Path::new(""));
    stays_inside(&parent.join(target))
}

/// Unpacks `archive` into `dest`, refusing (before writing anything) any entry whose path or
/// link target leaves `dest`, and any entry that is not a file, folder or symlink.
pub fn unpack_archive(archive: &Path, dest: &Path) -> Result<()> {
    let open = || -> Result<tar::Archive<Box<dyn Read>>> {
        let f = std::fs::File::open(archive)
            .map_err(|e| invalid(format!("{}: {e}", archive.display())))?;
        let lower = archive.to_string_lossy().to_ascii_lowercase();
        let r: Box<dyn Read> = if lower.ends_with(".gz") || lower.ends_with(".tgz") {
            Box::new(flate2::read::GzDecoder::new(f))
        } else {
            Box::new(f)
        };
        Ok(tar::Archive::new(r))
    };
    // Pass 1: check every entry; nothing is written until all are known to be safe.
    let mut total: u64 = 0;
    let mut a = open()?;
    for e in a
        .entries()
        .map_err(|e| invalid(format!("not a readable archive: {e}")))?
    {
        let e = e.map_err(|e| invalid(format!("not a readable archive: {e}")))?;
        let path = e
            .path()
            .map_err(|err| invalid(format!("archive entry with a bad name: {err}")))?
            .into_owned();
        if !stays_inside(&path) {
            return Err(invalid(format!(
                "archive entry {} would be written outside the plugin folder",
                path.display()
            )));
        }
        let ty = e.header().entry_type();
        if ty.is_symlink() || ty.is_hard_link() {
            let target = e
                .link_name()
                .ok()
                .flatten()
                .map(|t| t.into_owned())
                .unwrap_or_default();
            let inside = if ty.is_hard_link() {
                stays_inside(&target)
            } else {
                link_stays_inside(&path, &target)
            };
            if !inside {
                return Err(invalid(format!(
                    "archive entry {} links outside the plugin folder ({})",
                    path.display(),
                    target.display()
                )));
            }
        } else if !(ty.is_file()
            || ty.is_dir()
            || ty.is_pax_global_extensions()
            || ty.is_pax_local_extensions()
            || ty.is_gnu_longname()
            || ty.is_gnu_longlink())
        {
            return Err(invalid(format!(
                "archive entry {} is not a file, folder or link",
                path.display()
            )));
        }
        total += e.header().size().unwrap_or(0);
        if total > MAX_INSTALL_BYTES {
            return Err(invalid(format!(
                "archive holds more than {MAX_INSTALL_BYTES} bytes"
            )));
        }
    }
    // Pass 2: unpack (tar's own unpack_in refuses `..` and absolute paths once more).
    let mut a = open()?;
    a.set_preserve_permissions(false);
    a.set_overwrite(false);
    for e in a
        .entries()
        .map_err(|e| invalid(format!("not a readable archive: {e}")))?
    {
        let mut e = e.map_err(|e| invalid(format!("not a readable archive: {e}")))?;
        let unpacked = e
            .unpack_in(dest)
            .map_err(|err| invalid(format!("cannot unpack: {err}")))?;
        if !unpacked {
            return Err(invalid("archive entry outside the plugin folder"));
        }
    }
    restrict_tree(dest)?;
    Ok(())
}

/// Sets 0700 on every folder and 0600 on every file under `dir` (symlinks untouched).
fn restrict_tree(dir: &Path) -> Result<()> {
    for e in walk(dir)? {
        let meta = std::fs::symlink_metadata(&e).map_err(anyhow::Error::from)?;
        let mode = if meta.is_dir() {
            0o700
        } else if meta.is_file() {
            0o600
        } else {
            continue;
        };
        std::fs::set_permissions(&e, std::fs::Permissions::from_mode(mode))
            .map_err(anyhow::Error::from)?;
    }
    Ok(())
}

fn walk(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        let p = out[i].clone();
        i += 1;
        if std::fs::symlink_metadata(&p)
            .map(|m| m.is_dir())
            .unwrap_or(false)
        {
            for e in std::fs::read_dir(&p)
                .map_err(anyhow::Error::from)?
                .flatten()
            {
                out.push(e.path());
            }
        }
    }
    Ok(out)
}

/// Copies the directory `src` into `dest` (which exists), leaving out `.git`; a symlink is
/// copied as a symlink only when it points inside `src`, otherwise the install is refused.
pub fn copy_dir(src: &Path, dest: &Path) -> Result<()> {
    let mut total = 0u64;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let from = src.join(&rel);
        let rd =
            std::fs::read_dir(&from).map_err(|e| invalid(format!("{}: {e}", from.display())))?;
        for e in rd.flatten() {
            let name = e.file_name();
            if rel.as_os_str().is_empty() && name == ".git" {
                continue;
            }
            let r = rel.join(&name);
            let meta = std::fs::symlink_metadata(e.path()).map_err(anyhow::Error::from)?;
            let to = dest.join(&r);
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(e.path()).map_err(anyhow::Error::from)?;
                if !link_stays_inside(&r, &target) {
                    return Err(invalid(format!(
                        "{} links outside the plugin folder ({})",
                        r.display(),
                        target.display()
                    )));
                }
                std::os::unix::fs::symlink(&target, &to).map_err(anyhow::Error::from)?;
            } else if meta.is_dir() {
                mkdir_private(&to).map_err(anyhow::Error::from)?;
                stack.push(r);
            } else if meta.is_file() {
                total += meta.len();
                if total > MAX_INSTALL_BYTES {
                    return Err(invalid(format!(
                        "the source holds more than {MAX_INSTALL_BYTES} bytes"
                    )));
                }
                std::fs::copy(e.path(), &to).map_err(anyhow::Error::from)?;
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600))
                    .map_err(anyhow::Error::from)?;
            }
        }
    }
    Ok(())
}

/// Runs `git clone --depth 1 -- <url> <dest>` (arguments, never a shell string; no
/// terminal prompt; at most [`GIT_TIMEOUT`]).
pub async fn git_clone(url: &str, dest: &Path) -> Result<()> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.args([
        "clone",
        "--depth",
        "1",
        "--quiet",
        "--no-recurse-submodules",
        "--",
    ])
    .arg(url)
    .arg(dest)
    .env("GIT_TERMINAL_PROMPT", "0")
    .env("GIT_ASKPASS", "true")
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|e| Error::Unavailable(format!("cannot run git: {e}")))?;
    let out = match tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output()).await {
        Ok(r) => r.map_err(anyhow::Error::from)?,
        Err(_) => {
            return Err(invalid(format!(
                "git clone of {url} took longer than {}s",
                GIT_TIMEOUT.as_secs()
            )))
        }
    };
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(invalid(format!(
            "git clone of {url} failed: {}",
            err.trim().lines().last().unwrap_or("unknown error")
        )));
    }
    Ok(())
}

/// The name a staged plugin is installed under: `plugin.json` `name`, else a root SKILL.md's
/// `name`, else `fallback`; it must be a valid skill name.
fn plugin_name(staged: &Path, fallback: &str) -> Result<String> {
    let manifest = [".claude-plugin/plugin.json", "plugin.json"]
        .iter()
        .map(|p| staged.join(p))
        .find(|p| p.is_file());
    let mut name = None;
    if let Some(m) = manifest {
        let text = std::fs::read_to_string(&m).map_err(anyhow::Error::from)?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| invalid(format!("plugin.json: {e}")))?;
        name = v.get("name").and_then(|n| n.as_str()).map(str::to_owned);
    } else if staged.join("SKILL.md").is_file() {
        let text = std::fs::read_to_string(staged.join("SKILL.md")).map_err(anyhow::Error::from)?;
        let (front, _) = loader::parse(&text).map_err(|e| invalid(format!("SKILL.md: {e}")))?;
        name = front.name;
    }
    let name = name.unwrap_or_else(|| {
        fallback
            .trim_end_matches(".git")
            .trim_end_matches(".tgz")
            .trim_end_matches(".tar.gz")
            .trim_end_matches(".tar")
            .to_ascii_lowercase()
    });
    super::validate_name(&name).map_err(|m| invalid(format!("plugin name {name:?}: {m}")))?;
    Ok(name)
}

/// A single skill (a SKILL.md at the top) becomes `skills/<name>/…` of its plugin folder.
fn wrap_single_skill(staged: &Path, name: &str) -> Result<()> {
    if !staged.join("SKILL.md").is_file() {
        return Ok(());
    }
    let inner = staged.join(format!(".wrap-{}", uuid::Uuid::new_v4().simple()));
    mkdir_private(&inner).map_err(anyhow::Error::from)?;
    for e in std::fs::read_dir(staged)
        .map_err(anyhow::Error::from)?
        .flatten()
    {
        if e.path() != inner {
            std::fs::rename(e.path(), inner.join(e.file_name())).map_err(anyhow::Error::from)?;
        }
    }
    let skills = staged.join("skills");
    mkdir_private(&skills).map_err(anyhow::Error::from)?;
    std::fs::rename(&inner, skills.join(name)).map_err(anyhow::Error::from)?;
    Ok(())
}

/// The last path segment of a URL or path (the fallback plugin name).
fn last_segment(s: &str) -> String {
    s.trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or(s)
        .to_owned()
}

/// Installs `source` into `plugins_dir/<name>` and returns the name. `sources` resolves
/// marketplace and registry names.
pub async fn install(
    plugins_dir: &Path,
    source: &str,
    link: bool,
    sources: &Sources,
) -> Result<String> {
    let mut src = classify(source)?;
    // Marketplace and registry names resolve to one of the others (one hop, no loops).
    match &src {
        Source::Registry(id) => {
            let s = sources.registry_source(id).await?;
            src = classify(&s)?;
        }
        Source::Marketplace(m, p) => {
            let s = sources.marketplace_source(m, p).await?;
            src = classify(&s)?;
        }
        _ => {}
    }
    if matches!(src, Source::Registry(_) | Source::Marketplace(..)) {
        return Err(invalid(
            "a registry or marketplace entry points at another one",
        ));
    }
    if link && !matches!(src, Source::Dir(_)) {
        return Err(Error::invalid(
            "params.link",
            "only a local plugin directory can be linked",
        ));
    }
    mkdir_private(plugins_dir).map_err(anyhow::Error::from)?;
    if let Source::Dir(dir) = &src {
        if link {
            let dir = std::fs::canonicalize(dir).map_err(anyhow::Error::from)?;
            let fallback = last_segment(&dir.to_string_lossy());
            if dir.join("SKILL.md").is_file() {
                return Err(Error::invalid(
                    "params.link",
                    "a single skill cannot be linked; link a plugin folder (plugin.json, skills/…)",
                ));
            }
            let name = plugin_name(&dir, &fallback)?;
            let dest = plugins_dir.join(&name);
            if std::fs::symlink_metadata(&dest).is_ok() {
                return Err(invalid(format!(
                    "{name} is already installed; skill.remove it first"
                )));
            }
            std::os::unix::fs::symlink(&dir, &dest).map_err(anyhow::Error::from)?;
            return Ok(name);
        }
    }
    let staging = Staging {
        dir: plugins_dir.join(format!(".staging-{}", uuid::Uuid::new_v4().simple())),
        keep: false,
    };
    let (root, fallback) = match &src {
        Source::Dir(dir) => {
            mkdir_private(&staging.dir).map_err(anyhow::Error::from)?;
            let d = dir.clone();
            let s = staging.dir.clone();
            crate::blocking(move || copy_dir(&d, &s)).await?;
            (staging.dir.clone(), last_segment(&dir.to_string_lossy()))
        }
        Source::Archive(a) => {
            mkdir_private(&staging.dir).map_err(anyhow::Error::from)?;
            let a2 = a.clone();
            let s = staging.dir.clone();
            crate::blocking(move || unpack_archive(&a2, &s)).await?;
            // An archive holding one top folder is that folder.
            let entries: Vec<_> = std::fs::read_dir(&staging.dir)
                .map_err(anyhow::Error::from)?
                .flatten()
                .collect();
            let root = if entries.len() == 1 && entries[0].path().is_dir() {
                entries[0].path()
            } else {
                staging.dir.clone()
            };
            (root, last_segment(&a.to_string_lossy()))
        }
        Source::Git(url, sub) => {
            let clone = staging.dir.join("clone");
            mkdir_private(&staging.dir).map_err(anyhow::Error::from)?;
            git_clone(url, &clone).await?;
            let _ = std::fs::remove_dir_all(clone.join(".git"));
            // Nothing a clone holds may point outside it either.
            let c = clone.clone();
            crate::blocking(move || check_links(&c)).await?;
            restrict_tree(&clone)?;
            match sub {
                Some(p) => {
                    if !stays_inside(Path::new(p)) {
                        return Err(invalid("the @plugin part must be a relative folder"));
                    }
                    let cand = [clone.join("plugins").join(p), clone.join(p)];
                    let Some(root) = cand.into_iter().find(|c| c.is_dir()) else {
                        return Err(invalid(format!("{url} has no plugin folder {p}")));
                    };
                    (root, p.clone())
                }
                None => (clone.clone(), last_segment(url)),
            }
        }
        Source::Registry(_) | Source::Marketplace(..) => unreachable!("resolved above"),
    };
    let name = plugin_name(&root, &fallback)?;
    wrap_single_skill(&root, &name)?;
    let dest = plugins_dir.join(&name);
    if std::fs::symlink_metadata(&dest).is_ok() {
        return Err(invalid(format!(
            "{name} is already installed; skill.remove it first"
        )));
    }
    std::fs::rename(&root, &dest).map_err(anyhow::Error::from)?;
    Ok(name)
}

/// Refuses a tree holding a symlink that points outside it.
fn check_links(dir: &Path) -> Result<()> {
    for p in walk(dir)? {
        let meta = std::fs::symlink_metadata(&p).map_err(anyhow::Error::from)?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&p).map_err(anyhow::Error::from)?;
            let rel = p.strip_prefix(dir).unwrap_or(&p);
            if !link_stays_inside(rel, &target) {
                return Err(invalid(format!(
                    "{} links outside the plugin folder ({})",
                    rel.display(),
                    target.display()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_sources() {
        assert_eq!(
            classify("github:o/r@p").unwrap(),
            Source::Git("https://github.com/o/r.git".into(), Some("p".into()))
        );
        assert_eq!(
            classify("registry:abc").unwrap(),
            Source::Registry("abc".into())
        );
        assert_eq!(
            classify("mkt/plug").unwrap(),
            Source::Marketplace("mkt".into(), "plug".into())
        );
        assert!(matches!(
            classify("file:///x/y.git").unwrap(),
            Source::Git(..)
        ));
        assert!(classify("github:../x").is_err());
        assert!(classify("").is_err());
        assert!(classify("/definitely/not/here").is_err());
        assert!(classify("plain").is_err());
    }

    #[test]
    fn inside_checks() {
        assert!(stays_inside(Path::new("a/b/../c")));
        assert!(!stays_inside(Path::new("a/../../c")));
        assert!(!stays_inside(Path::new("/etc/passwd")));
        assert!(link_stays_inside(Path::new("a/l"), Path::new("../b")));
        assert!(!link_stays_inside(Path::new("a/l"), Path::new("../../b")));
        assert!(!link_stays_inside(Path::new("l"), Path::new("/etc")));
    }
}
