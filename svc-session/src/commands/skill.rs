//! `/skill [list|read <name>|create <name> <description…>|install <source> [--link]|remove
//! <name>|reload]`: the `skill.*` methods from the prompt. `list` (bare) and `read` are read,
//! `create` (one model turn drafting the SKILL.md, then validated and saved; `--scope`,
//! `--force`) and `reload` low_write, `install` medium_write, `remove` high_risk.

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::{AfterTurn, Args, Builtin, Call, Commands, Failure, PromptTurn, Reply, Risk, Run};

/// `/skill`.
pub struct SkillCmd;

/// The prompt of a drafting turn (`/skill create`, `skill.create{description}`).
pub fn draft_prompt(name: &str, description: &str) -> String {
    format!(
        "Write a SKILL.md for a new skill named \"{name}\".\n\nWhat it should do: {description}\n\n\
         Answer with the complete file and nothing else: a YAML frontmatter block (between --- lines) \
         with `name: {name}` and a one-sentence `description` of 8 to 500 characters, then the \
         markdown instructions the skill gives an agent. Use $ARGUMENTS where the user's arguments belong."
    )
}

/// The SKILL.md in a drafting turn's answer: the text inside a ```markdown fence if there is
/// one, else the whole answer from its first `---` line.
pub fn extract_draft(answer: &str) -> String {
    let t = answer.trim();
    if let Some(start) = t.find("```") {
        let after = &t[start + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(after.len());
        let body = &after[body_start..];
        if let Some(end) = body.rfind("```") {
            return body[..end].trim().to_owned() + "\n";
        }
    }
    match t.find("---") {
        Some(i) => t[i..].trim().to_owned() + "\n",
        None => t.to_owned() + "\n",
    }
}

impl Builtin for SkillCmd {
    fn name(&self) -> &'static str {
        "skill"
    }
    fn summary(&self) -> &'static str {
        "List, read, create, install, remove or reload skills"
    }
    fn usage(&self) -> &'static str {
        "/skill [list|read <name>|create <name> <description> [--scope=project|global] [--force]|install <source> [--link]|remove <name>|reload]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["list", "read", "create", "install", "remove", "reload"]
    }
    fn risk(&self) -> Risk {
        Risk::HighRisk
    }
    fn tier(&self, args: &Args) -> Risk {
        match args.sub() {
            None | Some("list" | "read" | "status") => Risk::Read,
            Some("create" | "reload") => Risk::LowWrite,
            Some("install") => Risk::MediumWrite,
            _ => Risk::HighRisk,
        }
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let a = &call.args;
            let wd = call.session.workdir().to_string_lossy().into_owned();
            let name_arg = || {
                a.words
                    .get(1)
                    .cloned()
                    .ok_or_else(|| Failure::args(format!("usage: {}", self.usage())))
            };
            match a.sub() {
                None | Some("list" | "status") => {
                    let entries = cx.skills.catalog(Some(&call.session.workdir()));
                    let mut text = String::new();
                    let mut rows = Vec::new();
                    for e in entries
                        .iter()
                        .filter(|e| e.kind == snowpea_session_skills::Kind::Skill)
                    {
                        let summary = e
                            .error
                            .as_ref()
                            .map(|x| format!("error: {x}"))
                            .unwrap_or(e.summary.clone());
                        text.push_str(&format!("\n  {:<24} {} [{}]", e.name, summary, e.source));
                        rows.push(json!({"name": e.name, "summary": summary, "source": e.source, "path": e.path, "error": e.error}));
                    }
                    Ok(Reply::done(
                        format!("{} skills{text}", rows.len()),
                        json!({ "skills": rows }),
                    ))
                }
                Some("read") => {
                    let r = cx
                        .skills
                        .read(pb::SkillReadParams {
                            name: name_arg()?,
                            workdir: wd,
                        })
                        .await
                        .map_err(Failure::from_error)?;
                    Ok(Reply::done(
                        r.content.clone(),
                        json!({"path": r.path, "scope": r.scope, "content": r.content}),
                    ))
                }
                Some("create") => {
                    a.only_options(&["scope", "force"]).map_err(Failure::args)?;
                    let name = name_arg()?;
                    let description = a
                        .words
                        .iter()
                        .skip(2)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" ");
                    let p = pb::SkillCreateParams {
                        name: name.clone(),
                        description: Some(description.clone()),
                        force: a.options.contains_key("force"),
                        scope: a.options.get("scope").cloned().unwrap_or_default(),
                        workdir: wd,
                        ..Default::default()
                    };
                    let path = cx.skills.check_draft(&p).map_err(Failure::from_error)?;
                    if call.headless {
                        return Err(Failure {
                            code: "invalid_params",
                            stable: super::codes::HEADLESS_UNSUPPORTED,
                            message: "/skill create runs a model turn; use skill.create with content, or an interactive client".into(),
                        });
                    }
                    Ok(Reply::Prompt(PromptTurn {
                        text: draft_prompt(&name, &description),
                        skill: false,
                        allowed_tools: Some(Vec::new()),
                        after: Some(AfterTurn::SaveSkill { name, path }),
                    }))
                }
                Some("install") => {
                    a.only_options(&["link"]).map_err(Failure::args)?;
                    let source = name_arg()?;
                    cx.skills
                        .install(pb::SkillInstallParams {
                            source: source.clone(),
                            link: a.options.contains_key("link"),
                        })
                        .await
                        .map_err(Failure::from_error)?;
                    Ok(Reply::done(
                        format!("installed {source}"),
                        json!({"source": source, "ok": true}),
                    ))
                }
                Some("remove") => {
                    let name = name_arg()?;
                    cx.skills
                        .remove(pb::SkillRemoveParams { name: name.clone() })
                        .await
                        .map_err(Failure::from_error)?;
                    Ok(Reply::done(
                        format!("removed {name}"),
                        json!({"name": name, "ok": true}),
                    ))
                }
                Some("reload") => {
                    cx.skills.reload().await.map_err(Failure::from_error)?;
                    Ok(Reply::done("skills reloaded", json!({"ok": true})))
                }
                Some(o) => Err(Failure::args(format!("unknown /skill subcommand {o:?}"))),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_fenced_and_bare_drafts() {
        let fenced = "Here it is:\n```markdown\n---\nname: x\n---\nbody\n```\nDone.";
        assert_eq!(extract_draft(fenced), "---\nname: x\n---\nbody\n");
        assert_eq!(
            extract_draft("ok\n---\nname: y\n---\nb"),
            "---\nname: y\n---\nb\n"
        );
    }
}
