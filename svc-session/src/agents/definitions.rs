//! Agent definitions (issue 19 "Agent definitions"; upstream-behaviour §4): Markdown files
//! with YAML frontmatter — `name`, `description`, `model` (default `inherit`), `tools` (`*`
//! or a list), `permission`, `max_turns` — whose body is the agent's prompt. They are found
//! by the skills loader ([`snowpea_session_skills::loader`]) under the same roots as skills:
//! `<workdir>/.snowpea/agents/`, `<workdir>/.claude/agents/`, `$SNOWPEA_HOME/agents/`,
//! `~/.claude/agents/` and installed plugins (a later root wins a clash of names).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::permissions::Mode;
use snowpea_session_error::{Error, Result};
use snowpea_session_skills::{Kind, Skills};

/// Longest agent name, characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest prompt (body) a definition may have, characters.
pub const MAX_PROMPT_CHARS: usize = 32_000;
/// Largest `max_turns` accepted.
pub const MAX_TURNS_LIMIT: u64 = 1000;

/// One agent definition, parsed and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// Its name (`^[a-z0-9][a-z0-9._-]*$`).
    pub name: String,
    /// One line for people and for the delegating model.
    pub description: String,
    /// The model assignment: a `models.profiles` id, `vendor:model` or a vendor; `None` for
    /// `inherit` (the session's routing decides).
    pub model: Option<String>,
    /// The tool allowlist; `None` for `*` (every tool).
    pub tools: Option<Vec<String>>,
    /// `permission`: the mode the agent runs in (`plan`, `accept`, `auto`; `default` or
    /// absent keeps the mode it is given). Applied by [`Definition::mode_under`].
    pub permission: Option<String>,
    /// The tool-round budget (`max_turns`); `None` uses the session's.
    pub max_turns: Option<usize>,
    /// The agent's prompt (the body), used as the persona layer of the system prompt.
    pub prompt: String,
    /// The file it was read from.
    pub path: PathBuf,
    /// `global`, `project` or `plugin:<name>`.
    pub source: String,
}

impl Definition {
    /// The mode the definition names (`None` for `default` or no `permission`).
    pub fn mode(&self) -> Option<Mode> {
        self.permission.as_deref().and_then(Mode::parse)
    }

    /// The mode a session runs in as this definition when it would otherwise run in
    /// `given` (a delegated child: its parent's mode; `session.setAgent` /
    /// `session.create{agent}`: the session's mode): the definition's own mode, but never
    /// more permissive than `given` — a definition (possibly a project file from a cloned
    /// repository) can narrow what the person chose, never widen it.
    pub fn mode_under(&self, given: Mode) -> Mode {
        self.mode().map_or(given, |m| given.narrower(m))
    }
}

/// True when `name` is a valid agent name (`^[a-z0-9][a-z0-9._-]*$`, at most
/// [`MAX_NAME_CHARS`]).
pub fn is_slug(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().count() <= MAX_NAME_CHARS
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
}

/// `name` turned into a valid agent name (lower case, runs of other characters become `-`),
/// or `None` when nothing usable is left.
pub fn slugify(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.trim().chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || "._".contains(c) {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out: String = out
        .trim_matches(|c| "-._".contains(c))
        .chars()
        .take(MAX_NAME_CHARS)
        .collect();
    let out = out.trim_end_matches(|c| "-._".contains(c)).to_owned();
    is_slug(&out).then_some(out)
}

/// Checks an agent name given as `field`.
pub fn check_name(field: &str, name: &str) -> Result<()> {
    if name.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if !is_slug(name) {
        return Err(Error::invalid(
            field,
            format!(
                "{name:?} is not an agent name: lower-case letters, digits, '.', '_' and '-', \
                 starting with a letter or digit, at most {MAX_NAME_CHARS} characters"
            ),
        ));
    }
    Ok(())
}

/// Builds a definition from its frontmatter fields (`meta`, as JSON) and body; the error
/// names the bad field as `frontmatter.<field>`.
pub fn from_parts(
    name: &str,
    meta: &serde_json::Map<String, Value>,
    body: &str,
    path: PathBuf,
    source: String,
) -> std::result::Result<Definition, String> {
    let text = |k: &str| -> std::result::Result<Option<String>, String> {
        match meta.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
            Some(_) => Err(format!("frontmatter.{k}: must be a string")),
        }
    };
    let model = text("model")?.filter(|m| m != "inherit");
    let tools = match meta.get("tools") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim() == "*" => None,
        Some(Value::String(s)) => Some(
            s.split(|c: char| c == ',' || c.is_whitespace())
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
        Some(Value::Array(a)) => {
            let mut out = Vec::new();
            for (i, t) in a.iter().enumerate() {
                match t.as_str().map(str::trim) {
                    Some("*") => return definition_all_tools(name, meta, body, path, source),
                    Some(s) if !s.is_empty() => out.push(s.to_owned()),
                    _ => return Err(format!("frontmatter.tools[{i}]: must be a tool name")),
                }
            }
            Some(out)
        }
        Some(_) => return Err("frontmatter.tools: must be '*' or a list of tool names".into()),
    };
    let max_turns = match meta.get("max_turns").or_else(|| meta.get("maxTurns")) {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_TURNS_LIMIT).contains(&n) => Some(n as usize),
            _ => {
                return Err(format!(
                    "frontmatter.max_turns: must be a whole number from 1 to {MAX_TURNS_LIMIT}"
                ))
            }
        },
    };
    let permission = text("permission")?;
    if let Some(p) = &permission {
        if !["plan", "accept", "auto", "default"].contains(&p.as_str()) {
            return Err(format!(
                "frontmatter.permission: must be plan, accept or auto, not {p:?}"
            ));
        }
    }
    if body.chars().count() > MAX_PROMPT_CHARS {
        return Err(format!(
            "body: the prompt is longer than {MAX_PROMPT_CHARS} characters"
        ));
    }
    Ok(Definition {
        name: name.to_owned(),
        description: text("description")?.unwrap_or_default(),
        model,
        tools,
        permission,
        max_turns,
        prompt: body.trim().to_owned(),
        path,
        source,
    })
}

fn definition_all_tools(
    name: &str,
    meta: &serde_json::Map<String, Value>,
    body: &str,
    path: PathBuf,
    source: String,
) -> std::result::Result<Definition, String> {
    let mut m = meta.clone();
    m.insert("tools".into(), Value::String("*".into()));
    from_parts(name, &m, body, path, source)
}

/// Every agent definition visible from `workdir` (or the global ones), by name; a file with
/// an error is returned as `Err((name, path, why))`.
pub fn all(
    skills: &Skills,
    workdir: Option<&Path>,
) -> Vec<std::result::Result<Definition, (String, PathBuf, String)>> {
    skills
        .catalog(workdir)
        .into_iter()
        .filter(|e| e.kind == Kind::Agent)
        .map(|e| {
            if let Some(err) = e.error {
                return Err((e.name, e.path, err));
            }
            let name = e.name.clone();
            from_parts(&e.name, &e.front.meta, &e.body, e.path.clone(), e.source)
                .map_err(|why| (name, e.path, why))
        })
        .collect()
}

/// The definition named `name` visible from `workdir`; `not_found` when there is none,
/// `invalid_params` on `field` when its file is malformed.
pub fn find(
    skills: &Skills,
    workdir: Option<&Path>,
    field: &str,
    name: &str,
) -> Result<Definition> {
    for d in all(skills, workdir) {
        match d {
            Ok(d) if d.name == name => return Ok(d),
            Err((n, path, why)) if n == name => {
                return Err(Error::invalid(
                    field,
                    format!("agent definition {} is malformed: {why}", path.display()),
                ))
            }
            _ => {}
        }
    }
    Err(Error::NotFound(format!(
        "no agent definition named {name:?} (looked in .snowpea/agents, .claude/agents, \
         $SNOWPEA_HOME/agents and installed plugins)"
    )))
}

/// The Markdown text of a definition (frontmatter + body), as `agent.create` writes it.
pub fn render(d: &Definition) -> String {
    let mut front = serde_json::Map::new();
    front.insert("name".into(), Value::String(d.name.clone()));
    front.insert("description".into(), Value::String(d.description.clone()));
    front.insert(
        "model".into(),
        Value::String(d.model.clone().unwrap_or_else(|| "inherit".into())),
    );
    front.insert(
        "tools".into(),
        match &d.tools {
            None => Value::String("*".into()),
            Some(t) => Value::Array(t.iter().cloned().map(Value::String).collect()),
        },
    );
    if let Some(p) = &d.permission {
        front.insert("permission".into(), Value::String(p.clone()));
    }
    if let Some(n) = d.max_turns {
        front.insert("max_turns".into(), Value::from(n as u64));
    }
    let yaml = serde_yaml_ng::to_string(&Value::Object(front)).unwrap_or_default();
    format!("---\n{yaml}---\n\n{}\n", d.prompt.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_slugs() {
        assert!(is_slug("reviewer"));
        assert!(is_slug("code-reviewer.v2_x"));
        assert!(!is_slug("-x"));
        assert!(!is_slug("Reviewer"));
        assert!(!is_slug(""));
        assert_eq!(slugify("Code Reviewer!").as_deref(), Some("code-reviewer"));
        assert_eq!(slugify("  ***  "), None);
    }

    #[test]
    fn frontmatter_fields_parse_and_bad_ones_name_the_field() {
        let (front, body) = snowpea_session_skills::loader::parse(
            "---\nname: rev\ndescription: Reviews\nmodel: inherit\ntools: [read_file, grep]\nmax_turns: 5\n---\nYou review.\n",
        )
        .unwrap();
        let d = from_parts(
            "rev",
            &front.meta,
            &body,
            "/x/rev.md".into(),
            "project".into(),
        )
        .unwrap();
        assert_eq!(d.model, None);
        assert_eq!(d.tools, Some(vec!["read_file".into(), "grep".into()]));
        assert_eq!(d.max_turns, Some(5));
        assert_eq!(d.prompt, "You review.");
        let back = render(&d);
        let (front2, body2) = snowpea_session_skills::loader::parse(&back).unwrap();
        let d2 = from_parts(
            "rev",
            &front2.meta,
            &body2,
            d.path.clone(),
            d.source.clone(),
        )
        .unwrap();
        assert_eq!(d, d2);

        let (front, body) = snowpea_session_skills::loader::parse("---\ntools: 5\n---\nx").unwrap();
        let e = from_parts("a", &front.meta, &body, "/a".into(), "g".into()).unwrap_err();
        assert!(e.starts_with("frontmatter.tools"), "{e}");
        let (front, body) =
            snowpea_session_skills::loader::parse("---\nmax_turns: 0\n---\nx").unwrap();
        let e = from_parts("a", &front.meta, &body, "/a".into(), "g".into()).unwrap_err();
        assert!(e.starts_with("frontmatter.max_turns"), "{e}");
        let (front, body) =
            snowpea_session_skills::loader::parse("---\ntools: '*'\n---\nx").unwrap();
        let d = from_parts("a", &front.meta, &body, "/a".into(), "g".into()).unwrap();
        assert_eq!(d.tools, None);
    }
}
