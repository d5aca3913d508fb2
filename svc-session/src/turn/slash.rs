//! Slash commands in prompt text (spec `session.prompt{text}`: "a leading '/' is parsed as
//! a slash command"): the one grammar [`crate::commands::parse_slash`] and the `@`-reference
//! resolver share; a parsed command runs as a command turn ([`super::Turns::run_turn`]).

/// A parsed `/name args…` prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlashCommand {
    /// The command name without the slash, e.g. `compact`.
    pub name: String,
    /// Everything after the name, trimmed (may be empty).
    pub args: String,
}

/// Parses `text` as a slash command: a `/` first (after leading whitespace), then a name of
/// ASCII letters, digits, `_`, `-`, `:` or `.` starting with a letter, then whitespace or
/// the end. Anything else — a path such as `/usr/bin/env …`, `//`, `/ ` — is plain text.
pub fn parse(text: &str) -> Option<SlashCommand> {
    let rest = text.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..end];
    let mut chars = name.chars();
    if !chars.next()?.is_ascii_alphabetic() {
        return None;
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.')) {
        return None;
    }
    Some(SlashCommand {
        name: name.to_owned(),
        args: rest[end..].trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_parsed_and_paths_are_text() {
        assert_eq!(
            parse("  /compact keep the API  "),
            Some(SlashCommand {
                name: "compact".into(),
                args: "keep the API".into()
            })
        );
        assert_eq!(parse("/init").unwrap().args, "");
        assert_eq!(parse("/skill:review now").unwrap().name, "skill:review");
        for text in [
            "/usr/bin/env is odd",
            "//",
            "/ x",
            "/1abc",
            "hello /x",
            "",
            "/",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }
}
