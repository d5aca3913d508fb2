//! Allowlist patterns (issue 17) and their matching.
//!
//! * `tool:<name>` — a call of another tool; `<name>` may be a glob (`tool:mcp__github__*`).
//!   `tool:shell` is refused: shell commands need a command pattern.
//! * anything else — a command prefix for `shell`: its words (each a glob: `*`, `?`,
//!   `[…]`) must match the first words of the command's argv (`cargo test` matches
//!   `cargo test --release`). The first word must be a command name, not a wildcard.
//!
//! A command is parsed as a shell program (`brush-parser`, the POSIX/bash grammar `sh -c`
//! follows) before anything is matched: every simple command in it — each part of a list
//! (`;`, `&&`, `||`, `&`, newlines), each stage of a pipe and each command substitution
//! (`$(…)`, backquotes) — needs its own matching pattern. Anything the matcher cannot prove
//! harmless is refused (the call is asked, never promoted): file redirections, here-docs,
//! process substitution, variable assignments, subshells, groups, loops, conditionals,
//! functions, a command name that is not a literal word, and parse errors.

use brush_parser::ast;
use brush_parser::word::WordPiece;
use globset::{GlobBuilder, GlobMatcher};

/// Most words of a command pattern.
pub const MAX_PATTERN_WORDS: usize = 64;
/// Longest pattern, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// Most simple commands one shell command may contain and still be promoted.
pub const MAX_COMMANDS: usize = 64;
/// Deepest nesting of command substitutions that is still matched.
pub const MAX_DEPTH: usize = 4;

/// A parsed pattern.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// `tool:<glob>`.
    Tool(GlobMatcher),
    /// A command prefix of `shell`: one glob per argv word.
    Command(Vec<GlobMatcher>),
}

fn glob(word: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(word)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("{word:?} is not a valid glob: {e}"))
}

fn is_wildcard_only(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| matches!(c, '*' | '?'))
}

impl Pattern {
    /// Parses a pattern; the error says what is wrong (for `invalid_params`).
    pub fn parse(pattern: &str) -> Result<Pattern, String> {
        let p = pattern.trim();
        if p.is_empty() {
            return Err("must not be empty".into());
        }
        if p.len() > MAX_PATTERN_BYTES {
            return Err(format!("is longer than {MAX_PATTERN_BYTES} bytes"));
        }
        if p.contains('\0') {
            return Err("must not contain NUL".into());
        }
        if let Some(name) = p.strip_prefix("tool:") {
            let name = name.trim();
            if name.is_empty() || is_wildcard_only(name) {
                return Err("`tool:` needs a tool name (a glob such as mcp__github__* is fine, a bare * is not)".into());
            }
            if name.chars().any(char::is_whitespace) {
                return Err("a tool name has no spaces".into());
            }
            if glob(name)?.is_match("shell") {
                return Err("shell commands are allowed by a command pattern such as `cargo test`, not by `tool:shell`".into());
            }
            return Ok(Pattern::Tool(glob(name)?));
        }
        let words = literal_words(p).ok_or_else(|| {
            "a command pattern is plain words (a command and its leading arguments); operators, redirections, substitutions and variables are not allowed".to_string()
        })?;
        if words.is_empty() {
            return Err("must not be empty".into());
        }
        if words.len() > MAX_PATTERN_WORDS {
            return Err(format!("has more than {MAX_PATTERN_WORDS} words"));
        }
        if is_wildcard_only(&words[0]) || words[0].starts_with(['*', '?', '[']) {
            return Err("must start with a command name, not a wildcard".into());
        }
        Ok(Pattern::Command(
            words.iter().map(|w| glob(w)).collect::<Result<_, _>>()?,
        ))
    }

    /// True when this is a `tool:` pattern matching `tool` (never `shell`).
    pub fn allows_tool(&self, tool: &str) -> bool {
        match self {
            Pattern::Tool(g) => tool != "shell" && g.is_match(tool),
            Pattern::Command(_) => false,
        }
    }
}

/// The words of a pattern: one simple command of plain words (quotes allowed), with glob
/// characters kept; `None` for anything else.
fn literal_words(p: &str) -> Option<Vec<String>> {
    let program = parse(p)?;
    let [list] = program.complete_commands.as_slice() else {
        return None;
    };
    let [ast::CompoundListItem(and_or, _)] = list.0.as_slice() else {
        return None;
    };
    if !and_or.additional.is_empty() {
        return None;
    }
    let [ast::Command::Simple(sc)] = and_or.first.seq.as_slice() else {
        return None;
    };
    if sc.prefix.is_some() || and_or.first.bang || and_or.first.timed.is_some() {
        return None;
    }
    let mut words = vec![sc.word_or_name.as_ref()?.value.clone()];
    for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(w) => words.push(w.value.clone()),
            _ => return None,
        }
    }
    // Quotes may group words; substitutions and expansions are refused.
    words
        .iter()
        .map(|w| {
            let pieces = brush_parser::word::parse(w, &options()).ok()?;
            let mut out = String::new();
            for piece in pieces {
                match piece.piece {
                    WordPiece::Text(t) => out.push_str(&t),
                    WordPiece::SingleQuotedText(t) => out.push_str(&globset_escape(&t)),
                    WordPiece::EscapeSequence(e) => out.push_str(&e),
                    _ => return None,
                }
            }
            Some(out)
        })
        .collect()
}

fn globset_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions {
        enable_extended_globbing: false,
        posix_mode: true,
        sh_mode: true,
        ..Default::default()
    }
}

fn parse(command: &str) -> Option<ast::Program> {
    let mut parser =
        brush_parser::Parser::new(std::io::Cursor::new(command.as_bytes()), &options());
    parser.parse_program().ok()
}

/// One simple command of a shell program: its argv, `None` for a word whose value is only
/// known when it runs (an expansion or a substitution).
type Argv = Vec<Option<String>>;

/// Collects the simple commands of `command` (substitutions included, depth-first), or
/// `None` when something in it cannot be matched safely (see the module doc).
pub fn simple_commands(command: &str) -> Option<Vec<Argv>> {
    let mut out = Vec::new();
    collect_program(command, 0, &mut out)?;
    if out.is_empty() || out.len() > MAX_COMMANDS {
        return None;
    }
    Some(out)
}

fn collect_program(command: &str, depth: usize, out: &mut Vec<Argv>) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    let program = parse(command)?;
    for list in &program.complete_commands {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            let pipelines =
                std::iter::once(&and_or.first).chain(and_or.additional.iter().map(|a| match a {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
                }));
            for pipeline in pipelines {
                if pipeline.timed.is_some() {
                    return None;
                }
                for cmd in &pipeline.seq {
                    let ast::Command::Simple(sc) = cmd else {
                        return None;
                    };
                    collect_simple(sc, depth, out)?;
                }
            }
        }
    }
    Some(())
}

fn collect_simple(sc: &ast::SimpleCommand, depth: usize, out: &mut Vec<Argv>) -> Option<()> {
    if sc.prefix.as_ref().is_some_and(|p| !p.0.is_empty()) {
        // Assignments (`PATH=… cmd`, `LD_PRELOAD=…`) and leading redirections.
        for item in &sc.prefix.as_ref()?.0 {
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) if harmless_redirect(r) => {}
                _ => return None,
            }
        }
    }
    // The command name itself must be a literal word.
    let name = sc.word_or_name.as_ref()?;
    let mut argv = vec![Some(word_value(&name.value, depth, out)??)];
    for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(w) => argv.push(word_value(&w.value, depth, out)?),
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) if harmless_redirect(r) => {}
            _ => return None,
        }
    }
    out.push(argv);
    Some(())
}

/// Only descriptor duplications (`2>&1`, `>&2`) are harmless: they open no file.
fn harmless_redirect(r: &ast::IoRedirect) -> bool {
    match r {
        ast::IoRedirect::File(_, kind, target) => {
            matches!(
                kind,
                ast::IoFileRedirectKind::DuplicateOutput | ast::IoFileRedirectKind::DuplicateInput
            ) && match target {
                ast::IoFileRedirectTarget::Fd(_) => true,
                ast::IoFileRedirectTarget::Duplicate(w) => {
                    !w.value.is_empty() && w.value.chars().all(|c| c.is_ascii_digit())
                }
                _ => false,
            }
        }
        _ => false,
    }
}

/// The value of one word: `Some(Some(text))` when literal, `Some(None)` when only known at
/// run time (its command substitutions are collected into `out` to be matched too), `None`
/// when it cannot be matched safely.
fn word_value(word: &str, depth: usize, out: &mut Vec<Argv>) -> Option<Option<String>> {
    let pieces = brush_parser::word::parse(word, &options()).ok()?;
    let mut text = String::new();
    let mut literal = true;
    pieces_value(&pieces, false, depth, out, &mut text, &mut literal)?;
    Some(literal.then_some(text))
}

fn pieces_value(
    pieces: &[brush_parser::word::WordPieceWithSource],
    quoted: bool,
    depth: usize,
    out: &mut Vec<Argv>,
    text: &mut String,
    literal: &mut bool,
) -> Option<()> {
    for piece in pieces {
        match &piece.piece {
            WordPiece::Text(t) => {
                // Unquoted glob or brace characters expand to file names at run time.
                if !quoted && t.contains(['*', '?', '[', '{']) {
                    *literal = false;
                }
                text.push_str(t);
            }
            WordPiece::SingleQuotedText(t) => text.push_str(t),
            WordPiece::EscapeSequence(e) => text.push_str(e.strip_prefix('\\').unwrap_or(e)),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                pieces_value(inner, true, depth, out, text, literal)?
            }
            WordPiece::CommandSubstitution(c) | WordPiece::BackquotedCommandSubstitution(c) => {
                collect_program(c, depth + 1, out)?;
                *literal = false;
            }
            WordPiece::TildeExpansion(_)
            | WordPiece::ParameterExpansion(_)
            | WordPiece::ArithmeticExpression(_)
            | WordPiece::AnsiCQuotedText(_) => *literal = false,
        }
    }
    Some(())
}

/// True when `patterns` allow the shell command `command`: it parses, and every simple
/// command in it has a literal name and is matched by one of the command patterns (a word
/// known only at run time never matches a pattern word, only the free tail after it).
pub fn command_allowed(patterns: &[&Pattern], command: &str) -> bool {
    let Some(commands) = simple_commands(command) else {
        return false;
    };
    commands.iter().all(|argv| {
        argv.first().is_some_and(Option::is_some)
            && patterns.iter().any(|p| match p {
                Pattern::Command(words) => {
                    words.len() <= argv.len()
                        && words
                            .iter()
                            .zip(argv)
                            .all(|(g, a)| a.as_deref().is_some_and(|a| g.is_match(a)))
                }
                Pattern::Tool(_) => false,
            })
    })
}

/// The pattern an "allow for this session / project / always" answer stores for a call:
/// `tool:<name>` for other tools; for `shell`, the command's whole argv as a prefix when it
/// is one simple command of literal words (quoted as needed), else `None` (the answer then
/// applies to this call only).
pub fn derive(tool: &str, command: Option<&str>) -> Option<String> {
    if tool != "shell" {
        return Some(format!("tool:{tool}"));
    }
    let commands = simple_commands(command?)?;
    let [argv] = commands.as_slice() else {
        return None;
    };
    let words: Vec<String> = argv
        .iter()
        .map(|w| w.as_deref().map(quote_word))
        .collect::<Option<_>>()?;
    let pattern = words.join(" ");
    Pattern::parse(&pattern).ok()?;
    Some(pattern)
}

/// `word` as a pattern word that matches exactly it.
fn quote_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | ',' | '+' | '@' | '%')
        });
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
#[path = "pattern_tests.rs"]
mod tests;
