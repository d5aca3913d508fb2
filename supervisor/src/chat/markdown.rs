//! Markdown → styled terminal lines (pulldown-cmark): headings, emphasis, lists, quotes,
//! links, tables, and fenced code blocks highlighted with syntect (pure-Rust regex engine).
//! Lines are logical (not wrapped); [`super::wrap`] fits them to the width.

use std::sync::OnceLock;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, ThemeSet};
use syntect::parsing::SyntaxSet;

use super::theme::Theme;

fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

fn themes() -> &'static ThemeSet {
    static SET: OnceLock<ThemeSet> = OnceLock::new();
    SET.get_or_init(ThemeSet::load_defaults)
}

/// Renders `text` as Markdown.
pub fn render(text: &str, theme: &Theme) -> Vec<Line<'static>> {
    let mut r = Renderer {
        theme,
        lines: Vec::new(),
        current: Vec::new(),
        styles: vec![Style::default()],
        lists: Vec::new(),
        quote: 0,
        code: None,
        link: None,
        pending_item: None,
    };
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(text, opts) {
        r.event(event);
    }
    r.flush();
    while r.lines.last().is_some_and(|l| l.spans.is_empty()) {
        r.lines.pop();
    }
    r.lines
}

/// The byte offset, at or after `from`, up to which `text` holds complete Markdown blocks: just
/// after the last blank line that is not inside a fenced code block (`from` itself when there
/// is none). `from` must be such a boundary (or 0). Rendering `text[..b]` and `text[b..]`
/// separately gives the same lines as rendering `text`, so a streaming answer renders each
/// finished paragraph once.
pub fn stable_boundary(text: &str, from: usize) -> usize {
    let mut boundary = from;
    let mut in_fence = false;
    let mut at = from;
    let rest = &text[from..];
    for line in rest.split_inclusive('\n') {
        at += line.len();
        if !line.ends_with('\n') {
            break;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        } else if !in_fence && trimmed.trim().is_empty() {
            boundary = at;
        }
    }
    boundary
}

struct Code {
    lang: String,
    text: String,
}

struct Renderer<'t> {
    theme: &'t Theme,
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Open lists: the next number (None for bullets).
    lists: Vec<Option<u64>>,
    quote: usize,
    code: Option<Code>,
    link: Option<String>,
    /// The marker of a list item that has no text yet.
    pending_item: Option<String>,
}

impl Renderer<'_> {
    fn style(&self) -> Style {
        *self.styles.last().unwrap_or(&Style::default())
    }

    fn push_style(&mut self, f: impl FnOnce(Style) -> Style) {
        let s = f(self.style());
        self.styles.push(s);
    }

    fn prefix(&mut self) -> Vec<Span<'static>> {
        let mut spans = Vec::new();
        if self.quote > 0 {
            spans.push(Span::styled("▎ ".repeat(self.quote), self.theme.dim()));
        }
        let depth = self.lists.len();
        match self.pending_item.take() {
            Some(marker) => {
                spans.push(Span::raw("  ".repeat(depth.saturating_sub(1))));
                spans.push(Span::styled(marker, self.theme.dim()));
            }
            None if depth > 0 => spans.push(Span::raw("  ".repeat(depth))),
            None => {}
        }
        spans
    }

    fn text(&mut self, s: &str) {
        let style = self.style();
        for (i, part) in s.split('\n').enumerate() {
            if i > 0 {
                self.flush();
            }
            if part.is_empty() {
                continue;
            }
            if self.current.is_empty() {
                self.current = self.prefix();
            }
            self.current.push(Span::styled(part.to_owned(), style));
        }
    }

    fn flush(&mut self) {
        if self.current.is_empty() && self.pending_item.is_some() {
            return;
        }
        let spans = std::mem::take(&mut self.current);
        self.lines.push(Line::from(spans));
    }

    fn end_line(&mut self) {
        if !self.current.is_empty() {
            self.flush();
        }
    }

    fn blank(&mut self) {
        self.end_line();
        if self.lines.last().is_some_and(|l| !l.spans.is_empty()) && self.lists.is_empty() {
            self.lines.push(Line::default());
        }
    }

    fn event(&mut self, event: Event<'_>) {
        if let Some(code) = &mut self.code {
            match event {
                Event::Text(t) => code.text.push_str(&t),
                Event::End(TagEnd::CodeBlock) => {
                    let code = self.code.take().expect("in a code block");
                    self.code_block(&code);
                    self.blank();
                }
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(t) => {
                if self.current.is_empty() {
                    self.current = self.prefix();
                }
                self.current
                    .push(Span::styled(t.into_string(), self.theme.code()));
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.end_line();
                self.lines
                    .push(Line::styled("─".repeat(40), self.theme.dim()));
                self.blank();
            }
            Event::TaskListMarker(done) => self.text(if done { "☑ " } else { "☐ " }),
            Event::Html(t) | Event::InlineHtml(t) => self.text(&t),
            Event::FootnoteReference(t) => self.text(&format!("[{t}]")),
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.end_line(),
            Tag::Heading { level, .. } => {
                self.blank();
                let hashes = match level {
                    HeadingLevel::H1 => "# ",
                    HeadingLevel::H2 => "## ",
                    HeadingLevel::H3 => "### ",
                    _ => "#### ",
                };
                let style = self.theme.heading();
                self.styles.push(style);
                self.text(hashes);
            }
            Tag::BlockQuote(_) => {
                self.end_line();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.end_line();
                let lang = match kind {
                    CodeBlockKind::Fenced(l) => {
                        l.split(',').next().unwrap_or_default().trim().to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some(Code {
                    lang,
                    text: String::new(),
                });
            }
            Tag::List(start) => {
                self.end_line();
                self.lists.push(start);
            }
            Tag::Item => {
                self.end_line();
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "• ".to_owned(),
                };
                self.pending_item = Some(marker);
            }
            Tag::Emphasis => self.push_style(|s| s.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|s| s.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|s| s.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                self.link = Some(dest_url.into_string());
                let link = self.theme.link();
                self.push_style(|s| s.patch(link));
            }
            Tag::Table(_) => self.end_line(),
            Tag::TableHead | Tag::TableRow => self.end_line(),
            Tag::TableCell if !self.current.is_empty() => {
                self.current.push(Span::styled(" │ ", self.theme.dim()));
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.blank(),
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.blank();
            }
            TagEnd::BlockQuote(_) => {
                self.end_line();
                self.quote = self.quote.saturating_sub(1);
                self.blank();
            }
            TagEnd::List(_) => {
                self.end_line();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Item => {
                if self.pending_item.is_some() {
                    // An empty item still shows its marker.
                    self.current = self.prefix();
                }
                self.end_line();
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                if let Some(url) = self.link.take() {
                    let shown: String = self
                        .current
                        .iter()
                        .rev()
                        .take(1)
                        .map(|s| s.content.to_string())
                        .collect();
                    if shown != url && !url.is_empty() {
                        self.current
                            .push(Span::styled(format!(" ({url})"), self.theme.dim()));
                    }
                }
            }
            TagEnd::TableHead => {
                self.end_line();
                self.lines
                    .push(Line::styled("─".repeat(40), self.theme.dim()));
            }
            TagEnd::TableRow => self.end_line(),
            TagEnd::Table => self.blank(),
            _ => {}
        }
    }

    fn code_block(&mut self, code: &Code) {
        let bar = Span::styled("│ ", self.theme.dim());
        let label = if code.lang.is_empty() {
            "code"
        } else {
            code.lang.as_str()
        };
        self.lines
            .push(Line::styled(format!("╭─ {label}"), self.theme.dim()));
        for line in highlight(&code.text, &code.lang, self.theme) {
            let mut spans = vec![bar.clone()];
            spans.extend(line.spans);
            self.lines.push(Line::from(spans));
        }
        self.lines.push(Line::styled("╰─", self.theme.dim()));
    }
}

/// Highlights `code` as `lang` (by token or extension); plain when unknown or without colours.
pub fn highlight(code: &str, lang: &str, theme: &Theme) -> Vec<Line<'static>> {
    let code = code.strip_suffix('\n').unwrap_or(code);
    let plain = || code.split('\n').map(|l| Line::raw(l.to_owned())).collect();
    let Some(theme_name) = theme.syntect_theme() else {
        return plain();
    };
    if lang.is_empty() {
        return plain();
    }
    let set = syntaxes();
    let Some(syntax) = set
        .find_syntax_by_token(lang)
        .or_else(|| set.find_syntax_by_extension(lang))
    else {
        return plain();
    };
    let Some(st) = themes().themes.get(theme_name) else {
        return plain();
    };
    let mut h = HighlightLines::new(syntax, st);
    let mut out = Vec::new();
    for line in code.split('\n') {
        let with_nl = format!("{line}\n");
        match h.highlight_line(&with_nl, set) {
            Ok(ranges) => out.push(Line::from(
                ranges
                    .into_iter()
                    .map(|(style, text)| {
                        let mut s = Style::default().fg(Color::Rgb(
                            style.foreground.r,
                            style.foreground.g,
                            style.foreground.b,
                        ));
                        if style.font_style.contains(FontStyle::BOLD) {
                            s = s.add_modifier(Modifier::BOLD);
                        }
                        if style.font_style.contains(FontStyle::ITALIC) {
                            s = s.add_modifier(Modifier::ITALIC);
                        }
                        Span::styled(text.trim_end_matches('\n').to_owned(), s)
                    })
                    .filter(|s| !s.content.is_empty())
                    .collect::<Vec<_>>(),
            )),
            Err(_) => out.push(Line::raw(line.to_owned())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::state::ThemeKind;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn headings_lists_and_code_blocks_render() {
        let theme = Theme::new(ThemeKind::Dark, false);
        let md = "# Title\n\nSome **bold** and `code`.\n\n- one\n- two\n\n1. first\n2. second\n\n```rust\nfn main() {}\n```\n";
        let lines = render(md, &theme);
        let text = plain(&lines);
        assert_eq!(text[0], "# Title");
        assert!(text.contains(&"Some bold and code.".to_owned()), "{text:?}");
        assert!(text.contains(&"• one".to_owned()), "{text:?}");
        assert!(text.contains(&"2. second".to_owned()), "{text:?}");
        assert!(text.contains(&"╭─ rust".to_owned()), "{text:?}");
        assert!(text.contains(&"│ fn main() {}".to_owned()), "{text:?}");
        // The code line is highlighted: more than the bar and one plain span.
        let code = lines
            .iter()
            .find(|l| plain(std::slice::from_ref(l))[0] == "│ fn main() {}")
            .unwrap();
        assert!(code.spans.len() > 2, "{code:?}");
        assert!(lines[0].spans[0]
            .style
            .add_modifier
            .contains(Modifier::BOLD));
    }

    #[test]
    fn rendering_in_stable_pieces_matches_rendering_the_whole() {
        let theme = Theme::new(ThemeKind::Dark, false);
        let text =
            "# T\n\npara one\nstill one\n\n```py\na = 1\n\nb = 2\n```\n\n- x\n- y\n\nlast line";
        let b = stable_boundary(text, 0);
        assert_eq!(&text[b..], "last line");
        // The blank line inside the code block is no boundary.
        let inside = text.find("a = 1").unwrap();
        assert!(stable_boundary(&text[..inside + 8], 0) < inside);
        let whole = plain(&render(text, &theme));
        let mut pieces = Vec::new();
        let mut from = 0;
        for cut in [10, 25, 48, text.len()] {
            let to = stable_boundary(&text[..cut], from);
            if to > from {
                pieces.extend(plain(&render(&text[from..to], &theme)));
                pieces.push(String::new());
                from = to;
            }
        }
        pieces.extend(plain(&render(&text[from..], &theme)));
        assert_eq!(pieces, whole);
    }

    #[test]
    fn no_color_has_no_colours() {
        let theme = Theme::new(ThemeKind::Dark, true);
        let lines = render("# T\n\n```rust\nlet x = 1;\n```\n[a](http://x)", &theme);
        for span in lines.iter().flat_map(|l| l.spans.iter()) {
            assert_eq!(span.style.fg, None, "{span:?}");
        }
    }

    #[test]
    fn an_unclosed_code_block_while_streaming_still_renders() {
        let theme = Theme::new(ThemeKind::Light, false);
        let text = plain(&render("text\n```py\nprint(1)\n", &theme));
        assert!(text.contains(&"│ print(1)".to_owned()), "{text:?}");
    }
}
