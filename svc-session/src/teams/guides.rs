//! Team guides (protocol "team.guide.*", upstream-behaviour §4 "Team guides"): one
//! markdown file per team, `<workdir>/.snowpea/teams/<team>.md` (project, wins) or
//! `$SNOWPEA_HOME/teams/<team>.md` (global). Format: optional frontmatter with
//! `description`; the persona is the body before a `## Routing` heading; routing rules are
//! the bullets `- when -> agent` under it. Limits: persona ≤ [`MAX_PERSONA`] characters,
//! at most [`MAX_RULES`] rules. Files are written owner-only (0600, folders 0700).

use std::path::{Path, PathBuf};

use snowpea_proto::session::v1 as pb;

/// Longest persona (characters).
pub const MAX_PERSONA: usize = 8000;
/// Most routing rules.
pub const MAX_RULES: usize = 30;
/// Longest `when` of a rule (characters).
const MAX_WHEN: usize = 500;
/// The team of a session with no active team.
pub const DEFAULT_TEAM: &str = "default";

/// A parsed guide file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Guide {
    /// Frontmatter `description`.
    pub description: String,
    /// Body before `## Routing`.
    pub persona: String,
    /// `(when, agent)` pairs.
    pub routing: Vec<(String, String)>,
}

/// Checks a team name: `^[a-z0-9][a-z0-9._-]{0,63}$` (it names a file).
pub fn check_team(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = name.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} must be 1–64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"
        ))
    }
}

/// Checks an agent name of a rule (same alphabet as a team name).
pub fn check_agent(name: &str) -> Result<(), String> {
    check_team(name)
}

/// `<dir>/<team>.md` of the project (`<workdir>/.snowpea/teams`).
pub fn project_file(workdir: &Path, team: &str) -> PathBuf {
    workdir
        .join(".snowpea")
        .join("teams")
        .join(format!("{team}.md"))
}

/// `$SNOWPEA_HOME/teams/<team>.md`.
pub fn global_file(home: &Path, team: &str) -> PathBuf {
    home.join("teams").join(format!("{team}.md"))
}

/// Parses a guide file's text.
pub fn parse(text: &str) -> Guide {
    let (front, body) = split_front(text);
    let description = front
        .lines()
        .find_map(|l| l.strip_prefix("description:"))
        .map(|d| d.trim().trim_matches('"').trim_matches('\'').to_owned())
        .unwrap_or_default();
    let mut persona = String::new();
    let mut routing = Vec::new();
    let mut in_routing = false;
    for line in body.lines() {
        let t = line.trim();
        if let Some(heading) = t.strip_prefix("## ") {
            in_routing = heading.trim().eq_ignore_ascii_case("routing");
            if in_routing {
                continue;
            }
        }
        if in_routing {
            if let Some(rule) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
                if let Some((when, agent)) = rule.rsplit_once("->") {
                    let (when, agent) = (when.trim(), agent.trim());
                    if !when.is_empty() && !agent.is_empty() && routing.len() < MAX_RULES {
                        routing.push((when.to_owned(), agent.to_owned()));
                    }
                }
            }
        } else {
            persona.push_str(line);
            persona.push('\n');
        }
    }
    Guide {
        description,
        persona: persona.trim().to_owned(),
        routing,
    }
}

fn split_front(text: &str) -> (&str, &str) {
    let Some(rest) = text.strip_prefix("---\n") else {
        return ("", text);
    };
    match rest.find("\n---") {
        Some(end) => {
            let after = &rest[end + 4..];
            (&rest[..end], after.strip_prefix('\n').unwrap_or(after))
        }
        None => ("", text),
    }
}

/// Renders a guide as its file text (the inverse of [`parse`]).
pub fn render(g: &Guide) -> String {
    let mut out = String::new();
    if !g.description.is_empty() {
        out.push_str(&format!(
            "---\ndescription: {}\n---\n\n",
            serde_json::to_string(&g.description).unwrap_or_default()
        ));
    }
    out.push_str(g.persona.trim());
    out.push('\n');
    if !g.routing.is_empty() {
        out.push_str("\n## Routing\n\n");
        for (when, agent) in &g.routing {
            out.push_str(&format!("- {when} -> {agent}\n"));
        }
    }
    out
}

/// Validates what `team.guide.set` would write; `Err((field, why))`.
pub fn check(g: &Guide) -> Result<(), (String, String)> {
    if g.persona.chars().count() > MAX_PERSONA {
        return Err((
            "params.persona".into(),
            format!("longer than {MAX_PERSONA} characters"),
        ));
    }
    if g.persona
        .lines()
        .any(|l| l.trim().eq_ignore_ascii_case("## routing"))
    {
        return Err((
            "params.persona".into(),
            "must not contain a \"## Routing\" heading (pass the rules as routing)".into(),
        ));
    }
    if g.description.contains('\n') || g.description.chars().count() > 500 {
        return Err((
            "params.description".into(),
            "must be one line of at most 500 characters".into(),
        ));
    }
    if g.routing.len() > MAX_RULES {
        return Err((
            "params.routing".into(),
            format!("at most {MAX_RULES} rules, got {}", g.routing.len()),
        ));
    }
    for (i, (when, agent)) in g.routing.iter().enumerate() {
        let when_t = when.trim();
        if when_t.is_empty() || when_t.contains('\n') || when_t.contains("->") {
            return Err((
                format!("params.routing[{i}].when"),
                "must be one non-empty line without \"->\"".into(),
            ));
        }
        if when_t.chars().count() > MAX_WHEN {
            return Err((
                format!("params.routing[{i}].when"),
                format!("longer than {MAX_WHEN} characters"),
            ));
        }
        check_agent(agent.trim()).map_err(|e| (format!("params.routing[{i}].agent"), e))?;
    }
    Ok(())
}

/// The wire shape of a guide read from `path` (`source` `project` or `global`); `known`
/// tells whether an agent definition of that name is visible.
pub fn to_pb(
    team: &str,
    source: &str,
    path: &Path,
    g: &Guide,
    known: &dyn Fn(&str) -> bool,
) -> pb::TeamGuide {
    pb::TeamGuide {
        description: g.description.clone(),
        path: Some(path.to_string_lossy().into_owned()),
        persona: g.persona.clone(),
        routing: g
            .routing
            .iter()
            .map(|(when, agent)| pb::team_guide::RoutingItem {
                agent: agent.clone(),
                known: known(agent),
                when: when.clone(),
            })
            .collect(),
        source: source.to_owned(),
        team: team.to_owned(),
    }
}

/// Team names of the `*.md` files in `dir`, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let team = name.strip_suffix(".md")?.to_owned();
            (check_team(&team).is_ok() && e.path().is_file()).then_some(team)
        })
        .collect();
    out.sort();
    out
}

/// Writes `text` to `path` owner-only, creating its folder (0700).
pub fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| anyhow::anyhow!("{} has no folder", path.display()))?;
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)?;
    snowpea_common::home::write_private(path, text.as_bytes())
}
