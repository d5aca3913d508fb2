//! `/compact [focus…]` (medium_write): summarises the session's history to free context —
//! `session.compact` run as the command's own turn. The command turn already holds the
//! session's turn slot, so the history is rebuilt and handed to
//! [`crate::compaction::Compaction::run`] directly (the same summary, events
//! `compaction.started` → `compaction` → `context`, and fallback as `session.compact`); the
//! words after the name are the summary's extra instructions. With nothing old enough to
//! summarise it changes nothing (`before == after`). From the `session_command_run` tool (a
//! model turn is running and owns the history) it is refused with `session_busy`.

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};
use crate::compaction::CompactionCall;
use crate::turn::history;

/// `/compact`.
pub struct Compact;

impl Builtin for Compact {
    fn name(&self) -> &'static str {
        "compact"
    }
    fn summary(&self) -> &'static str {
        "Summarise the conversation so far to free context (session.compact)"
    }
    fn usage(&self) -> &'static str {
        "/compact [focus]"
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn bare_is_read(&self) -> bool {
        false
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            call.args.only_options(&[]).map_err(Failure::args)?;
            if call.turn_id.is_empty() {
                return Err(Failure::failed(
                    "session_busy",
                    "/compact cannot run inside a model turn (the turn owns the history); run it as its own command turn",
                ));
            }
            let session = &call.session;
            cx.log
                .flush()
                .await
                .map_err(|e| Failure::failed("internal", format!("{e:#}")))?;
            let rows = cx
                .log
                .of_kinds(&session.id, history::KINDS)
                .await
                .map_err(|e| Failure::failed("internal", format!("{e:#}")))?;
            let messages = history::rebuild(rows);
            let focus = call.args.words.join(" ");
            let focus = focus.trim();
            // The command turn's own cancellation interrupts the turn before this returns
            // (turn.done interrupted); the summary call needs no separate token.
            let cancel = CancellationToken::new();
            let done = cx
                .peers
                .compaction
                .run(
                    session,
                    messages,
                    CompactionCall {
                        turn_id: Some(&call.turn_id),
                        instructions: (!focus.is_empty()).then_some(focus),
                        auto: false,
                        cancel: &cancel,
                    },
                )
                .await;
            cx.sessions.changed(session, "compacted");
            let text = if done.summary_chars == 0 {
                format!(
                    "nothing old enough to summarise: the history stays at about {} tokens",
                    done.before
                )
            } else {
                format!(
                    "compacted: about {} → {} tokens (summary {} chars, {} messages kept)",
                    done.before,
                    done.after,
                    done.summary_chars,
                    done.messages.len().saturating_sub(1)
                )
            };
            Ok(Reply::done(
                text,
                json!({
                    "before": done.before,
                    "after": done.after,
                    "summaryChars": done.summary_chars,
                }),
            ))
        })
    }
}
