//! Applying one in-order session event (protocol § session.event kinds) to the state.

use super::*;

/// Applies one in-order event of the current session.
pub(super) fn apply(state: &mut State, event: &SessionEvent) {
    state.last_seq = event.seq;
    let p = &event.payload;
    match event.kind.as_str() {
        "turn.started" => {
            let turn = str_of(p, "turnId").to_owned();
            state
                .queued
                .retain(|q| q.turn_id.as_deref() != Some(turn.as_str()));
            state.turn_id = Some(turn);
            state.turn_started = Some(state.now);
            state.streamed = false;
            if p.get("initiator").and_then(Value::as_str) == Some("system") {
                let why = str_of(p, "reason");
                state.notice(
                    format!("turn started by the system {why}")
                        .trim()
                        .to_owned(),
                    Level::Info,
                );
            }
        }
        "turn.queued" => {
            let turn = str_of(p, "turnId");
            if !state
                .queued
                .iter()
                .any(|q| q.turn_id.as_deref() == Some(turn))
            {
                // Ours (the prompt reply may come later) or another client's.
                match state.queued.iter_mut().find(|q| q.turn_id.is_none()) {
                    Some(q) => q.turn_id = Some(turn.to_owned()),
                    None => state.queued.push(Queued {
                        turn_id: Some(turn.to_owned()),
                        text: String::new(),
                    }),
                }
            }
        }
        "turn.dequeued" => {
            let turn = str_of(p, "turnId");
            state.queued.retain(|q| q.turn_id.as_deref() != Some(turn));
            match str_of(p, "reason") {
                "dropped" => state.notice("a queued prompt was dropped", Level::Warn),
                "steered" => state.notice(
                    "a queued prompt was folded into the running turn",
                    Level::Info,
                ),
                _ => {}
            }
        }
        "turn.done" => {
            let turn = str_of(p, "turnId");
            if state.turn_id.as_deref() == Some(turn) || state.turn_id.is_none() {
                state.turn_id = None;
                state.turn_started = None;
                state.running_command = None;
            }
            for e in &mut state.blocks {
                if let Block::Assistant { done, .. } = &mut e.block {
                    *done = true;
                }
            }
            for i in state.tools.values().copied().collect::<Vec<_>>() {
                if let Some(Entry {
                    block: Block::Tool { status, .. },
                    ..
                }) = state.blocks.get_mut(i)
                {
                    if *status == ToolStatus::Running {
                        *status = ToolStatus::Failed("did not finish".into());
                    }
                }
            }
            let reason = str_of(p, "reason");
            match reason {
                "complete" | "" => {}
                "interrupted" => state.notice("⏹ turn interrupted", Level::Warn),
                other => state.notice(format!("turn ended: {other}"), Level::Error),
            }
        }
        "message.user" => {
            let steered = p.get("steered").and_then(Value::as_bool).unwrap_or(false);
            state.push(Block::User {
                text: str_of(p, "text").to_owned(),
                steered,
            });
        }
        "message.delta" => {
            let text = str_of(p, "text");
            state.streamed = true;
            let rev = state.bump();
            // The answer being streamed, even when notices (reconnecting, …) came after it.
            let streaming = state
                .blocks
                .iter_mut()
                .rev()
                .find(|e| !matches!(e.block, Block::Notice { .. }));
            match streaming {
                Some(Entry {
                    block:
                        Block::Assistant {
                            text: t,
                            done: false,
                        },
                    rev: r,
                }) => {
                    t.push_str(text);
                    *r = rev;
                }
                _ => {
                    state.push(Block::Assistant {
                        text: text.to_owned(),
                        done: false,
                    });
                }
            }
        }
        "message.reasoning" => {
            let text = str_of(p, "text");
            let rev = state.bump();
            match state.blocks.last_mut() {
                Some(Entry {
                    block: Block::Reasoning { text: t },
                    rev: r,
                }) => {
                    t.push_str(text);
                    *r = rev;
                }
                _ => {
                    state.push(Block::Reasoning {
                        text: text.to_owned(),
                    });
                }
            }
        }
        "message.done" => {
            let full = str_of(p, "text");
            let role = str_of(p, "role");
            if role == "user" {
                return;
            }
            // The turn's message.done carries the text of every round; what was streamed
            // is shown already.
            if state.streamed {
                let rev = state.bump();
                for e in state.blocks.iter_mut().rev().take(64) {
                    if let Block::Assistant {
                        done: done @ false, ..
                    } = &mut e.block
                    {
                        *done = true;
                        e.rev = rev;
                    }
                }
            } else {
                match () {
                    _ if !full.is_empty() => {
                        if role == "system" || str_of(p, "messageKind") == "interrupted" {
                            state.notice(full.to_owned(), Level::Info);
                        } else {
                            state.push(Block::Assistant {
                                text: full.to_owned(),
                                done: true,
                            });
                        }
                    }
                    _ => {}
                }
            }
            if p.get("truncated").and_then(Value::as_bool) == Some(true) {
                state.notice(
                    "the answer hit the output limit and is incomplete",
                    Level::Warn,
                );
            }
        }
        "tool.call" => {
            let name = str_of(p, "name").to_owned();
            let summary =
                crate::run::render::tool_summary(&name, p.get("args").unwrap_or(&Value::Null));
            let call_id = str_of(p, "callId").to_owned();
            let i = state.push(Block::Tool {
                call_id: call_id.clone(),
                name,
                summary,
                status: ToolStatus::Running,
            });
            state.tools.insert(call_id, i);
        }
        "tool.result" => {
            let ok = p.get("ok").and_then(Value::as_bool).unwrap_or(false);
            let new_status = if ok {
                ToolStatus::Ok(crate::run::render::short_result(str_of(p, "output")))
            } else {
                ToolStatus::Failed(one_line(str_of(p, "error")))
            };
            let rev = state.bump();
            match state.tools.get(str_of(p, "callId")).copied() {
                Some(i) => {
                    if let Some(Entry {
                        block: Block::Tool { status, .. },
                        rev: r,
                    }) = state.blocks.get_mut(i)
                    {
                        *status = new_status;
                        *r = rev;
                    }
                }
                None => {
                    state.push(Block::Tool {
                        call_id: str_of(p, "callId").to_owned(),
                        name: str_of(p, "name").to_owned(),
                        summary: String::new(),
                        status: new_status,
                    });
                }
            }
        }
        "diff" => {
            state.push(Block::Diff {
                path: str_of(p, "path").to_owned(),
                patch: str_of(p, "patch").to_owned(),
            });
        }
        "usage" => {
            let n = |k: &str| p.get(k).and_then(Value::as_u64).unwrap_or(0);
            state.tokens.0 += n("inputTokens");
            state.tokens.1 += n("outputTokens");
            if let Some(m) = p.get("model").and_then(Value::as_str) {
                state.model = m.to_owned();
            }
        }
        "context" => {
            state.context_percent = p.get("percent").and_then(Value::as_f64);
            if let Some(m) = p.get("model").and_then(Value::as_str) {
                state.model = m.to_owned();
            }
        }
        "error" => {
            let code = str_of(p, "code");
            state.notice(
                format!("error ({code}): {}", str_of(p, "message")),
                Level::Error,
            );
        }
        "mode.changed" => {
            state.mode = str_of(p, "mode").to_owned();
            if state.running_command.is_none() {
                state.notice(format!("mode is now {}", state.mode), Level::Info);
            }
        }
        "model.changed" => {
            state.model = str_of(p, "model").to_owned();
            state.effort = str_of(p, "effort").to_owned();
            if state.running_command.is_none() {
                state.notice(format!("model is now {}", state.model), Level::Info);
            }
        }
        "compaction.started" => state.notice("compacting the conversation…", Level::Info),
        "compaction" => state.notice(
            format!(
                "conversation compacted: {} → {} tokens",
                p["before"].as_u64().unwrap_or(0),
                p["after"].as_u64().unwrap_or(0)
            ),
            Level::Info,
        ),
        "checkpoint.restored" => {
            let n = p["restored"].as_array().map_or(0, Vec::len);
            state.notice(format!("checkpoint restored: {n} file(s)"), Level::Info);
        }
        "subagent.spawn" => state.notice(
            format!(
                "subagent started: {}",
                first_non_empty(&[str_of(p, "title"), str_of(p, "task")])
            ),
            Level::Info,
        ),
        "subagent.done" => state.notice(
            format!("subagent finished ({})", str_of(p, "reason")),
            Level::Info,
        ),
        "loop.suspected" => state.notice(
            format!("the model seems to repeat `{}`", str_of(p, "tool")),
            Level::Warn,
        ),
        "todos.updated" => {
            let todos = p["todos"].as_array().cloned().unwrap_or_default();
            let lines: Vec<String> = todos
                .iter()
                .map(|t| {
                    let mark = match str_of(t, "status") {
                        "completed" => "☑",
                        "in_progress" => "◐",
                        _ => "☐",
                    };
                    format!("{mark} {}", str_of(t, "content"))
                })
                .collect();
            if !lines.is_empty() {
                state.notice(lines.join("\n"), Level::Info);
            }
        }
        _ => {}
    }
}
