//! Where a turn runs the plugin hooks ([`crate::hooks`]): `UserPromptSubmit` before the
//! first model call of a prompt, `PreToolUse` / `PostToolUse` around each tool run, `Stop`
//! when the model answered without tool calls (`hook.continue`). Every hook is bounded and a
//! failing one is ignored, so none of these can break the turn.

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use super::agent::TurnAccount;
use super::{TurnStart, Turns};
use crate::hooks::{HookEvent, Input, Verdict, MAX_STOP_CONTINUES};
use crate::session::Session;
use snowpea_session_llm::provider::ToolCall;

impl Turns {
    async fn hooks_of(
        &self,
        session: &Session,
        event: HookEvent,
        tool: Option<&str>,
        fields: Value,
    ) -> Verdict {
        let workdir = session.workdir();
        self.hooks
            .run(
                event,
                Input {
                    session_id: &session.id,
                    workdir: &workdir,
                    tool,
                    fields,
                },
            )
            .await
    }

    /// `UserPromptSubmit`: `Err(reason)` when a hook blocks the prompt, else the context
    /// the hooks printed (for the model, with the prompt).
    pub(crate) async fn prompt_hooks(
        &self,
        session: &Session,
        prompt: &str,
    ) -> std::result::Result<Vec<String>, String> {
        let v = self
            .hooks_of(
                session,
                HookEvent::UserPromptSubmit,
                None,
                json!({"prompt": prompt}),
            )
            .await;
        match v.block {
            Some(reason) => Err(reason),
            None => Ok(v.context),
        }
    }

    /// `PreToolUse`: `Some(reason)` when a hook refuses the call.
    pub(crate) async fn pre_tool_hooks(
        &self,
        session: &Session,
        call: &ToolCall,
    ) -> Option<String> {
        self.hooks_of(
            session,
            HookEvent::PreToolUse,
            Some(&call.name),
            json!({"tool_name": call.name, "tool_input": call.arguments}),
        )
        .await
        .block
    }

    /// `PostToolUse`: the feedback to append to the result the model gets (a block's reason,
    /// or printed context), if any.
    pub(crate) async fn post_tool_hooks(
        &self,
        session: &Session,
        call: &ToolCall,
        ok: bool,
        output: &str,
    ) -> Option<String> {
        let v = self
            .hooks_of(
                session,
                HookEvent::PostToolUse,
                Some(&call.name),
                json!({"tool_name": call.name, "tool_input": call.arguments, "tool_response": {"ok": ok, "output": output}}),
            )
            .await;
        let mut lines: Vec<String> = v.block.into_iter().collect();
        lines.extend(v.context);
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    /// `Stop`: `Some(reason)` when a hook asks the model to go on (at most
    /// [`MAX_STOP_CONTINUES`] times a turn), after publishing `hook.continue{count, reason}`.
    pub(crate) async fn stop_hooks(
        &self,
        session: &Session,
        t: &TurnStart,
        acc: &mut TurnAccount,
        answer: &str,
    ) -> Option<String> {
        if acc.stop_continues >= MAX_STOP_CONTINUES {
            return None;
        }
        let reason = self
            .hooks_of(
                session,
                HookEvent::Stop,
                None,
                json!({"stop_hook_active": acc.stop_continues > 0, "last_assistant_message": answer}),
            )
            .await
            .block?;
        acc.stop_continues += 1;
        self.event(
            session,
            &pb::HookContinueEvent {
                count: acc.stop_continues,
                reason: reason.clone(),
                turn_id: t.turn_id.clone(),
                ..Default::default()
            },
        );
        Some(reason)
    }
}
