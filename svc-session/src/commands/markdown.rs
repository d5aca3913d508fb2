//! Markdown commands and skill commands: a `commands/*.md` file or a user-invocable
//! `SKILL.md` becomes `/<name>`; its body, with `$ARGUMENTS` substituted, runs as a normal
//! model turn, and its frontmatter's `allowed-tools` limits the tools of that turn.

use serde_json::json;

use super::{Args, Listed, PromptTurn, Reply, Risk, Target};
use snowpea_session_skills::{Entry, Kind};

/// The table row of a markdown command or skill. Source: the root's (`global`,
/// `project`, `plugin:<name>`), or `skill` for a skill outside a plugin.
pub fn listed(e: Entry) -> Listed {
    let source = if e.kind == Kind::Skill && !e.source.starts_with("plugin:") {
        "skill".to_owned()
    } else {
        e.source.clone()
    };
    let hint = e.front.argument_hint.clone().unwrap_or_default();
    let summary = match &e.error {
        Some(err) => format!("error: {err}"),
        None if e.summary.is_empty() => format!("/{}", e.name),
        None => e.summary.clone(),
    };
    let mut schema = json!({
        "type": "object",
        "properties": {
            "arguments": {"type": "string", "description": if hint.is_empty() { "Substituted for $ARGUMENTS." } else { hint.as_str() }}
        },
        "x-usage": format!("/{} {}", e.name, hint).trim_end().to_owned(),
        "x-risk": Risk::LowWrite.as_str(),
        "x-readForms": [],
        "x-needsConfirm": false,
        "x-runsModelTurn": true,
    });
    if let Some(t) = &e.front.allowed_tools {
        schema["x-allowedTools"] = json!(t);
    }
    Listed {
        name: e.name.clone(),
        summary,
        source,
        args_schema: schema,
        risk: Risk::LowWrite,
        target: Target::Markdown(Box::new(e)),
    }
}

/// The model turn of `/<name> args`.
pub fn run(e: &Entry, args: &Args) -> Reply {
    let mut text = snowpea_session_skills::loader::substitute(e.body.trim(), &args.text());
    if e.kind == Kind::Skill {
        text = format!("Use the skill \"{}\".\n\n{text}", e.name);
    }
    Reply::Prompt(PromptTurn {
        text,
        skill: e.kind == Kind::Skill,
        allowed_tools: e.front.allowed_tools.clone(),
        after: None,
    })
}

/// True when `tool` is allowed by the `allowed-tools` entries (`Name`, `Name(pattern)` or a
/// `prefix*`; compared case-insensitively and ignoring `_`, so `Read` allows `read_file`'s
/// family only when spelled so: `read_file`, `Read_File`).
pub fn tool_allowed(allowed: &[String], tool: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '-'], "");
    let t = norm(tool);
    allowed.iter().any(|a| {
        let name = a.split('(').next().unwrap_or(a).trim();
        match name.strip_suffix('*') {
            Some(prefix) => t.starts_with(&norm(prefix)),
            None => norm(name) == t,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_tools_match_names() {
        let allowed = vec![
            "read_file".to_string(),
            "mcp__fs*".into(),
            "Shell(git diff:*)".into(),
        ];
        assert!(tool_allowed(&allowed, "read_file"));
        assert!(tool_allowed(&allowed, "mcp__fs__list"));
        assert!(tool_allowed(&allowed, "shell"));
        assert!(!tool_allowed(&allowed, "write_file"));
    }
}
