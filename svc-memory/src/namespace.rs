//! Memory namespaces (issue 4 "Memory"): `default` (global), `project:<absolute project
//! root>`, `agent:<name>` and `browser`. A namespace is the unit a search never crosses;
//! `memory.list` scopes resolve to a set of them.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// One memory namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Namespace {
    /// `default`: the global namespace.
    Default,
    /// `project:<root>`: memories of one project, keyed by its absolute root.
    Project(String),
    /// `agent:<name>`: memories of one named agent.
    Agent(String),
    /// `browser`: pages a browser client ingested (`memory.ingest`).
    Browser,
}

impl Namespace {
    /// Parses the wire form; `None`/empty is `default`. `field` names the param in errors.
    pub fn parse(s: Option<&str>, field: &str) -> Result<Namespace> {
        let s = s.map(str::trim).unwrap_or("");
        match s {
            "" | "default" | "global" => Ok(Namespace::Default),
            "browser" => Ok(Namespace::Browser),
            _ => {
                if let Some(root) = s.strip_prefix("project:") {
                    Ok(Namespace::Project(project_root(root, field)?))
                } else if let Some(name) = s.strip_prefix("agent:") {
                    let name = name.trim();
                    if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
                        return Err(Error::invalid(
                            field,
                            "agent namespace needs a name: agent:<name>",
                        ));
                    }
                    Ok(Namespace::Agent(name.to_owned()))
                } else {
                    Err(Error::invalid(
                        field,
                        "unknown namespace; use default, browser, project:<absolute root> or agent:<name>",
                    ))
                }
            }
        }
    }

    /// The namespace of a project root (normalised like [`project_root`]).
    pub fn project(root: &str) -> Result<Namespace> {
        Ok(Namespace::Project(project_root(root, "project")?))
    }

    /// The stored key, e.g. `project:/home/me/app`.
    pub fn key(&self) -> String {
        match self {
            Namespace::Default => "default".to_owned(),
            Namespace::Browser => "browser".to_owned(),
            Namespace::Project(root) => format!("project:{root}"),
            Namespace::Agent(name) => format!("agent:{name}"),
        }
    }

    /// Parses a stored key (written by [`Namespace::key`]).
    pub fn from_key(key: &str) -> Namespace {
        if let Some(root) = key.strip_prefix("project:") {
            Namespace::Project(root.to_owned())
        } else if let Some(name) = key.strip_prefix("agent:") {
            Namespace::Agent(name.to_owned())
        } else if key == "browser" {
            Namespace::Browser
        } else {
            Namespace::Default
        }
    }

    /// The protocol's `scope` of a hit in this namespace (`""` for browser pages, which
    /// have no scope in the spec's vocabulary).
    pub fn scope(&self) -> &'static str {
        match self {
            Namespace::Default => "global",
            Namespace::Project(_) => "project",
            Namespace::Agent(_) => "agent",
            Namespace::Browser => "",
        }
    }

    /// The project root, for the `project` field of hits.
    pub fn project_root(&self) -> &str {
        match self {
            Namespace::Project(root) => root,
            _ => "",
        }
    }
}

/// Normalises an absolute project root: canonical when it exists (so a symlinked checkout
/// and the session's canonical workdir agree), else lexically cleaned (`.`/`..`/trailing
/// `/`). A relative or empty path is `invalid_params` naming `field`.
pub fn project_root(root: &str, field: &str) -> Result<String> {
    let p = Path::new(root.trim());
    if !p.is_absolute() {
        return Err(Error::invalid(
            field,
            "project root must be an absolute path",
        ));
    }
    if let Ok(c) = std::fs::canonicalize(p) {
        return Ok(c.to_string_lossy().into_owned());
    }
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(out.to_string_lossy().into_owned())
}

/// Which namespaces `memory.list{scope}` covers, given the project root and agent
/// resolved from the session (or the explicit `project`). Scopes that cannot be resolved
/// (no project, no agent) contribute nothing; no session and no project = global only.
pub fn list_scopes(
    scope: Option<&str>,
    project: Option<&str>,
    agent: Option<&str>,
) -> Result<Vec<Namespace>> {
    let project = project.map(Namespace::project).transpose()?;
    let agent = agent
        .filter(|a| !a.is_empty())
        .map(|a| Namespace::Agent(a.to_owned()));
    let mut out = Vec::new();
    match scope.unwrap_or("all") {
        "project" => out.extend(project),
        "global" => out.push(Namespace::Default),
        "agent" => out.extend(agent),
        "all" | "" => {
            out.extend(project);
            out.extend(agent);
            out.push(Namespace::Default);
        }
        _ => {
            return Err(Error::invalid(
                "params.scope",
                "must be project, global, agent or all",
            ))
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_forms_parse_and_round_trip() {
        for s in [
            "default",
            "browser",
            "project:/tmp/x-not-there/app",
            "agent:reviewer",
        ] {
            let ns = Namespace::parse(Some(s), "params.namespace").unwrap();
            assert_eq!(ns.key(), s);
            assert_eq!(Namespace::from_key(&ns.key()), ns);
        }
        assert_eq!(Namespace::parse(None, "f").unwrap(), Namespace::Default);
    }

    #[test]
    fn bad_namespaces_name_the_field() {
        for s in ["project:relative/path", "agent:", "nope", "project:"] {
            match Namespace::parse(Some(s), "params.namespace") {
                Err(Error::InvalidParams { field, .. }) => {
                    assert_eq!(field, "params.namespace", "{s}")
                }
                other => panic!("{s}: {other:?}"),
            }
        }
    }

    #[test]
    fn project_roots_are_normalised() {
        assert_eq!(
            project_root("/no/such/dir/../x/./y/", "f").unwrap(),
            "/no/such/x/y"
        );
    }

    #[test]
    fn list_scopes_resolve() {
        let all = list_scopes(None, Some("/p-not-there"), Some("a")).unwrap();
        assert_eq!(
            all,
            vec![
                Namespace::Project("/p-not-there".into()),
                Namespace::Agent("a".into()),
                Namespace::Default
            ]
        );
        assert_eq!(
            list_scopes(Some("all"), None, None).unwrap(),
            vec![Namespace::Default]
        );
        assert!(list_scopes(Some("project"), None, None).unwrap().is_empty());
        assert_eq!(
            list_scopes(Some("agent"), None, Some("a")).unwrap(),
            vec![Namespace::Agent("a".into())]
        );
    }
}
