//! The command plane and skills offered to the model as tools (issue 18):
//!
//! * `session_command_list{risk?}` (permission `read`): every command with its tier and
//!   whether it needs confirmation;
//! * `session_command_run{command, args?, confirm?}` (permission `config`, so every call goes
//!   through the approval pipeline like any configuration change): runs a built-in on the
//!   headless plane — medium/high-risk writes also need `confirm: true`, commands that run a
//!   model turn are refused (`HEADLESS_UNSUPPORTED`);
//! * `skill_view{name}` (permission `read`): the body of a skill of the session's workdir,
//!   which then enters the turn as context. Offered only when there is a skill to view.

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::{Commands, Reply};
use crate::session::Session;
use crate::tools::{Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use snowpea_session_llm::provider::ToolSpec;
use snowpea_session_skills::Kind;

/// Most skills named in `skill_view`'s description.
const MAX_LISTED_SKILLS: usize = 100;

impl Commands {
    /// The command-plane and skill tools of a turn of `session`.
    pub async fn agent_tools(self: &Arc<Self>, session: &Session) -> Vec<Arc<dyn Tool>> {
        let mut out: Vec<Arc<dyn Tool>> = vec![
            Arc::new(ListTool { cx: self.clone() }),
            Arc::new(RunTool { cx: self.clone() }),
        ];
        let catalog = self.skills.clone();
        let workdir = session.workdir();
        let skills: Vec<(String, String)> = snowpea_session_skills::blocking(move || {
            Ok(catalog
                .catalog(Some(&workdir))
                .into_iter()
                .filter(|e| e.kind == Kind::Skill && e.error.is_none())
                .map(|e| (e.name, e.summary))
                .collect())
        })
        .await
        .unwrap_or_default();
        if !skills.is_empty() {
            out.push(Arc::new(SkillView {
                cx: self.clone(),
                skills,
            }));
        }
        out
    }
}

struct ListTool {
    cx: Arc<Commands>,
}

impl Tool for ListTool {
    fn name(&self) -> &'static str {
        "session_command_list"
    }
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: "List the session's slash commands with their risk tier (read, low_write, medium_write, high_risk) and whether session_command_run needs confirm:true.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"risk": {"type": "string", "enum": ["read", "low_write", "medium_write", "high_risk"]}},
                "additionalProperties": false
            }),
        }
    }
    fn permission(&self) -> Permission {
        Permission::Read
    }
    fn category(&self) -> &'static str {
        "builtin"
    }
    fn plan(&self, args: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        crate::tools::args::object(args)?;
        if let Some(r) = crate::tools::args::optional_str(args, "risk")? {
            if !["read", "low_write", "medium_write", "high_risk"].contains(&r) {
                return Err(
                    "argument `risk` must be read, low_write, medium_write or high_risk".into(),
                );
            }
        }
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: vec![],
            summary: "session_command_list".into(),
        })
    }
    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let cx = self.cx.clone();
        Box::pin(async move {
            let risk = args.get("risk").and_then(Value::as_str);
            let rows = super::session_command::rows(&cx, Some(&ctx.workdir), risk);
            ToolOutput {
                ok: true,
                content: serde_json::to_string_pretty(&rows).unwrap_or_default(),
                meta: json!({"count": rows.len()}),
                diff: None,
            }
        })
    }
}

struct RunTool {
    cx: Arc<Commands>,
}

impl Tool for RunTool {
    fn name(&self) -> &'static str {
        "session_command_run"
    }
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: "Run a slash command of this session (see session_command_list), e.g. command \"mcp\" args \"status\". medium_write and high_risk writes need confirm:true. Commands that run a model turn cannot be run this way.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "Command name without the slash; `name.sub` is the same as name with sub as the first argument."},
                    "args": {"type": "string", "description": "Arguments as typed after the name."},
                    "confirm": {"type": "boolean", "description": "Confirms a medium_write/high_risk write."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        }
    }
    fn permission(&self) -> Permission {
        Permission::Config
    }
    fn category(&self) -> &'static str {
        "builtin"
    }
    fn plan(&self, args: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        crate::tools::args::object(args)?;
        let command = crate::tools::args::required_str(args, "command")?;
        let extra = crate::tools::args::optional_str(args, "args")?.unwrap_or_default();
        crate::tools::args::optional_bool(args, "confirm")?;
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: vec![],
            summary: format!("/{command} {extra}").trim_end().to_owned(),
        })
    }
    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let cx = self.cx.clone();
        Box::pin(async move {
            let command = args
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (name, sub) = match command.trim_start_matches('/').split_once('.') {
                Some((n, s)) => (n.to_owned(), Some(s.to_owned())),
                None => (command.trim_start_matches('/').to_owned(), None),
            };
            let mut raw = String::new();
            if let Some(s) = sub {
                raw.push_str(&s);
            }
            if let Some(a) = args.get("args").and_then(Value::as_str) {
                if !raw.is_empty() {
                    raw.push(' ');
                }
                raw.push_str(a);
            }
            if args.get("confirm").and_then(Value::as_bool) == Some(true) {
                raw.push_str(" --yes");
            }
            let session = match cx.sessions.get(&ctx.session_id) {
                Ok(s) => s,
                Err(_) => {
                    return ToolOutput::error(format!(
                        "{}: session_command_run needs a session",
                        super::codes::SESSION_REQUIRED
                    ))
                }
            };
            match cx.execute(&session, &name, &raw, "", true).await {
                Ok(Reply::Done { text, data }) => ToolOutput {
                    ok: true,
                    content: format!(
                        "{text}\n\n{}",
                        serde_json::to_string(&data).unwrap_or_default()
                    ),
                    meta: json!({"command": name, "data": data}),
                    diff: None,
                },
                Ok(Reply::Prompt(_) | Reply::Workflow(_)) => ToolOutput::error(format!(
                    "{}: /{name} runs a model turn",
                    super::codes::HEADLESS_UNSUPPORTED
                )),
                Err(f) => ToolOutput {
                    ok: false,
                    content: format!("{}: {}", f.stable, f.message),
                    meta: json!({"command": name, "code": f.stable}),
                    diff: None,
                },
            }
        })
    }
}

struct SkillView {
    cx: Arc<Commands>,
    skills: Vec<(String, String)>,
}

impl Tool for SkillView {
    fn name(&self) -> &'static str {
        "skill_view"
    }
    fn spec(&self) -> ToolSpec {
        let mut list = String::new();
        for (n, s) in self.skills.iter().take(MAX_LISTED_SKILLS) {
            list.push_str(&format!("\n- {n}: {s}"));
        }
        ToolSpec {
            name: self.name().into(),
            description: format!(
                "Load a skill's instructions (its SKILL.md body) into this turn. Skills:{list}"
            ),
            parameters: json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "Skill name."}},
                "required": ["name"],
                "additionalProperties": false
            }),
        }
    }
    fn permission(&self) -> Permission {
        Permission::Read
    }
    fn category(&self) -> &'static str {
        "builtin"
    }
    fn plan(&self, args: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        crate::tools::args::object(args)?;
        let name = crate::tools::args::required_str(args, "name")?;
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: vec![],
            summary: format!("skill_view {name}"),
        })
    }
    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let cx = self.cx.clone();
        Box::pin(async move {
            let name = args
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let found = cx
                .skills
                .catalog(Some(&ctx.workdir))
                .into_iter()
                .find(|e| e.kind == Kind::Skill && e.name == name && e.error.is_none());
            match found {
                Some(e) => ToolOutput {
                    ok: true,
                    content: e.body.trim().to_owned(),
                    meta: json!({"name": e.name, "path": e.path, "source": e.source}),
                    diff: None,
                },
                None => ToolOutput::error(format!("no skill named {name:?}")),
            }
        })
    }
}
