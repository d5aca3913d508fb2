//! The SKILL.md / plugin loader (upstream-behaviour §3 "Skills and plugins"), reusable by
//! every family that reads definitions from the same roots (skills, markdown commands, agent
//! definitions).
//!
//! Search roots, in order; a later root wins a name clash of the same kind:
//! 1. built-ins (none are bundled in this build),
//! 2. `$SNOWPEA_HOME/{skills,agents,commands}` (source `global`),
//! 3. `~/.claude/{skills,agents,commands}` (source `global`),
//! 4. `$SNOWPEA_HOME/plugins/<p>/` in Claude Code's plugin layout (source `plugin:<p>`),
//! 5. Claude Code's installed plugins (`~/.claude/plugins/installed_plugins.json`),
//! 6. `<workdir>/.claude`, then `<workdir>/.snowpea` (source `project`).
//!
//! A file that cannot be read or whose frontmatter is malformed is kept as an [`Entry`] with
//! its [`Entry::error`]: listed, never a crash, never silently dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Largest definition file read, in bytes (a larger one is listed with an error).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// What a definition is (`skill.list` `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `skills/<name>/SKILL.md`.
    Skill,
    /// `agents/<name>.md`.
    Agent,
    /// `commands/<name>.md`.
    Command,
    /// A plugin folder (`plugin.json`).
    Plugin,
}

impl Kind {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Skill => "skill",
            Kind::Agent => "agent",
            Kind::Command => "command",
            Kind::Plugin => "plugin",
        }
    }
}

/// Where a root is (`skill.read` `scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Home, `~/.claude`, plugins.
    Global,
    /// A workdir's `.claude` / `.snowpea`.
    Project,
}

impl Scope {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Project => "project",
        }
    }
}

/// One search root: a folder holding `skills/`, `agents/`, `commands/`.
#[derive(Debug, Clone)]
pub struct Root {
    /// The folder.
    pub dir: PathBuf,
    /// `global`, `project` or `plugin:<name>`.
    pub source: String,
    /// Global or project.
    pub scope: Scope,
}

/// The frontmatter fields the loader understands (the rest stays in [`Entry::meta`]).
#[derive(Debug, Clone, Default)]
pub struct Frontmatter {
    /// `name`.
    pub name: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `argument-hint`.
    pub argument_hint: Option<String>,
    /// `allowed-tools` (a list, or one comma/space separated string); `None` when absent.
    pub allowed_tools: Option<Vec<String>>,
    /// `user-invocable` (default true): false hides it from the command list.
    pub user_invocable: bool,
    /// Every field, as JSON.
    pub meta: Map<String, Value>,
}

/// One definition found under a root.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its kind.
    pub kind: Kind,
    /// Its name (frontmatter `name`, else the file or folder name).
    pub name: String,
    /// One-line summary (frontmatter `description`).
    pub summary: String,
    /// `global`, `project` or `plugin:<name>`.
    pub source: String,
    /// Global or project.
    pub scope: Scope,
    /// The file (SKILL.md, `<name>.md`, `plugin.json`).
    pub path: PathBuf,
    /// Parsed frontmatter.
    pub front: Frontmatter,
    /// Text after the frontmatter.
    pub body: String,
    /// Why it could not be loaded, if it could not.
    pub error: Option<String>,
}

/// Splits `text` into its YAML frontmatter (between a first line `---` and the next `---`
/// line) and body, and parses the frontmatter with a YAML parser. No frontmatter is an
/// empty [`Frontmatter`]; malformed YAML or a frontmatter that is not a mapping is an error.
pub fn parse(text: &str) -> Result<(Frontmatter, String), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok((
            Frontmatter {
                user_invocable: true,
                ..Default::default()
            },
            text.to_owned(),
        ));
    };
    let mut yaml_end = None;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            yaml_end = Some((offset, offset + line.len()));
            break;
        }
        offset += line.len();
    }
    let Some((end, body_start)) = yaml_end else {
        return Err("frontmatter: no closing '---' line".into());
    };
    let yaml = &rest[..end];
    let value: Value = if yaml.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        let v: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(yaml).map_err(|e| format!("frontmatter: {e}"))?;
        serde_json::to_value(v).map_err(|e| format!("frontmatter: {e}"))?
    };
    let Value::Object(meta) = value else {
        return Err("frontmatter: must be a mapping of fields".into());
    };
    let text_of = |k: &str| -> Result<Option<String>, String> {
        match meta.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(format!("frontmatter.{k}: must be a string")),
        }
    };
    let allowed_tools = match meta.get("allowed-tools") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(
            s.split(|c: char| c == ',' || c.is_whitespace())
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
        Some(Value::Array(a)) => {
            let mut out = Vec::new();
            for (i, t) in a.iter().enumerate() {
                match t.as_str() {
                    Some(s) => out.push(s.trim().to_owned()),
                    None => {
                        return Err(format!("frontmatter.allowed-tools[{i}]: must be a string"))
                    }
                }
            }
            Some(out)
        }
        Some(_) => return Err("frontmatter.allowed-tools: must be a list or a string".into()),
    };
    let user_invocable = match meta.get("user-invocable") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("frontmatter.user-invocable: must be true or false".into()),
    };
    Ok((
        Frontmatter {
            name: text_of("name")?,
            description: text_of("description")?,
            argument_hint: text_of("argument-hint")?,
            allowed_tools,
            user_invocable,
            meta: meta.clone(),
        },
        rest[body_start..].to_owned(),
    ))
}

/// The global roots, in order (1–5 of the module doc). `claude_home` is `~/.claude`
/// (`None` when there is no home directory).
pub fn global_roots(snowpea_home: &Path, claude_home: Option<&Path>) -> Vec<Root> {
    let mut roots = vec![Root {
        dir: snowpea_home.to_path_buf(),
        source: "global".into(),
        scope: Scope::Global,
    }];
    if let Some(c) = claude_home {
        roots.push(Root {
            dir: c.to_path_buf(),
            source: "global".into(),
            scope: Scope::Global,
        });
    }
    roots.extend(plugin_roots(&snowpea_home.join("plugins")));
    if let Some(c) = claude_home {
        roots.extend(claude_plugin_roots(c));
    }
    roots
}

/// The project roots of `workdir`: `.claude`, then `.snowpea`.
pub fn project_roots(workdir: &Path) -> Vec<Root> {
    [".claude", ".snowpea"]
        .iter()
        .map(|d| Root {
            dir: workdir.join(d),
            source: "project".into(),
            scope: Scope::Project,
        })
        .collect()
}

/// Every plugin folder directly under `dir` (sorted by name), as roots `plugin:<name>`.
pub fn plugin_roots(dir: &Path) -> Vec<Root> {
    let mut names: Vec<_> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| !n.starts_with('.'))
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
        .into_iter()
        .map(|n| Root {
            dir: dir.join(&n),
            source: format!("plugin:{n}"),
            scope: Scope::Global,
        })
        .collect()
}

/// Claude Code's installed plugins: the `installPath`s of
/// `~/.claude/plugins/installed_plugins.json` (any nesting of objects and arrays).
fn claude_plugin_roots(claude_home: &Path) -> Vec<Root> {
    let Ok(text) = std::fs::read_to_string(claude_home.join("plugins/installed_plugins.json"))
    else {
        return Vec::new();
    };
    let Ok(json) = serde_json::from_str::<Value>(&text) else {
        tracing::warn!("~/.claude/plugins/installed_plugins.json is not JSON; skipped");
        return Vec::new();
    };
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<PathBuf>) {
        match v {
            Value::Object(m) => {
                if let Some(p) = m.get("installPath").and_then(Value::as_str) {
                    out.push(PathBuf::from(p));
                }
                m.values().for_each(|v| walk(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&json, &mut out);
    out.into_iter()
        .filter(|p| p.is_dir())
        .map(|p| {
            let n = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("plugin")
                .to_owned();
            Root {
                dir: p,
                source: format!("plugin:{n}"),
                scope: Scope::Global,
            }
        })
        .collect()
}

fn read_capped(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))
}

fn entry(root: &Root, kind: Kind, fallback_name: &str, path: PathBuf) -> Entry {
    let mut e = Entry {
        kind,
        name: fallback_name.to_owned(),
        summary: String::new(),
        source: root.source.clone(),
        scope: root.scope,
        path,
        front: Frontmatter {
            user_invocable: true,
            ..Default::default()
        },
        body: String::new(),
        error: None,
    };
    match read_capped(&e.path).and_then(|t| parse(&t)) {
        Ok((front, body)) => {
            if kind == Kind::Skill {
                if let Some(n) = front.name.as_deref().filter(|n| !n.is_empty()) {
                    e.name = n.to_owned();
                }
            }
            e.summary = front
                .description
                .clone()
                .unwrap_or_else(|| first_line(&body));
            e.front = front;
            e.body = body;
        }
        Err(err) => e.error = Some(err),
    }
    e
}

fn first_line(body: &str) -> String {
    body.lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

fn sorted_dir(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// Loads every definition of one root (skills, agents, commands, and the plugin itself when
/// the root is a plugin).
pub fn load_root(root: &Root) -> Vec<Entry> {
    let mut out = Vec::new();
    if root.source.starts_with("plugin:") {
        let manifest = [".claude-plugin/plugin.json", "plugin.json"]
            .iter()
            .map(|p| root.dir.join(p))
            .find(|p| p.is_file());
        let name = root.source.trim_start_matches("plugin:").to_owned();
        let mut e = Entry {
            kind: Kind::Plugin,
            name,
            summary: String::new(),
            source: root.source.clone(),
            scope: root.scope,
            path: manifest.clone().unwrap_or_else(|| root.dir.clone()),
            front: Frontmatter {
                user_invocable: false,
                ..Default::default()
            },
            body: String::new(),
            error: None,
        };
        if let Some(m) = manifest {
            match read_capped(&m)
                .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()))
            {
                Ok(Value::Object(o)) => {
                    e.summary = o
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    e.front.meta = o;
                }
                Ok(_) => e.error = Some("plugin.json: must be an object".into()),
                Err(err) => e.error = Some(format!("plugin.json: {err}")),
            }
        }
        out.push(e);
    }
    for dir in sorted_dir(&root.dir.join("skills")) {
        let md = dir.join("SKILL.md");
        if dir.is_dir() && md.is_file() {
            let n = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            out.push(entry(root, Kind::Skill, n, md));
        }
    }
    for (sub, kind) in [("agents", Kind::Agent), ("commands", Kind::Command)] {
        for file in sorted_dir(&root.dir.join(sub)) {
            if file.extension().and_then(|e| e.to_str()) != Some("md") || !file.is_file() {
                continue;
            }
            let n = file
                .file_stem()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            out.push(entry(root, kind, &n, file));
        }
    }
    out
}

/// Loads `roots` in order; a later root's entry replaces an earlier one of the same kind and
/// name. Sorted by kind, then name.
pub fn load(roots: &[Root]) -> Vec<Entry> {
    let mut by: BTreeMap<(Kind, String), Entry> = BTreeMap::new();
    for root in roots {
        for e in load_root(root) {
            by.insert((e.kind, e.name.clone()), e);
        }
    }
    by.into_values().collect()
}

/// Replaces `$ARGUMENTS` (and `${ARGUMENTS}`) in `body` with `args`; when the body has no
/// placeholder and `args` is not empty, the arguments are appended on their own line.
pub fn substitute(body: &str, args: &str) -> String {
    if body.contains("$ARGUMENTS") || body.contains("${ARGUMENTS}") {
        body.replace("${ARGUMENTS}", args)
            .replace("$ARGUMENTS", args)
    } else if args.trim().is_empty() {
        body.to_owned()
    } else {
        format!("{}\n\nARGUMENTS: {args}", body.trim_end())
    }
}
