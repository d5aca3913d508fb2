//! Key presses: the prompt editor, history, palette and completion, submit (prompt, queue,
//! steer, slash commands), and the keys of each modal.

use super::*;

pub(super) fn is_ctrl(key: &KeyEvent, c: char) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char(c)
}

pub(super) fn on_key(state: &mut State, key: KeyEvent) -> Vec<Effect> {
    if key.kind == crossterm::event::KeyEventKind::Release {
        return Vec::new();
    }
    if is_ctrl(&key, 'c') {
        if state.quit_armed.is_some() {
            state.quitting = true;
            return vec![Effect::Quit];
        }
        state.quit_armed = Some(state.now);
        state.flash("press Ctrl-C again to leave", Level::Warn);
        return Vec::new();
    }
    state.quit_armed = None;
    match state.modal.clone() {
        Some(Modal::Approval) => return approval_key(state, key),
        Some(Modal::Question) => return question_key(state, key),
        Some(Modal::Picker(p)) => return picker_key(state, p, key),
        Some(Modal::Help) => {
            state.modal = None;
            show_next_modal(state);
            return Vec::new();
        }
        None => {}
    }
    // Global keys.
    match key.code {
        KeyCode::F(1) => {
            state.modal = Some(Modal::Help);
            return Vec::new();
        }
        KeyCode::PageUp => {
            state.scroll += usize::from(state.viewport_rows.max(2) - 1);
            return Vec::new();
        }
        KeyCode::PageDown => {
            state.scroll = state
                .scroll
                .saturating_sub(usize::from(state.viewport_rows.max(2) - 1));
            return Vec::new();
        }
        KeyCode::End if key.modifiers.contains(KeyModifiers::CONTROL) => {
            state.scroll = 0;
            return Vec::new();
        }
        _ => {}
    }
    if is_ctrl(&key, 'r') {
        state.show_reasoning = !state.show_reasoning;
        state.epoch += 1;
        return Vec::new();
    }
    if is_ctrl(&key, 'o') {
        return open_picker(state);
    }
    if is_ctrl(&key, 's') {
        return submit(state, true);
    }
    if is_ctrl(&key, 'l') {
        state.scroll = 0;
        return Vec::new();
    }
    let palette = state.palette();
    match key.code {
        KeyCode::Esc => {
            if state.completion.take().is_some() {
                return Vec::new();
            }
            if palette.is_some() {
                state.input = input::new_editor();
                return Vec::new();
            }
            if state.busy() {
                if let Some(sid) = state.session_id.clone() {
                    state.flash("interrupting…", Level::Warn);
                    return vec![Effect::Call {
                        method: "session.interrupt",
                        params: json!({ "sessionId": sid }),
                        purpose: Purpose::Interrupt,
                    }];
                }
            }
            Vec::new()
        }
        KeyCode::Tab => {
            if let Some(rows) = palette {
                if let Some(c) = rows.get(state.palette_cursor.min(rows.len().saturating_sub(1))) {
                    state.input = input::new_editor();
                    state.input.insert_str(format!("/{} ", c.name));
                }
                return Vec::new();
            }
            if let Some(c) = state.completion.take() {
                if let Some(path) = c.selected_path() {
                    input::replace_at_word(&mut state.input, &format!("@{path}"));
                    return after_edit(state);
                }
            }
            Vec::new()
        }
        KeyCode::Up | KeyCode::Down if palette.as_ref().is_some_and(|r| !r.is_empty()) => {
            let n = palette.map_or(1, |r| r.len());
            state.palette_cursor = step(state.palette_cursor, n, key.code == KeyCode::Down);
            Vec::new()
        }
        KeyCode::Up | KeyCode::Down
            if state
                .completion
                .as_ref()
                .is_some_and(Completion::has_entries) =>
        {
            if let Some(c) = &mut state.completion {
                c.step(key.code == KeyCode::Down);
            }
            Vec::new()
        }
        KeyCode::Up if state.input.cursor().0 == 0 => {
            history_step(state, true);
            Vec::new()
        }
        KeyCode::Down
            if state.input.cursor().0 + 1 >= state.input.lines().len()
                && state.history_pos.is_some() =>
        {
            history_step(state, false);
            Vec::new()
        }
        KeyCode::Enter
            if !key
                .modifiers
                .intersects(KeyModifiers::ALT | KeyModifiers::SHIFT) =>
        {
            if let Some(rows) = palette {
                let typed = state.input_text();
                if let Some(c) = rows.get(state.palette_cursor.min(rows.len().saturating_sub(1))) {
                    if typed.trim_start_matches('/') != c.name {
                        state.input = input::new_editor();
                        state.input.insert_str(format!("/{}", c.name));
                    }
                }
            }
            if let Some(c) = state.completion.take() {
                if let Some(path) = c.selected_path() {
                    input::replace_at_word(&mut state.input, &format!("@{path}"));
                    return after_edit(state);
                }
            }
            submit(state, false)
        }
        KeyCode::Enter => {
            state.input.insert_newline();
            Vec::new()
        }
        KeyCode::Char('j') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            state.input.insert_newline();
            Vec::new()
        }
        _ => {
            // Moving the cursor keeps the place in the history; editing leaves it.
            if state.input.input(key) {
                state.history_pos = None;
            }
            after_edit(state)
        }
    }
}

pub(super) fn step(cursor: usize, n: usize, down: bool) -> usize {
    if n == 0 {
        return 0;
    }
    let cursor = cursor.min(n - 1);
    if down {
        (cursor + 1) % n
    } else {
        (cursor + n - 1) % n
    }
}

/// After the input changed: reset the palette highlight, start or update `@` completion.
pub(super) fn after_edit(state: &mut State) -> Vec<Effect> {
    state.palette_cursor = state
        .palette_cursor
        .min(state.palette().map_or(0, |r| r.len().saturating_sub(1)));
    let Some(query) = input::at_word(&state.input) else {
        state.completion = None;
        return Vec::new();
    };
    if state.completion.as_ref().is_some_and(|c| c.query == query) {
        return Vec::new();
    }
    state.completion = Some(Completion::new(&query));
    let mut params = json!({ "query": query, "limit": 30 });
    match &state.session_id {
        Some(sid) => params["sessionId"] = sid.as_str().into(),
        None => params["workdir"] = state.workdir.as_str().into(),
    }
    vec![Effect::Call {
        method: "file.complete",
        params,
        purpose: Purpose::Complete(query),
    }]
}

pub(super) fn history_step(state: &mut State, back: bool) {
    if state.history.is_empty() {
        return;
    }
    let (pos, draft) = match state.history_pos.take() {
        Some((pos, draft)) => (Some(pos), draft),
        None => (None, state.input_text()),
    };
    let next = match (pos, back) {
        (None, true) => Some(state.history.len() - 1),
        (None, false) => None,
        (Some(p), true) => Some(p.saturating_sub(1)),
        (Some(p), false) if p + 1 < state.history.len() => Some(p + 1),
        (Some(_), false) => None,
    };
    state.input = input::new_editor();
    match next {
        Some(p) => {
            let text = state.history[p].clone();
            state.input.insert_str(text);
            // On the first line, so the next Up goes further back at once.
            state.input.move_cursor(tui_textarea::CursorMove::Top);
            state.input.move_cursor(tui_textarea::CursorMove::End);
            state.history_pos = Some((p, draft));
        }
        None => {
            state.input.insert_str(draft);
        }
    }
}

/// Enter (or Ctrl-S to steer): a slash command, or a prompt (queued while a turn runs).
pub(super) fn submit(state: &mut State, steer: bool) -> Vec<Effect> {
    let text = state.input_text();
    if text.trim().is_empty() {
        return Vec::new();
    }
    let Some(sid) = state.session_id.clone() else {
        state.flash("no session yet", Level::Warn);
        return Vec::new();
    };
    state.input = input::new_editor();
    state.completion = None;
    state.history_pos = None;
    state.scroll = 0;
    if state.history.last() != Some(&text) {
        state.history.push(text.clone());
        if state.history.len() > HISTORY_MAX {
            state.history.remove(0);
        }
    }
    if let Some(cmd) = text.strip_prefix('/') {
        if !cmd.starts_with('/') {
            return slash(state, &sid, cmd.trim());
        }
    }
    if steer && state.busy() {
        if state.steer_unavailable {
            state.flash(
                "steering is unavailable in this daemon; queued instead",
                Level::Warn,
            );
        } else {
            return vec![Effect::Call {
                method: "session.steer",
                params: json!({ "sessionId": sid, "text": text }),
                purpose: Purpose::Steer(text),
            }];
        }
    }
    let mut params = json!({ "sessionId": sid, "text": text });
    if state.busy() {
        params["whenBusy"] = "queue".into();
        state.queued.push(Queued {
            turn_id: None,
            text: text.clone(),
        });
    }
    vec![Effect::Call {
        method: "session.prompt",
        params,
        purpose: Purpose::Prompt(text),
    }]
}

pub(super) fn slash(state: &mut State, sid: &str, line: &str) -> Vec<Effect> {
    let (name, args) = match line.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (line, ""),
    };
    match name {
        "sessions" => open_picker(state),
        "new" => state.create(),
        "rename" => vec![Effect::Call {
            method: "session.rename",
            params: json!({ "sessionId": sid, "title": args }),
            purpose: Purpose::Other("session.rename".into()),
        }],
        "close" => {
            let fx = vec![Effect::Call {
                method: "session.close",
                params: json!({ "sessionId": sid }),
                purpose: Purpose::Other("session.close".into()),
            }];
            state.session_id = None;
            state.clear_transcript();
            let mut fx = fx;
            fx.extend(open_picker(state));
            fx
        }
        "reasoning" => {
            state.show_reasoning = !state.show_reasoning;
            state.epoch += 1;
            Vec::new()
        }
        "theme" => {
            state.theme = match (args, state.theme) {
                ("dark", _) => ThemeKind::Dark,
                ("light", _) => ThemeKind::Light,
                (_, ThemeKind::Dark) => ThemeKind::Light,
                (_, ThemeKind::Light) => ThemeKind::Dark,
            };
            state.epoch += 1;
            let name = match state.theme {
                ThemeKind::Dark => "dark",
                ThemeKind::Light => "light",
            };
            state.notice(format!("theme: {name}"), Level::Info);
            Vec::new()
        }
        // The daemon's /help lists its commands in the transcript (its "unknown command"
        // error points there); the client's own commands and the keys are added here.
        "help" if args.is_empty() => {
            state.notice(CLIENT_HELP, Level::Info);
            command_run(state, sid, name, args)
        }
        "quit" | "exit" => {
            state.quitting = true;
            vec![Effect::Quit]
        }
        "" => Vec::new(),
        _ => command_run(state, sid, name, args),
    }
}

/// The line `/help` adds for what this client runs itself.
pub(super) const CLIENT_HELP: &str = "this client's own commands: /sessions /new /rename <title> /close /reasoning /theme [dark|light] /quit · F1 lists the keys";

/// `command.run` of a daemon command; remembered as the running command so its events are
/// not said twice (its own reply reports the change).
fn command_run(state: &mut State, sid: &str, name: &str, args: &str) -> Vec<Effect> {
    state.running_command = Some(name.to_owned());
    vec![Effect::Call {
        method: "command.run",
        params: json!({ "sessionId": sid, "name": name, "args": args }),
        purpose: Purpose::Command {
            name: name.to_owned(),
            args: args.to_owned(),
        },
    }]
}

pub(super) fn open_picker(state: &mut State) -> Vec<Effect> {
    state.modal = Some(Modal::Picker(Picker {
        rows: Vec::new(),
        cursor: 0,
        renaming: None,
        loading: true,
    }));
    vec![list_for_picker(state)]
}

pub(super) fn picker_key(state: &mut State, mut p: Picker, key: KeyEvent) -> Vec<Effect> {
    if let Some(title) = &mut p.renaming {
        match key.code {
            KeyCode::Esc => p.renaming = None,
            KeyCode::Enter => {
                let title = title.clone();
                p.renaming = None;
                if let Some(row) = p.cursor.checked_sub(1).and_then(|i| p.rows.get(i)) {
                    let sid = row.session_id.clone();
                    if state.session_id.as_deref() == Some(sid.as_str()) {
                        state.title = title.clone();
                    }
                    state.modal = Some(Modal::Picker(p));
                    return vec![Effect::Call {
                        method: "session.rename",
                        params: json!({ "sessionId": sid, "title": title }),
                        purpose: Purpose::Other("session.rename".into()),
                    }];
                }
            }
            KeyCode::Backspace => {
                title.pop();
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => title.push(c),
            _ => {}
        }
        state.modal = Some(Modal::Picker(p));
        return Vec::new();
    }
    let n = p.rows.len() + 1;
    let row = p.cursor.checked_sub(1).and_then(|i| p.rows.get(i)).cloned();
    match key.code {
        KeyCode::Esc if state.session_id.is_some() => {
            state.modal = None;
            show_next_modal(state);
            return Vec::new();
        }
        KeyCode::Up => p.cursor = step(p.cursor, n, false),
        KeyCode::Down => p.cursor = step(p.cursor, n, true),
        KeyCode::Enter => {
            state.modal = None;
            return match row {
                None => state.create(),
                Some(r) if state.session_id.as_deref() == Some(r.session_id.as_str()) => Vec::new(),
                Some(r) => state.open(&r.session_id),
            };
        }
        KeyCode::Char('n') => {
            state.modal = None;
            return state.create();
        }
        KeyCode::Char('r') if row.is_some() => p.renaming = Some(String::new()),
        KeyCode::Char('d') | KeyCode::Delete => {
            if let Some(r) = row {
                if state.session_id.as_deref() == Some(r.session_id.as_str()) {
                    state.session_id = None;
                    state.clear_transcript();
                }
                p.rows.retain(|x| x.session_id != r.session_id);
                p.cursor = p.cursor.min(p.rows.len());
                state.modal = Some(Modal::Picker(p));
                return vec![Effect::Call {
                    method: "session.close",
                    params: json!({ "sessionId": r.session_id }),
                    purpose: Purpose::Other("session.close".into()),
                }];
            }
        }
        _ => {}
    }
    state.modal = Some(Modal::Picker(p));
    Vec::new()
}

pub(super) fn approval_key(state: &mut State, key: KeyEvent) -> Vec<Effect> {
    let Some(a) = state.approvals.front_mut() else {
        state.modal = None;
        return Vec::new();
    };
    let pick = |c: &str| a.choices.iter().position(|x| *x == c);
    let chosen = match key.code {
        KeyCode::Left | KeyCode::Up | KeyCode::BackTab => {
            a.cursor = step(a.cursor, a.choices.len(), false);
            None
        }
        KeyCode::Right | KeyCode::Down | KeyCode::Tab => {
            a.cursor = step(a.cursor, a.choices.len(), true);
            None
        }
        KeyCode::Enter => Some(a.cursor),
        KeyCode::Char('y' | '1' | 'o') => pick("once"),
        KeyCode::Char('s' | '2') => pick("session"),
        KeyCode::Char('p' | '3') => pick("project"),
        KeyCode::Char('a' | '4') => pick("always"),
        KeyCode::Char('w') => pick("site"),
        KeyCode::Char('n' | 'd') | KeyCode::Esc => pick("deny"),
        _ => None,
    };
    let Some(i) = chosen else {
        return Vec::new();
    };
    let Some(a) = state.approvals.pop_front() else {
        return Vec::new();
    };
    let choice = a.choices[i];
    let result = if choice == "deny" {
        json!({ "decision": "deny", "reason": format!("the user refused `{}` in snowpea chat", a.tool) })
    } else {
        json!({ "decision": "allow", "scope": choice })
    };
    let shown = if choice == "deny" {
        "denied".to_owned()
    } else {
        format!("allowed ({choice})")
    };
    state.notice(
        format!("{} {shown}", a.tool),
        if choice == "deny" {
            Level::Warn
        } else {
            Level::Info
        },
    );
    state.modal = None;
    show_next_modal(state);
    vec![Effect::Answer {
        request_id: a.request_id,
        result,
        fallback: "approval.respond",
    }]
}

pub(super) fn question_key(state: &mut State, key: KeyEvent) -> Vec<Effect> {
    let Some(b) = state.questions.front_mut() else {
        state.modal = None;
        return Vec::new();
    };
    if key.code == KeyCode::Esc {
        // Declining answers the batch with no answers.
        let b = state.questions.pop_front().expect("front exists");
        state.notice("question declined", Level::Warn);
        state.modal = None;
        show_next_modal(state);
        return vec![Effect::Answer {
            request_id: b.request_id,
            result: json!({ "answers": [] }),
            fallback: "question.respond",
        }];
    }
    let Some(q) = b.questions.get(b.index).cloned() else {
        return finish_questions(state);
    };
    let rows = q.options.len() + usize::from(q.allow_other);
    let on_text = q.allow_other && b.cursor == q.options.len();
    match key.code {
        KeyCode::Up => b.cursor = step(b.cursor, rows, false),
        KeyCode::Down | KeyCode::Tab => b.cursor = step(b.cursor, rows, true),
        KeyCode::Char(' ') if q.multi && !on_text => {
            let i = b.cursor;
            if b.selected.contains(&i) {
                b.selected.remove(&i);
            } else {
                b.selected.insert(i);
            }
        }
        KeyCode::Backspace if on_text => {
            b.text.pop();
        }
        KeyCode::Char(c) if on_text && !key.modifiers.contains(KeyModifiers::CONTROL) => {
            b.text.push(c)
        }
        KeyCode::Enter => {
            let mut selected: Vec<String> = if q.multi {
                b.selected
                    .iter()
                    .filter_map(|i| q.options.get(*i))
                    .map(|o| o.0.clone())
                    .collect()
            } else if !on_text {
                q.options
                    .get(b.cursor)
                    .map(|o| vec![o.0.clone()])
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            if q.multi && selected.is_empty() && !on_text {
                if let Some(o) = q.options.get(b.cursor) {
                    selected.push(o.0.clone());
                }
            }
            let text = if b.text.is_empty() {
                Value::Null
            } else {
                Value::String(b.text.clone())
            };
            b.answers
                .push(json!({ "selected": selected, "text": text }));
            b.index += 1;
            b.cursor = 0;
            b.selected.clear();
            b.text.clear();
            if b.index >= b.questions.len() {
                return finish_questions(state);
            }
        }
        _ => {}
    }
    Vec::new()
}

pub(super) fn finish_questions(state: &mut State) -> Vec<Effect> {
    let Some(b) = state.questions.pop_front() else {
        return Vec::new();
    };
    state.notice(
        format!("answered {} question(s)", b.answers.len()),
        Level::Info,
    );
    state.modal = None;
    show_next_modal(state);
    vec![Effect::Answer {
        request_id: b.request_id,
        result: json!({ "answers": b.answers }),
        fallback: "question.respond",
    }]
}
