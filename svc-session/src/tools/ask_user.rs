//! `ask_user` (issue 17, permission `read`): the agent asks its person one to
//! [`MAX_QUESTIONS`] questions and waits for the answers ([`crate::question::Questions`]).
//! Both common argument shapes are accepted and normalised to the spec's `questions[]`
//! ([`crate::question::shape::normalize`]). The result text gives the model the answers
//! (declined or empty answers said plainly); the stored `tool.result` gets the same text
//! with secret answers masked ([`REDACTED_OUTPUT`]).

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::question::shape::{self, MAX_OPTIONS, MAX_QUESTIONS};
use crate::question::Questions;
use crate::session::Registry;
use crate::tools::{Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use snowpea_session_llm::provider::ToolSpec;

/// Key of a tool result's `meta` holding the text stored in the `tool.result` event in
/// place of the model's copy (removed from `meta` before it is stored).
pub const REDACTED_OUTPUT: &str = "redactedOutput";

/// `ask_user`.
pub struct AskUser {
    questions: Arc<Questions>,
    sessions: Registry,
}

impl std::fmt::Debug for AskUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AskUser").finish_non_exhaustive()
    }
}

impl AskUser {
    /// The tool, asking through `questions` for the sessions of `sessions`.
    pub fn new(questions: Arc<Questions>, sessions: Registry) -> Self {
        AskUser {
            questions,
            sessions,
        }
    }
}

impl Tool for AskUser {
    fn name(&self) -> &'static str {
        "ask_user"
    }

    fn permission(&self) -> Permission {
        Permission::Read
    }

    fn category(&self) -> &'static str {
        "builtin"
    }

    fn spec(&self) -> ToolSpec {
        let option = json!({
            "type": "object",
            "properties": {
                "label": {"type": "string", "description": "What the person picks (short)."},
                "description": {"type": "string", "description": "What picking it means."},
                "preview": {"type": "string", "description": "Optional longer content shown with the option."}
            },
            "required": ["label"]
        });
        ToolSpec {
            name: self.name().into(),
            description: format!(
                "Ask the person a question and wait for the answer. Use it only when you cannot proceed \
                 sensibly without their decision or information. Up to {MAX_QUESTIONS} questions per call; \
                 each either free text (no options) or 2-{MAX_OPTIONS} options. Set secret for answers like \
                 passwords or tokens. The person may decline or not answer in time."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "questions": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_QUESTIONS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "header": {"type": "string", "description": format!("Short tag, at most {} characters.", shape::MAX_HEADER_CHARS)},
                                "question": {"type": "string"},
                                "options": {"type": "array", "maxItems": MAX_OPTIONS, "items": option},
                                "multiSelect": {"type": "boolean", "description": "Several options may be picked."},
                                "allowOther": {"type": "boolean", "description": "A free-text answer is accepted beside the options."},
                                "secret": {"type": "boolean", "description": "The answer is a secret (masked in logs and history)."}
                            },
                            "required": ["question"]
                        }
                    },
                    "question": {"type": "string", "description": "A single question (instead of `questions`)."},
                    "choices": {"type": "array", "items": {"type": "string"}, "description": "Options of the single question."},
                    "multi_select": {"type": "boolean"}
                }
            }),
        }
    }

    fn plan(&self, args: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        let questions = shape::normalize(args)?;
        let first = crate::tools::args::one_line(&questions[0].question, 80);
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: vec![],
            summary: format!("ask_user: {first}"),
        })
    }

    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let questions = self.questions.clone();
        let session = self.sessions.get(&ctx.session_id);
        Box::pin(async move {
            let batch = match shape::normalize(&args) {
                Ok(q) => q,
                Err(e) => return ToolOutput::error(format!("invalid arguments: {e}")),
            };
            let Ok(session) = session else {
                return ToolOutput::error("ask_user needs a live session to ask in");
            };
            let asked = questions
                .ask(
                    &session,
                    &ctx.turn_id,
                    &ctx.call_id,
                    batch,
                    ctx.cancel.clone(),
                )
                .await;
            ToolOutput {
                ok: asked.ok,
                content: asked.text,
                meta: json!({
                    "requestId": asked.request_id,
                    "by": asked.by,
                    REDACTED_OUTPUT: asked.masked,
                }),
                diff: None,
            }
        })
    }
}
