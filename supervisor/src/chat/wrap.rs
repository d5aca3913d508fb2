//! Word wrapping of styled lines to a width in terminal cells (wide characters count two).

use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Splits `line` into lines at most `width` cells wide, breaking after spaces where it can
/// and inside a word only when the word alone is wider than `width`. Styles are kept.
pub fn wrap(line: &Line<'static>, width: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    if line.width() <= width {
        return vec![line.clone()];
    }
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut row: Vec<Span<'static>> = Vec::new();
    let mut used = 0usize;
    for span in &line.spans {
        for word in words(&span.content) {
            let w = word.width();
            if used + w.saturating_sub(trailing_spaces(word)) <= width {
                push(&mut row, word, span.style);
                used += w;
                continue;
            }
            if used > 0 {
                out.push(Line::from(std::mem::take(&mut row)));
                used = 0;
            }
            let word = word.trim_start_matches(' ');
            if word.width() <= width {
                push(&mut row, word, span.style);
                used = word.width();
                continue;
            }
            // A word wider than the line: hard breaks.
            let mut piece = String::new();
            for c in word.chars() {
                let cw = c.width().unwrap_or(0);
                if used + cw > width {
                    push(&mut row, &piece, span.style);
                    out.push(Line::from(std::mem::take(&mut row)));
                    piece.clear();
                    used = 0;
                }
                piece.push(c);
                used += cw;
            }
            push(&mut row, &piece, span.style);
        }
    }
    if !row.is_empty() || out.is_empty() {
        out.push(Line::from(row));
    }
    out
}

fn trailing_spaces(word: &str) -> usize {
    word.len() - word.trim_end_matches(' ').len()
}

fn push(row: &mut Vec<Span<'static>>, text: &str, style: ratatui::style::Style) {
    if text.is_empty() {
        return;
    }
    match row.last_mut() {
        Some(last) if last.style == style => last.content.to_mut().push_str(text),
        _ => row.push(Span::styled(text.to_owned(), style)),
    }
}

/// Words with their trailing spaces ("a b" → ["a ", "b"]).
fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        if c == ' ' {
            in_space = true;
        } else if in_space {
            out.push(&text[start..i]);
            start = i;
            in_space = false;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn wraps_at_spaces_and_breaks_long_words() {
        let l = Line::from("the quick brown fox jumps");
        assert_eq!(text(&wrap(&l, 10)), ["the quick ", "brown fox ", "jumps"]);
        let l = Line::from("abcdefghijkl mn");
        assert_eq!(text(&wrap(&l, 5)), ["abcde", "fghij", "kl mn"]);
        let l = Line::from("短い日本語の文です");
        for row in wrap(&l, 6) {
            assert!(row.width() <= 6, "{row:?}");
        }
        assert_eq!(text(&wrap(&Line::from(""), 5)), [""]);
    }
}
