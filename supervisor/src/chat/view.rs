//! The pure `view`: draws a [`State`] into a ratatui frame. The only memory it keeps is
//! [`Cache`], the wrapped lines of each transcript block keyed by the block's revision, so a
//! streaming answer re-renders only its own block (see docs/PERFORMANCE.md).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block as Frame_, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::markdown;
use super::state::{Block, Level, Link, Modal, State, ToolStatus};
use super::theme::Theme;
use super::wrap::wrap;

/// Smallest terminal the layout is made for.
pub const MIN_SIZE: (u16, u16) = (80, 24);

/// Diff lines shown before "… n more lines".
const DIFF_MAX_LINES: usize = 40;

const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// Wrapped lines per transcript block.
#[derive(Default)]
pub struct Cache {
    epoch: u64,
    width: usize,
    theme: Option<(super::state::ThemeKind, bool)>,
    blocks: Vec<Option<(u64, Vec<Line<'static>>)>>,
    /// Per answer block: the bytes of its text already rendered for good (up to a
    /// paragraph break outside code fences) and their wrapped lines, so a streaming answer
    /// re-renders only its last paragraph per frame.
    answers: std::collections::HashMap<usize, (usize, Vec<Line<'static>>)>,
}

impl Cache {
    /// The wrapped lines of every block for `width` (only changed blocks are rendered).
    fn lines(&mut self, state: &State, width: usize) -> &[Option<(u64, Vec<Line<'static>>)>] {
        let theme_key = Some((state.theme, state.no_color));
        if self.epoch != state.epoch || self.width != width || self.theme != theme_key {
            self.blocks.clear();
            self.answers.clear();
            self.epoch = state.epoch;
            self.width = width;
            self.theme = theme_key;
        }
        self.blocks.truncate(state.blocks.len());
        self.blocks.resize(state.blocks.len(), None);
        let theme = Theme::new(state.theme, state.no_color);
        for (i, entry) in state.blocks.iter().enumerate() {
            if self.blocks[i]
                .as_ref()
                .is_some_and(|(rev, _)| *rev == entry.rev)
            {
                continue;
            }
            let prev = i.checked_sub(1).map(|p| &state.blocks[p].block);
            let wrapped = match &entry.block {
                Block::Assistant { text, .. } => {
                    let (done, stable) = self.answers.entry(i).or_default();
                    answer_lines(
                        text,
                        gap_before(&entry.block, prev),
                        done,
                        stable,
                        &theme,
                        width,
                    )
                }
                block => {
                    let logical = block_lines(block, prev, &theme, state.show_reasoning);
                    logical.iter().flat_map(|l| wrap(l, width)).collect()
                }
            };
            self.blocks[i] = Some((entry.rev, wrapped));
        }
        &self.blocks
    }
}

/// The wrapped lines of an answer: `stable` holds the lines of `text[..*done]` (complete
/// paragraphs, rendered once); only the rest is rendered again.
fn answer_lines(
    text: &str,
    gap: bool,
    done: &mut usize,
    stable: &mut Vec<Line<'static>>,
    theme: &Theme,
    width: usize,
) -> Vec<Line<'static>> {
    if *done > text.len() || !text.is_char_boundary(*done) {
        // The text was replaced, not extended.
        *done = 0;
        stable.clear();
    }
    let boundary = markdown::stable_boundary(text, *done);
    if boundary > *done {
        let mut lines = markdown::render(&text[*done..boundary], theme);
        if !lines.is_empty() {
            lines.push(Line::default());
        }
        stable.extend(lines.iter().flat_map(|l| wrap(l, width)));
        *done = boundary;
    }
    let mut out = Vec::with_capacity(stable.len() + 8);
    if gap {
        out.push(Line::default());
    }
    out.extend(stable.iter().cloned());
    out.extend(
        markdown::render(&text[boundary..], theme)
            .iter()
            .flat_map(|l| wrap(l, width)),
    );
    while out.last().is_some_and(|l| l.spans.is_empty()) && out.len() > usize::from(gap) {
        out.pop();
    }
    out
}

/// A blank line before `block` (a new exchange, or an answer after tool lines).
fn gap_before(block: &Block, prev: Option<&Block>) -> bool {
    match block {
        Block::User { .. } => prev.is_some(),
        Block::Assistant { .. } | Block::Reasoning { .. } => prev.is_some_and(|p| {
            !matches!(
                p,
                Block::Assistant { .. } | Block::Reasoning { .. } | Block::User { .. }
            )
        }),
        _ => false,
    }
}

/// The logical lines of one block.
pub fn block_lines(
    block: &Block,
    prev: Option<&Block>,
    theme: &Theme,
    show_reasoning: bool,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if gap_before(block, prev) {
        out.push(Line::default());
    }
    match block {
        Block::User { text, steered } => {
            for (i, l) in text.split('\n').enumerate() {
                let marker = if i == 0 { "› " } else { "  " };
                out.push(Line::from(vec![
                    Span::styled(marker, theme.user()),
                    Span::styled(l.to_owned(), theme.user()),
                ]));
            }
            if *steered {
                out.push(Line::styled(
                    "  (steered into the running turn)",
                    theme.dim(),
                ));
            }
        }
        Block::Assistant { text, .. } => out.extend(markdown::render(text, theme)),
        Block::Reasoning { text } => {
            let italic = theme.dim().add_modifier(Modifier::ITALIC);
            if show_reasoning {
                out.push(Line::styled("▾ thinking (Ctrl-R folds)", italic));
                for l in text.trim_end().split('\n') {
                    out.push(Line::from(vec![
                        Span::styled("  ", italic),
                        Span::styled(l.to_owned(), italic),
                    ]));
                }
            } else {
                let n = text.chars().count();
                out.push(Line::styled(
                    format!("▸ thinking ({n} chars, Ctrl-R shows)"),
                    italic,
                ));
            }
        }
        Block::Tool {
            name,
            summary,
            status,
            ..
        } => {
            let (mark, style, tail) = match status {
                ToolStatus::Running => ("…", theme.dim(), String::new()),
                ToolStatus::Ok(s) => ("✓", theme.ok(), s.clone()),
                ToolStatus::Failed(e) => ("✗", theme.error(), e.clone()),
            };
            let mut spans = vec![
                Span::styled(format!("{mark} "), style),
                Span::styled(name.clone(), style.add_modifier(Modifier::BOLD)),
            ];
            if !summary.is_empty() {
                spans.push(Span::styled(format!(" {summary}"), theme.text()));
            }
            if !tail.is_empty() {
                spans.push(Span::styled(format!(" — {tail}"), theme.dim()));
            }
            out.push(Line::from(spans));
        }
        Block::Diff { path, patch } => {
            out.push(Line::from(vec![
                Span::styled("  ✎ ", theme.warn()),
                Span::styled(path.clone(), theme.text().add_modifier(Modifier::BOLD)),
            ]));
            let lines: Vec<&str> = patch
                .lines()
                .filter(|l| !l.starts_with("---") && !l.starts_with("+++"))
                .collect();
            for l in lines.iter().take(DIFF_MAX_LINES) {
                let style = if l.starts_with('+') {
                    theme.added()
                } else if l.starts_with('-') {
                    theme.removed()
                } else if l.starts_with("@@") {
                    theme.dim()
                } else {
                    theme.text()
                };
                out.push(Line::from(vec![
                    Span::styled("  │ ", theme.dim()),
                    Span::styled((*l).to_owned(), style),
                ]));
            }
            if lines.len() > DIFF_MAX_LINES {
                out.push(Line::styled(
                    format!("  │ … {} more lines", lines.len() - DIFF_MAX_LINES),
                    theme.dim(),
                ));
            }
        }
        Block::Notice { text, level } => {
            let (mark, style) = match level {
                Level::Info => ("·", theme.dim()),
                Level::Warn => ("!", theme.warn()),
                Level::Error => ("✗", theme.error()),
            };
            for (i, l) in text.split('\n').enumerate() {
                let m = if i == 0 { mark } else { " " };
                out.push(Line::styled(format!("{m} {l}"), style));
            }
        }
    }
    out
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, state: &State, cache: &mut Cache) {
    let area = frame.area();
    let theme = Theme::new(state.theme, state.no_color);
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let msg = format!(
            "snowpea chat needs at least {}×{}; this terminal is {}×{}.\nMake it larger (Ctrl-C twice leaves).",
            MIN_SIZE.0, MIN_SIZE.1, area.width, area.height
        );
        frame.render_widget(
            Paragraph::new(msg)
                .wrap(Wrap { trim: true })
                .style(theme.warn()),
            area,
        );
        return;
    }
    let input_rows = u16::try_from(state.input.lines().len().clamp(1, 6)).unwrap_or(6);
    let queued_rows = u16::try_from(state.queued.len().min(3)).unwrap_or(3);
    let [transcript, queued, status, input, hints] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(queued_rows),
        Constraint::Length(1),
        Constraint::Length(input_rows + 2),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_transcript(frame, state, cache, transcript, &theme);
    draw_queued(frame, state, queued, &theme);
    frame.render_widget(Paragraph::new(status_line(state, &theme)), status);
    let mut editor = state.input.clone();
    let title = if state.busy() {
        " message (the agent is working) "
    } else {
        " message "
    };
    editor.set_block(
        Frame_::default()
            .borders(Borders::ALL)
            .border_style(theme.chrome())
            .title(title),
    );
    frame.render_widget(&editor, input);
    frame.render_widget(Paragraph::new(hint_line(state, &theme)), hints);
    draw_popups(frame, state, input, &theme);
    draw_modal(frame, state, area, &theme);
}

fn draw_transcript(
    frame: &mut Frame<'_>,
    state: &State,
    cache: &mut Cache,
    area: Rect,
    theme: &Theme,
) {
    let width = usize::from(area.width.max(1));
    let height = usize::from(area.height);
    let blocks = cache.lines(state, width);
    let total: usize = blocks.iter().flatten().map(|(_, l)| l.len()).sum();
    let max_scroll = total.saturating_sub(height);
    let scroll = state.scroll.min(max_scroll);
    let end = total - scroll;
    let start = end.saturating_sub(height);
    let mut visible: Vec<Line<'static>> = Vec::with_capacity(height);
    let mut at = 0usize;
    for (_, lines) in blocks.iter().flatten() {
        let n = lines.len();
        if at + n > start && at < end {
            let from = start.saturating_sub(at);
            let to = (end - at).min(n);
            visible.extend(lines[from..to].iter().cloned());
        }
        at += n;
        if at >= end {
            break;
        }
    }
    if visible.is_empty() && state.session_id.is_none() {
        visible.push(Line::styled("Connecting to a session…", theme.dim()));
    }
    frame.render_widget(Paragraph::new(visible), area);
    if scroll > 0 {
        let note = format!(" ↓ {scroll} more lines (PgDn, Ctrl-L follows) ");
        let w = u16::try_from(note.width())
            .unwrap_or(area.width)
            .min(area.width);
        let r = Rect::new(area.right() - w, area.bottom() - 1, w, 1);
        frame.render_widget(Paragraph::new(note).style(theme.selected()), r);
    }
}

fn draw_queued(frame: &mut Frame<'_>, state: &State, area: Rect, theme: &Theme) {
    if area.height == 0 {
        return;
    }
    let lines: Vec<Line<'static>> = state
        .queued
        .iter()
        .take(usize::from(area.height))
        .enumerate()
        .map(|(i, q)| {
            let text = if q.text.is_empty() {
                "(queued by another client)".to_owned()
            } else {
                q.text.replace('\n', " ⏎ ")
            };
            let more = if i + 1 == usize::from(area.height) && state.queued.len() > i + 1 {
                format!("  (+{} more)", state.queued.len() - i - 1)
            } else {
                String::new()
            };
            Line::from(vec![
                Span::styled(format!("⏳ queued {}: ", i + 1), theme.warn()),
                Span::styled(text, theme.dim()),
                Span::styled(more, theme.dim()),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

fn human(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 1_000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// The status line: spinner and elapsed time, session, mode, model, usage, context.
pub fn status_line(state: &State, theme: &Theme) -> Line<'static> {
    let mut spans = Vec::new();
    match state.link {
        Link::Up => {}
        Link::Reconnecting => spans.push(Span::styled("⚠ reconnecting… ", theme.warn())),
        Link::Closed => spans.push(Span::styled("✗ disconnected ", theme.error())),
    }
    if let Some(started) = state.turn_started.filter(|_| state.busy()) {
        let secs = state.now.saturating_duration_since(started).as_secs();
        let frame = usize::try_from(state.now.saturating_duration_since(started).as_millis() / 100)
            .unwrap_or(0);
        spans.push(Span::styled(
            format!(
                "{} working {}s · Esc interrupts ",
                SPINNER[frame % SPINNER.len()],
                secs
            ),
            theme.warn(),
        ));
    } else if state.busy() {
        spans.push(Span::styled("… working · Esc interrupts ", theme.warn()));
    } else {
        spans.push(Span::styled("● ready ", theme.ok()));
    }
    // Most useful first: at 80 columns the session's name is what gets cut.
    if let Some(p) = state.context_percent {
        let style = if p >= 80.0 {
            theme.warn()
        } else {
            theme.chrome()
        };
        spans.push(Span::styled(format!("│ ctx {p:.0}% "), style));
    }
    spans.push(Span::styled(
        format!(
            "│ ↑{} ↓{} tokens ",
            human(state.tokens.0),
            human(state.tokens.1)
        ),
        theme.chrome(),
    ));
    if !state.mode.is_empty() {
        spans.push(Span::styled(format!("│ {} ", state.mode), theme.chrome()));
    }
    if !state.model.is_empty() {
        let effort = if state.effort.is_empty() {
            String::new()
        } else {
            format!(" ({})", state.effort)
        };
        spans.push(Span::styled(
            format!("│ {}{effort} ", state.model),
            theme.chrome(),
        ));
    }
    let session = match (&state.session_id, state.title.is_empty()) {
        (None, _) => "no session".to_owned(),
        (Some(id), true) => id.clone(),
        (Some(_), false) => state.title.clone(),
    };
    spans.push(Span::styled(format!("│ {session} "), theme.chrome()));
    Line::from(spans)
}

fn hint_line(state: &State, theme: &Theme) -> Line<'static> {
    if let Some((text, level, _)) = &state.flash {
        let style = match level {
            Level::Info => theme.ok(),
            Level::Warn => theme.warn(),
            Level::Error => theme.error(),
        };
        return Line::styled(text.clone(), style);
    }
    let text = if state.busy() {
        let steer = if state.steer_unavailable {
            "Ctrl-S steer (unavailable)"
        } else {
            "Ctrl-S steer"
        };
        format!("Enter queues · {steer} · Esc interrupt · PgUp/PgDn scroll · Ctrl-C×2 quit")
    } else {
        "Enter send · Alt-Enter newline · / commands · @ paths · Ctrl-O sessions · F1 help"
            .to_owned()
    };
    Line::styled(text, theme.dim())
}

fn popup_above(anchor: Rect, rows: usize) -> Rect {
    let h = u16::try_from(rows + 2).unwrap_or(10).min(anchor.y);
    Rect::new(anchor.x, anchor.y.saturating_sub(h), anchor.width, h)
}

fn draw_popups(frame: &mut Frame<'_>, state: &State, input: Rect, theme: &Theme) {
    if let Some(rows) = state.palette() {
        let mut lines: Vec<Line<'static>> = Vec::new();
        let cursor = state.palette_cursor.min(rows.len().saturating_sub(1));
        let first = cursor.saturating_sub(7);
        for (i, c) in rows.iter().enumerate().skip(first).take(8) {
            let style = if i == cursor {
                theme.selected()
            } else {
                theme.text()
            };
            let mut spans = vec![Span::styled(
                format!("/{}", c.name),
                style.add_modifier(Modifier::BOLD),
            )];
            if !c.hint.is_empty() {
                spans.push(Span::styled(format!(" {}", c.hint), theme.code()));
            }
            spans.push(Span::styled(format!("  {}", c.summary), theme.dim()));
            lines.push(Line::from(spans));
        }
        if rows.is_empty() {
            lines.push(Line::styled("no such command", theme.dim()));
        }
        let title = match &state.commands {
            Ok(_) => " commands (Tab completes, Enter runs) ".to_owned(),
            Err(e @ super::state::CallError::Unavailable(_)) => {
                format!(" commands — daemon list unavailable: {e} ")
            }
            Err(_) => " commands (loading the daemon's list…) ".to_owned(),
        };
        let area = popup_above(input, lines.len());
        frame.render_widget(Clear, area);
        frame.render_widget(
            Paragraph::new(lines).block(
                Frame_::default()
                    .borders(Borders::ALL)
                    .border_style(theme.chrome())
                    .title(title),
            ),
            area,
        );
        return;
    }
    if let Some(c) = &state.completion {
        let mut lines: Vec<Line<'static>> = Vec::new();
        match &c.result {
            None => lines.push(Line::styled("completing…", theme.dim())),
            Some(Err(super::state::CallError::Unavailable(_))) => lines.push(Line::styled(
                "path completion is unavailable: this daemon does not implement file.complete yet",
                theme.warn(),
            )),
            Some(Err(e)) => lines.push(Line::styled(
                format!("file.complete failed: {e}"),
                theme.error(),
            )),
            Some(Ok(entries)) if entries.is_empty() => {
                lines.push(Line::styled("no matching path", theme.dim()))
            }
            Some(Ok(entries)) => {
                let first = c.cursor.saturating_sub(7);
                for (i, e) in entries.iter().enumerate().skip(first).take(8) {
                    let style = if i == c.cursor {
                        theme.selected()
                    } else {
                        theme.text()
                    };
                    let name = if e.dir {
                        format!("{}/", e.path.trim_end_matches('/'))
                    } else {
                        e.path.clone()
                    };
                    lines.push(Line::styled(name, style));
                }
            }
        }
        let area = popup_above(input, lines.len());
        frame.render_widget(Clear, area);
        frame.render_widget(
            Paragraph::new(lines).block(
                Frame_::default()
                    .borders(Borders::ALL)
                    .border_style(theme.chrome())
                    .title(format!(" @{} (Tab/Enter picks, Esc closes) ", c.query)),
            ),
            area,
        );
    }
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width.saturating_sub(2));
    let h = height.min(area.height.saturating_sub(2));
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn draw_modal(frame: &mut Frame<'_>, state: &State, area: Rect, theme: &Theme) {
    let Some(modal) = &state.modal else {
        return;
    };
    let (title, lines) = match modal {
        Modal::Approval => match state.approvals.front() {
            Some(a) => (
                " approval needed ".to_owned(),
                approval_lines(a, state.approvals.len(), theme),
            ),
            None => return,
        },
        Modal::Question => match state.questions.front() {
            Some(q) => (" the agent asks ".to_owned(), question_lines(q, theme)),
            None => return,
        },
        Modal::Picker(p) => (" sessions ".to_owned(), picker_lines(state, p, theme)),
        Modal::Help => (" keys ".to_owned(), help_lines(theme)),
    };
    let width = 76u16;
    let height = u16::try_from(lines.len() + 2).unwrap_or(20);
    let r = centered(area, width, height);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Frame_::default()
                .borders(Borders::ALL)
                .border_style(theme.warn())
                .title(title),
        ),
        r,
    );
}

fn approval_lines(a: &super::state::Approval, pending: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(vec![
        Span::styled(a.tool.clone(), theme.text().add_modifier(Modifier::BOLD)),
        Span::raw(if a.summary.is_empty() {
            String::new()
        } else {
            format!(": {}", a.summary)
        }),
    ])];
    if !a.risk.is_empty() {
        lines.push(Line::styled(format!("risk: {}", a.risk), theme.warn()));
    }
    if let Some(g) = &a.guard {
        lines.push(Line::styled(
            format!("asked whatever the mode ({g})"),
            theme.warn(),
        ));
    }
    if let Some(t) = a.timeout_sec.filter(|t| t.is_finite() && *t > 0.0) {
        lines.push(Line::styled(
            format!("denied automatically after {t:.0}s"),
            theme.dim(),
        ));
    }
    lines.push(Line::default());
    let mut spans = Vec::new();
    for (i, c) in a.choices.iter().enumerate() {
        let label = match *c {
            "once" => "[y] once",
            "session" => "[s] session",
            "project" => "[p] project",
            "always" => "[a] always",
            "site" => "[w] site",
            _ => "[n] deny",
        };
        let style = if i == a.cursor {
            theme.selected()
        } else {
            theme.text()
        };
        spans.push(Span::styled(format!(" {label} "), style));
        spans.push(Span::raw(" "));
    }
    lines.push(Line::from(spans));
    lines.push(Line::styled(
        "←/→ choose · Enter confirm · Esc deny",
        theme.dim(),
    ));
    if pending > 1 {
        lines.push(Line::styled(
            format!("{} more waiting", pending - 1),
            theme.dim(),
        ));
    }
    lines
}

fn question_lines(b: &super::state::QuestionBatch, theme: &Theme) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let Some(q) = b.questions.get(b.index) else {
        return lines;
    };
    let header = if q.header.is_empty() {
        String::new()
    } else {
        format!("{} — ", q.header)
    };
    lines.push(Line::styled(
        format!("{header}question {} of {}", b.index + 1, b.questions.len()),
        theme.dim(),
    ));
    lines.push(Line::styled(
        q.question.clone(),
        theme.text().add_modifier(Modifier::BOLD),
    ));
    lines.push(Line::default());
    for (i, (label, desc)) in q.options.iter().enumerate() {
        let mark = if q.multi {
            if b.selected.contains(&i) {
                "[x] "
            } else {
                "[ ] "
            }
        } else {
            "( ) "
        };
        let style = if i == b.cursor {
            theme.selected()
        } else {
            theme.text()
        };
        let mut spans = vec![Span::styled(format!("{mark}{label}"), style)];
        if !desc.is_empty() {
            spans.push(Span::styled(format!("  {desc}"), theme.dim()));
        }
        lines.push(Line::from(spans));
    }
    if q.allow_other {
        let shown = if q.secret {
            "•".repeat(b.text.chars().count())
        } else {
            b.text.clone()
        };
        let on = b.cursor == q.options.len();
        let label = if q.options.is_empty() {
            "answer"
        } else {
            "other"
        };
        let style = if on { theme.selected() } else { theme.text() };
        lines.push(Line::from(vec![
            Span::styled(format!("{label}: "), style),
            Span::styled(format!("{shown}{}", if on { "▏" } else { "" }), style),
        ]));
        if q.secret {
            lines.push(Line::styled(
                "(secret: what you type is not shown)",
                theme.dim(),
            ));
        }
    }
    lines.push(Line::default());
    let multi = if q.multi { "Space select · " } else { "" };
    lines.push(Line::styled(
        format!("↑/↓ move · {multi}Enter answer · Esc decline"),
        theme.dim(),
    ));
    lines
}

fn picker_lines(state: &State, p: &super::state::Picker, theme: &Theme) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    lines.push(Line::styled(
        format!("sessions in {}", state.workdir),
        theme.dim(),
    ));
    let style0 = if p.cursor == 0 {
        theme.selected()
    } else {
        theme.text()
    };
    lines.push(Line::styled("+ new session", style0));
    if p.loading {
        lines.push(Line::styled("loading…", theme.dim()));
    }
    let first = p.cursor.saturating_sub(12).max(1);
    for (i, r) in p.rows.iter().enumerate().skip(first - 1).take(12) {
        let ui = i + 1;
        let style = if ui == p.cursor {
            theme.selected()
        } else {
            theme.text()
        };
        let current = if state.session_id.as_deref() == Some(r.session_id.as_str()) {
            "● "
        } else {
            "  "
        };
        let label: String = r.label.chars().take(44).collect();
        let when: String = r
            .last_activity
            .chars()
            .take(16)
            .collect::<String>()
            .replace('T', " ");
        lines.push(Line::styled(
            format!("{current}{label:<44} {:<8} {when}", r.status),
            style,
        ));
    }
    if let Some(t) = &p.renaming {
        lines.push(Line::styled(
            format!("new title: {t}▏ (Enter saves, Esc cancels)"),
            theme.warn(),
        ));
    }
    lines.push(Line::default());
    lines.push(Line::styled(
        "↑/↓ move · Enter open · n new · r rename · d close · Esc back",
        theme.dim(),
    ));
    lines
}

/// The key bindings (docs/CHAT.md lists the same).
pub const KEYS: &[(&str, &str)] = &[
    ("Enter", "send the prompt (while a turn runs: queue it)"),
    ("Alt-Enter / Ctrl-J", "new line in the prompt"),
    ("Ctrl-S", "steer: fold the message into the running turn"),
    ("Esc", "interrupt the running turn / close a popup"),
    ("↑ / ↓", "prompt history (on the first / last line)"),
    ("PgUp / PgDn", "scroll the transcript"),
    ("Ctrl-L / Ctrl-End", "follow the stream again"),
    (
        "/",
        "command palette (Tab completes); /help lists the commands",
    ),
    ("@", "complete a path of the workdir"),
    ("Ctrl-O", "sessions: open, new, rename, close"),
    ("Ctrl-R", "show or fold reasoning"),
    ("F1", "this help"),
    ("Ctrl-C twice", "leave"),
];

fn help_lines(theme: &Theme) -> Vec<Line<'static>> {
    let mut lines: Vec<Line<'static>> = KEYS
        .iter()
        .map(|(k, d)| {
            Line::from(vec![
                Span::styled(
                    format!("{k:<22}"),
                    theme.text().add_modifier(Modifier::BOLD),
                ),
                Span::styled((*d).to_owned(), theme.text()),
            ])
        })
        .collect();
    lines.push(Line::default());
    lines.push(Line::styled(
        "Approvals: y once · s session · p project · a always · w site (when offered) · n deny",
        theme.dim(),
    ));
    lines.push(Line::styled("any key closes", theme.dim()));
    lines
}
