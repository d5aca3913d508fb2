//! The prompt editor (a `tui-textarea`: multi-line editing, undo, paste) and `@` path
//! completion over `file.complete`.

use ratatui::style::{Modifier, Style};
use serde_json::Value;
use tui_textarea::{CursorMove, TextArea};

use super::state::CallError;

/// An empty editor with the chat's settings.
pub fn new_editor() -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_cursor_line_style(Style::default());
    t.set_placeholder_text(
        "Ask snowpea…  (Enter send · Alt-Enter newline · / commands · @ paths · F1 help)",
    );
    t.set_placeholder_style(Style::default().add_modifier(Modifier::DIM));
    t
}

/// The `@word` the cursor is at the end of (without the `@`), when there is one.
pub fn at_word(t: &TextArea<'_>) -> Option<String> {
    let (row, col) = t.cursor();
    let line = t.lines().get(row)?;
    let before: String = line.chars().take(col).collect();
    let word = before.rsplit(char::is_whitespace).next()?;
    word.strip_prefix('@').map(str::to_owned)
}

/// Replaces the word before the cursor with `replacement` (and a trailing space).
pub fn replace_at_word(t: &mut TextArea<'_>, replacement: &str) {
    let (row, col) = t.cursor();
    let Some(line) = t.lines().get(row) else {
        return;
    };
    let before: String = line.chars().take(col).collect();
    let word_chars = before
        .rsplit(char::is_whitespace)
        .next()
        .map_or(0, |w| w.chars().count());
    for _ in 0..word_chars {
        t.delete_char();
    }
    t.insert_str(format!("{replacement} "));
    t.move_cursor(CursorMove::Jump(
        u16::try_from(row).unwrap_or(u16::MAX),
        u16::try_from(col - word_chars + replacement.chars().count() + 1).unwrap_or(u16::MAX),
    ));
}

/// One `file.complete` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct PathEntry {
    /// Path relative to the workdir.
    pub path: String,
    /// A directory.
    pub dir: bool,
}

/// An `@` completion: the query and what `file.complete` answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Text after `@`.
    pub query: String,
    /// `None` while the call runs; the entries, or why there are none.
    pub result: Option<Result<Vec<PathEntry>, CallError>>,
    /// Highlighted entry.
    pub cursor: usize,
}

impl Completion {
    /// A completion waiting for its answer.
    pub fn new(query: &str) -> Completion {
        Completion {
            query: query.to_owned(),
            result: None,
            cursor: 0,
        }
    }

    /// Stores the `file.complete` answer.
    pub fn set_result(&mut self, result: Result<Value, CallError>) {
        self.cursor = 0;
        self.result = Some(result.map(|v| {
            v["entries"]
                .as_array()
                .map(|es| {
                    es.iter()
                        .filter_map(|e| {
                            Some(PathEntry {
                                path: e.get("path")?.as_str()?.to_owned(),
                                dir: e.get("kind").and_then(Value::as_str) == Some("dir"),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default()
        }));
    }

    /// True when there are entries to pick from.
    pub fn has_entries(&self) -> bool {
        matches!(&self.result, Some(Ok(e)) if !e.is_empty())
    }

    /// Moves the highlight.
    pub fn step(&mut self, down: bool) {
        if let Some(Ok(entries)) = &self.result {
            let n = entries.len().max(1);
            self.cursor = if down {
                (self.cursor + 1) % n
            } else {
                (self.cursor + n - 1) % n
            };
        }
    }

    /// The highlighted path (directories end with `/`).
    pub fn selected_path(&self) -> Option<String> {
        match &self.result {
            Some(Ok(entries)) => entries.get(self.cursor).map(|e| {
                if e.dir && !e.path.ends_with('/') {
                    format!("{}/", e.path)
                } else {
                    e.path.clone()
                }
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_at_word_is_found_and_replaced() {
        let mut t = new_editor();
        t.insert_str("look at @src/ma");
        assert_eq!(at_word(&t).as_deref(), Some("src/ma"));
        replace_at_word(&mut t, "@src/main.rs");
        assert_eq!(t.lines()[0], "look at @src/main.rs ");
        assert_eq!(at_word(&t), None);
        let mut t = new_editor();
        t.insert_str("email me@x");
        assert_eq!(at_word(&t), None);
    }
}
