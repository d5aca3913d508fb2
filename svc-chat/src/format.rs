//! Outbound text: the model's Markdown converted to what each platform renders, split to the
//! platform's message limit.
//!
//! * Telegram: HTML `parse_mode` (`<b>`, `<i>`, `<s>`, `<code>`, `<pre>`, `<a href>`; every other
//!   character escaped), at most [`TELEGRAM_LIMIT`] characters per message.
//! * Discord: Discord renders Markdown itself; headings become bold lines, tables stay as text.
//!   At most [`DISCORD_LIMIT`] characters.
//! * Slack: `mrkdwn` (`*bold*`, `_italic_`, `~strike~`, `<url|text>`, `&`, `<`, `>` escaped).
//!   At most [`SLACK_LIMIT`] characters.
//!
//! The Markdown is split first (at paragraph, then line, then word boundaries), then each part
//! is converted, so a tag never spans two messages; a part that grows past the limit when
//! converted is sent as plain text split hard.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::binding::Platform;

/// Telegram's message limit in characters.
pub const TELEGRAM_LIMIT: usize = 4096;
/// Discord's message limit in characters.
pub const DISCORD_LIMIT: usize = 2000;
/// Slack's `chat.postMessage` text we send per message, in characters (the API's hard limit
/// is 40,000; a section block takes 3,000, and long messages are hard to read).
pub const SLACK_LIMIT: usize = 3000;

/// The limit of `platform`.
pub fn limit(platform: Platform) -> usize {
    match platform {
        Platform::Telegram => TELEGRAM_LIMIT,
        Platform::Discord => DISCORD_LIMIT,
        Platform::Slack => SLACK_LIMIT,
    }
}

/// One message to send: its text and whether it is in the platform's rich format (Telegram
/// HTML) or plain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The text.
    pub text: String,
    /// True when `text` is Telegram HTML (sent with `parse_mode: HTML`).
    pub html: bool,
}

/// Converts `markdown` for `platform` and splits it into messages within the limit.
pub fn render(platform: Platform, markdown: &str) -> Vec<Part> {
    let limit = limit(platform);
    // Leave room for the markup a conversion adds.
    let budget = limit * 3 / 4;
    let mut out = Vec::new();
    for chunk in split(markdown, budget) {
        let converted = match platform {
            Platform::Telegram => to_telegram_html(&chunk),
            Platform::Discord => to_discord(&chunk),
            Platform::Slack => to_slack(&chunk),
        };
        let html = platform == Platform::Telegram;
        if converted.chars().count() <= limit && !converted.trim().is_empty() {
            out.push(Part {
                text: converted,
                html,
            });
        } else if !chunk.trim().is_empty() {
            for piece in split(&chunk, limit) {
                out.push(Part {
                    text: piece,
                    html: false,
                });
            }
        }
    }
    out
}

/// Splits `text` into pieces of at most `limit` characters, preferring paragraph breaks, then
/// line breaks, then spaces; a piece without any is cut at the limit. Nothing is dropped
/// except the whitespace a split happens at.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let mut out = Vec::new();
    let mut rest = text.trim_end();
    while rest.chars().count() > limit {
        // Byte index of the character after the first `limit` characters.
        let hard = rest
            .char_indices()
            .nth(limit)
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let window = &rest[..hard];
        let cut = window
            .rfind("\n\n")
            .filter(|&i| i > 0)
            .or_else(|| window.rfind('\n').filter(|&i| i > 0))
            .or_else(|| window.rfind(' ').filter(|&i| i > 0));
        let (head, tail) = match cut {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (window, &rest[hard..]),
        };
        if !head.trim().is_empty() {
            out.push(head.trim_end().to_owned());
        }
        rest = tail.trim_start_matches(['\n', ' ']);
    }
    if !rest.trim().is_empty() {
        out.push(rest.to_owned());
    }
    out
}

fn parser(md: &str) -> Parser<'_> {
    Parser::new_ext(md, Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES)
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Markdown → Telegram HTML.
pub fn to_telegram_html(md: &str) -> String {
    let mut out = String::new();
    let mut list_depth: Vec<Option<u64>> = Vec::new();
    for event in parser(md) {
        match event {
            Event::Start(Tag::Strong) => out.push_str("<b>"),
            Event::End(TagEnd::Strong) => out.push_str("</b>"),
            Event::Start(Tag::Emphasis) => out.push_str("<i>"),
            Event::End(TagEnd::Emphasis) => out.push_str("</i>"),
            Event::Start(Tag::Strikethrough) => out.push_str("<s>"),
            Event::End(TagEnd::Strikethrough) => out.push_str("</s>"),
            Event::Start(Tag::Heading { .. }) => out.push_str("<b>"),
            Event::End(TagEnd::Heading(_)) => out.push_str("</b>\n\n"),
            Event::Start(Tag::CodeBlock(kind)) => match kind {
                CodeBlockKind::Fenced(lang) if !lang.is_empty() => out.push_str(&format!(
                    "<pre><code class=\"language-{}\">",
                    escape_html(&lang).replace('"', "")
                )),
                _ => out.push_str("<pre><code>"),
            },
            Event::End(TagEnd::CodeBlock) => {
                if out.ends_with('\n') {
                    out.pop();
                }
                out.push_str("</code></pre>\n\n");
            }
            Event::Start(Tag::Link { dest_url, .. }) => {
                out.push_str(&format!(
                    "<a href=\"{}\">",
                    escape_html(&dest_url).replace('"', "&quot;")
                ));
            }
            Event::End(TagEnd::Link) => out.push_str("</a>"),
            Event::Start(Tag::List(start)) => list_depth.push(start),
            Event::End(TagEnd::List(_)) => {
                list_depth.pop();
                if list_depth.is_empty() {
                    out.push('\n');
                }
            }
            Event::Start(Tag::Item) => {
                let indent = "  ".repeat(list_depth.len().saturating_sub(1));
                match list_depth.last_mut() {
                    Some(Some(n)) => {
                        out.push_str(&format!("{indent}{n}. "));
                        *n += 1;
                    }
                    _ => out.push_str(&format!("{indent}• ")),
                }
            }
            Event::End(TagEnd::Item) if !out.ends_with('\n') => out.push('\n'),
            Event::End(TagEnd::Paragraph) => {
                out.push_str(if list_depth.is_empty() { "\n\n" } else { "\n" })
            }
            Event::Start(Tag::BlockQuote(_)) => out.push_str("<blockquote>"),
            Event::End(TagEnd::BlockQuote(_)) => {
                let trimmed = out.trim_end().len();
                out.truncate(trimmed);
                out.push_str("</blockquote>\n\n");
            }
            Event::End(TagEnd::TableCell) => out.push_str(" | "),
            Event::End(TagEnd::TableRow) | Event::End(TagEnd::TableHead) => out.push('\n'),
            Event::Text(t) => out.push_str(&escape_html(&t)),
            Event::Code(t) => {
                out.push_str("<code>");
                out.push_str(&escape_html(&t));
                out.push_str("</code>");
            }
            Event::Html(t) | Event::InlineHtml(t) => out.push_str(&escape_html(&t)),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("──────\n\n"),
            _ => {}
        }
    }
    out.trim_end().to_owned()
}

/// Markdown → Discord (Discord renders Markdown; headings are bold lines).
pub fn to_discord(md: &str) -> String {
    let mut out = String::new();
    for line in md.lines() {
        let trimmed = line.trim_start();
        let level = trimmed.chars().take_while(|&c| c == '#').count();
        // Discord renders #, ##, ### itself; deeper headings become bold.
        if level > 3 && trimmed[level..].starts_with(' ') {
            out.push_str(&format!("**{}**", trimmed[level..].trim()));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out.trim_end().to_owned()
}

fn escape_slack(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Markdown → Slack mrkdwn.
pub fn to_slack(md: &str) -> String {
    let mut out = String::new();
    let mut link: Option<String> = None;
    let mut link_text = String::new();
    let mut list_depth: Vec<Option<u64>> = Vec::new();
    for event in parser(md) {
        let sink = |out: &mut String, link_text: &mut String, link: &Option<String>, s: &str| {
            if link.is_some() {
                link_text.push_str(s);
            } else {
                out.push_str(s);
            }
        };
        match event {
            Event::Start(Tag::Strong) | Event::End(TagEnd::Strong) => {
                sink(&mut out, &mut link_text, &link, "*")
            }
            Event::Start(Tag::Emphasis) | Event::End(TagEnd::Emphasis) => {
                sink(&mut out, &mut link_text, &link, "_")
            }
            Event::Start(Tag::Strikethrough) | Event::End(TagEnd::Strikethrough) => {
                sink(&mut out, &mut link_text, &link, "~")
            }
            Event::Start(Tag::Heading { level, .. }) => {
                let _ = level == HeadingLevel::H1;
                out.push('*');
            }
            Event::End(TagEnd::Heading(_)) => out.push_str("*\n\n"),
            Event::Start(Tag::CodeBlock(_)) => out.push_str("```\n"),
            Event::End(TagEnd::CodeBlock) => {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str("```\n\n");
            }
            Event::Start(Tag::Link { dest_url, .. }) => {
                link = Some(dest_url.to_string());
                link_text.clear();
            }
            Event::End(TagEnd::Link) => {
                if let Some(url) = link.take() {
                    out.push_str(&format!(
                        "<{}|{}>",
                        escape_slack(&url).replace('|', "%7C"),
                        link_text.replace('|', "¦")
                    ));
                }
            }
            Event::Start(Tag::List(start)) => list_depth.push(start),
            Event::End(TagEnd::List(_)) => {
                list_depth.pop();
                if list_depth.is_empty() {
                    out.push('\n');
                }
            }
            Event::Start(Tag::Item) => {
                let indent = "  ".repeat(list_depth.len().saturating_sub(1));
                match list_depth.last_mut() {
                    Some(Some(n)) => {
                        out.push_str(&format!("{indent}{n}. "));
                        *n += 1;
                    }
                    _ => out.push_str(&format!("{indent}• ")),
                }
            }
            Event::End(TagEnd::Item) if !out.ends_with('\n') => out.push('\n'),
            Event::End(TagEnd::Paragraph) => {
                out.push_str(if list_depth.is_empty() { "\n\n" } else { "\n" })
            }
            Event::Start(Tag::BlockQuote(_)) => out.push_str("> "),
            Event::End(TagEnd::BlockQuote(_)) => out.push('\n'),
            Event::End(TagEnd::TableCell) => out.push_str(" | "),
            Event::End(TagEnd::TableRow) | Event::End(TagEnd::TableHead) => out.push('\n'),
            Event::Text(t) => {
                let t = escape_slack(&t);
                sink(&mut out, &mut link_text, &link, &t)
            }
            Event::Code(t) => {
                let t = format!("`{}`", escape_slack(&t));
                sink(&mut out, &mut link_text, &link, &t)
            }
            Event::Html(t) | Event::InlineHtml(t) => out.push_str(&escape_slack(&t)),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("──────\n\n"),
            _ => {}
        }
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
