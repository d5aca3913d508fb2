//! Call replies ([`Msg::Reply`]): what each answered call changes, and the fallbacks when a
//! method answers `not_implemented`.

use super::*;

pub(super) fn on_reply(
    state: &mut State,
    purpose: Purpose,
    result: Result<Value, CallError>,
) -> Vec<Effect> {
    match (purpose, result) {
        (Purpose::StartupList, Ok(v)) => {
            let rows = sessions_from(&v);
            if rows.is_empty() {
                return state.create();
            }
            state.modal = Some(Modal::Picker(Picker {
                rows,
                // The most recent session is preselected; row 0 is "new session".
                cursor: 1,
                renaming: None,
                loading: false,
            }));
            Vec::new()
        }
        (Purpose::StartupList, Err(e)) => {
            state.notice(
                format!("session.list failed: {e}; starting a new session"),
                Level::Warn,
            );
            state.create()
        }
        (Purpose::PickerList, Ok(v)) => {
            if let Some(Modal::Picker(p)) = &mut state.modal {
                p.rows = sessions_from(&v);
                p.loading = false;
                p.cursor = p.cursor.min(p.rows.len());
            }
            Vec::new()
        }
        (Purpose::Create, Ok(v)) => match v.get("sessionId").and_then(Value::as_str) {
            Some(sid) => {
                let sid = sid.to_owned();
                let mut fx = state.open(&sid);
                state.notice(
                    format!("new session {sid} in {}", state.workdir),
                    Level::Info,
                );
                if let Some(m) = &state.start_mode {
                    state.mode = m.clone();
                }
                // A new session is ours already (no attach); its resume brings the mode
                // and model it got.
                fx.clear();
                fx.push(resume(&sid, 0));
                fx.extend(state.list_commands());
                fx
            }
            None => {
                state.notice("session.create answered without a sessionId", Level::Error);
                Vec::new()
            }
        },
        (Purpose::Attach(sid), Ok(_)) => {
            if state.session_id.as_deref() != Some(sid.as_str()) {
                return Vec::new();
            }
            let mut fx = vec![resume(&sid, 0)];
            if let Some(mode) = state.start_mode.clone() {
                fx.push(Effect::Call {
                    method: "session.setMode",
                    params: json!({ "sessionId": sid, "mode": mode }),
                    purpose: Purpose::Other("session.setMode".into()),
                });
            }
            fx.extend(state.list_commands());
            fx
        }
        (Purpose::Resume(sid), Ok(v)) => {
            if state.session_id.as_deref() != Some(sid.as_str()) {
                return Vec::new();
            }
            let opening = state.last_seq == 0 && state.blocks.is_empty();
            if let Some(m) = v.get("mode").and_then(Value::as_str) {
                state.mode = m.to_owned();
            }
            if let Some(m) = v.get("model").and_then(Value::as_str) {
                state.model = m.to_owned();
            }
            if let Some(m) = v.get("effort").and_then(Value::as_str) {
                state.effort = m.to_owned();
            }
            let events: Vec<SessionEvent> = v["events"]
                .as_array()
                .map(|es| es.iter().filter_map(SessionEvent::from_value).collect())
                .unwrap_or_default();
            let fx = on_resumed(state, events);
            if opening {
                state.notice(
                    format!(
                        "session {sid} opened (history replayed up to event {})",
                        state.last_seq
                    ),
                    Level::Info,
                );
            }
            fx
        }
        (Purpose::Attach(sid) | Purpose::Resume(sid), Err(e)) => {
            state.resuming = false;
            state.notice(format!("could not open session {sid}: {e}"), Level::Error);
            Vec::new()
        }
        (Purpose::Prompt(text), Ok(v)) => {
            let turn = v.get("turnId").and_then(Value::as_str).map(str::to_owned);
            if let Some(q) = state
                .queued
                .iter_mut()
                .find(|q| q.text == text && q.turn_id.is_none())
            {
                q.turn_id = turn.clone();
            }
            // The turn may have started already (then it is not queued at all).
            if turn.is_some() && state.turn_id == turn {
                state.queued.retain(|q| q.turn_id != turn);
            }
            Vec::new()
        }
        (Purpose::Prompt(text), Err(e)) => {
            state
                .queued
                .retain(|q| !(q.text == text && q.turn_id.is_none()));
            state.notice(format!("the prompt was not sent: {e}"), Level::Error);
            restore_input(state, &text);
            Vec::new()
        }
        (Purpose::Steer(_), Ok(_)) => {
            state.flash(
                "steering: the message joins the running turn at its next tool round",
                Level::Info,
            );
            Vec::new()
        }
        (Purpose::Steer(text), Err(CallError::Unavailable(_))) => {
            state.steer_unavailable = true;
            state.notice(
                "steering is unavailable: this daemon does not implement session.steer yet; press Enter to queue the message instead",
                Level::Warn,
            );
            restore_input(state, &text);
            Vec::new()
        }
        (Purpose::Steer(text), Err(e)) => {
            state.notice(format!("steer failed: {e}"), Level::Error);
            restore_input(state, &text);
            Vec::new()
        }
        (Purpose::Interrupt, Err(e)) => {
            state.notice(format!("interrupt failed: {e}"), Level::Error);
            Vec::new()
        }
        (Purpose::Interrupt, Ok(_)) => Vec::new(),
        (Purpose::CommandList, result) => {
            state.commands = result.map(|v| commands_from(&v));
            Vec::new()
        }
        (Purpose::Command { name, args }, Err(CallError::Unavailable(_))) => {
            direct_command(state, &name, &args)
        }
        (Purpose::Command { name, .. }, Err(e)) => {
            state.running_command = None;
            state.notice(format!("/{name} failed: {e}"), Level::Error);
            Vec::new()
        }
        (Purpose::Command { name, .. }, Ok(_)) => {
            // Only a command the daemon lists is "running"; an unknown one fails in its
            // turn with the daemon's own error, so nothing is claimed here.
            let known = state
                .commands
                .as_ref()
                .is_ok_and(|cs| cs.iter().any(|c| c.name == name));
            if known {
                state.flash(format!("/{name} running…"), Level::Info);
            }
            Vec::new()
        }
        (Purpose::Direct(what), Ok(v)) => {
            let text = match what.as_str() {
                "session.setModel" => {
                    format!("model: {}", v["model"].as_str().unwrap_or("(default)"))
                }
                "session.setEffort" => {
                    format!("effort: {}", v["effort"].as_str().unwrap_or("(none)"))
                }
                "session.setMode" => {
                    // mode.changed says so in the transcript.
                    if let Some(m) = v["mode"].as_str() {
                        state.mode = m.to_owned();
                    }
                    return Vec::new();
                }
                "checkpoint.restore" => "files restored from the latest checkpoint".to_owned(),
                other => format!("{other}: done"),
            };
            state.notice(text, Level::Info);
            Vec::new()
        }
        (Purpose::Direct(what), Err(CallError::Unavailable(_))) => {
            state.notice(
                format!("unavailable: this daemon implements neither command.run nor {what} yet"),
                Level::Warn,
            );
            Vec::new()
        }
        (Purpose::Direct(what), Err(e)) => {
            state.notice(format!("{what} failed: {e}"), Level::Error);
            Vec::new()
        }
        (Purpose::UndoList, Ok(v)) => {
            let newest = v["checkpoints"].as_array().and_then(|c| c.first()).cloned();
            match (newest, state.session_id.clone()) {
                (Some(cp), Some(sid)) => vec![Effect::Call {
                    method: "checkpoint.restore",
                    params: json!({ "sessionId": sid, "id": str_of(&cp, "id") }),
                    purpose: Purpose::Direct("checkpoint.restore".into()),
                }],
                _ => {
                    state.notice(
                        "nothing to undo: this session has no checkpoint",
                        Level::Info,
                    );
                    Vec::new()
                }
            }
        }
        (Purpose::UndoList, Err(e)) => {
            state.notice(format!("/undo failed: {e}"), Level::Error);
            Vec::new()
        }
        (Purpose::Complete(query), result) => {
            if let Some(c) = &mut state.completion {
                if c.query == query {
                    c.set_result(result);
                }
            }
            Vec::new()
        }
        (Purpose::Other(what), Err(e)) => {
            match e {
                CallError::Unavailable(_) => {
                    state.notice(format!("{what} is unavailable in this daemon"), Level::Warn)
                }
                e => state.notice(format!("{what} failed: {e}"), Level::Error),
            }
            Vec::new()
        }
        (Purpose::Other(what), Ok(_)) => {
            match what.as_str() {
                "session.close" => {
                    state.notice("session closed", Level::Info);
                    if matches!(state.modal, Some(Modal::Picker(_))) {
                        return vec![list_for_picker(state)];
                    }
                }
                "session.rename" => {
                    if matches!(state.modal, Some(Modal::Picker(_))) {
                        return vec![list_for_picker(state)];
                    }
                }
                _ => {}
            }
            Vec::new()
        }
        (Purpose::Create | Purpose::PickerList, Err(e)) => {
            state.notice(format!("{e}"), Level::Error);
            Vec::new()
        }
    }
}

pub(super) fn restore_input(state: &mut State, text: &str) {
    if state.input_text().is_empty() {
        state.input = input::new_editor();
        state.input.insert_str(text);
    }
}

/// Runs a built-in command through its own method when `command.run` is unavailable.
pub(super) fn direct_command(state: &mut State, name: &str, args: &str) -> Vec<Effect> {
    let Some(sid) = state.session_id.clone() else {
        return Vec::new();
    };
    let args = args.trim();
    let (method, params) = match name {
        "mode" => {
            if !matches!(args, "plan" | "accept" | "auto") {
                state.notice("usage: /mode plan|accept|auto", Level::Warn);
                return Vec::new();
            }
            ("session.setMode", json!({ "sessionId": sid, "mode": args }))
        }
        "model" => {
            let model = if args.is_empty() || args == "inherit" {
                Value::Null
            } else {
                args.into()
            };
            (
                "session.setModel",
                json!({ "sessionId": sid, "model": model }),
            )
        }
        "effort" => {
            let effort = if args.is_empty() || args == "inherit" {
                Value::Null
            } else {
                args.into()
            };
            (
                "session.setEffort",
                json!({ "sessionId": sid, "effort": effort }),
            )
        }
        "compact" => {
            let instructions = if args.is_empty() {
                Value::Null
            } else {
                args.into()
            };
            (
                "session.compact",
                json!({ "sessionId": sid, "instructions": instructions }),
            )
        }
        "undo" => {
            return vec![Effect::Call {
                method: "checkpoint.list",
                params: json!({ "sessionId": sid }),
                purpose: Purpose::UndoList,
            }]
        }
        other => {
            state.notice(
                format!("/{other} is unavailable: this daemon does not implement command.run yet"),
                Level::Warn,
            );
            return Vec::new();
        }
    };
    vec![Effect::Call {
        method,
        params,
        purpose: Purpose::Direct(method.to_owned()),
    }]
}
