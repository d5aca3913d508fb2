//! The raw argument string of a slash command, split shell-style (`shlex`): positional
//! words, `--key=value` / `--flag` options, and the confirmation flags `--yes` /
//! `--confirm` (`confirm: true` in a command's `argsSchema`).

use std::collections::BTreeMap;

/// Parsed arguments of one call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args {
    /// The raw string, as typed after the name (confirmation flags included).
    pub raw: String,
    /// Positional words, in order (the first is the subcommand, if the command has any).
    pub words: Vec<String>,
    /// `--key=value` options (`--flag` alone is `"true"`).
    pub options: BTreeMap<String, String>,
    /// `--yes` or `--confirm` was given.
    pub confirmed: bool,
}

impl Args {
    /// Splits `raw`; an unbalanced quote is an error. A `--` ends the options.
    pub fn parse(raw: &str) -> Result<Args, String> {
        let parts =
            shlex::split(raw).ok_or_else(|| "unbalanced quotes in the arguments".to_string())?;
        let mut a = Args {
            raw: raw.to_owned(),
            ..Default::default()
        };
        let mut only_words = false;
        for p in parts {
            if only_words {
                a.words.push(p);
                continue;
            }
            if p == "--" {
                only_words = true;
            } else if p == "--yes" || p == "--confirm" || p == "-y" {
                a.confirmed = true;
            } else if let Some(opt) = p.strip_prefix("--").filter(|o| !o.is_empty()) {
                let (k, v) = opt.split_once('=').unwrap_or((opt, "true"));
                match a.options.get(k) {
                    Some(first) if first != v => {
                        return Err(format!(
                            "--{} given twice with different values ({:?} and {:?})",
                            clip(k),
                            clip(first),
                            clip(v)
                        ))
                    }
                    _ => {
                        a.options.insert(k.to_owned(), v.to_owned());
                    }
                }
            } else {
                a.words.push(p);
            }
        }
        Ok(a)
    }

    /// The subcommand (first word), if any.
    pub fn sub(&self) -> Option<&str> {
        self.words.first().map(String::as_str)
    }

    /// Spells the subcommand as `known` declares it when the first word matches one of them
    /// case-insensitively (`/team ON` is `/team on`), so a command's `match` on its
    /// subcommands sees one spelling and a shouted subcommand is never taken for free text.
    pub fn normalize_sub(&mut self, known: &[&str]) {
        if let Some(first) = self.words.first_mut() {
            if let Some(k) = known.iter().find(|k| k.eq_ignore_ascii_case(first)) {
                *first = (*k).to_owned();
            }
        }
    }

    /// The words after the subcommand, joined by spaces.
    pub fn rest(&self) -> String {
        self.words
            .iter()
            .skip(1)
            .cloned()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The raw string without the confirmation flags (what `$ARGUMENTS` becomes).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for w in self.raw.split_whitespace() {
            if w == "--yes" || w == "--confirm" {
                continue;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(w);
        }
        out
    }

    /// Fails on any option not in `known` (so a typo never passes silently).
    pub fn only_options(&self, known: &[&str]) -> Result<(), String> {
        for k in self.options.keys() {
            if !known.contains(&k.as_str()) {
                return Err(format!("unknown option --{}", clip(k)));
            }
        }
        Ok(())
    }
}

/// Longest part of a caller's argument an error message echoes, in characters.
pub const ECHO_CHARS: usize = 64;

/// `s` as an error message may echo it: at most [`ECHO_CHARS`] characters, with `…` when
/// cut (a huge argument is never sent back whole).
pub fn clip(s: &str) -> String {
    if s.chars().count() <= ECHO_CHARS {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(ECHO_CHARS).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subcommand_is_matched_whatever_its_case() {
        let mut a = Args::parse("ON").unwrap();
        a.normalize_sub(&["status", "on", "off"]);
        assert_eq!(a.sub(), Some("on"));
        let mut a = Args::parse("Onboard the new hire").unwrap();
        a.normalize_sub(&["status", "on", "off"]);
        assert_eq!(a.sub(), Some("Onboard"), "only whole subcommand words");
    }

    #[test]
    fn splits_words_options_and_confirm() {
        let a = Args::parse("add 'every day' \"say hi\" --mode=plan --yes").unwrap();
        assert_eq!(a.words, vec!["add", "every day", "say hi"]);
        assert_eq!(a.options.get("mode").map(String::as_str), Some("plan"));
        assert!(a.confirmed);
        assert_eq!(a.sub(), Some("add"));
        assert!(Args::parse("'open").is_err());
        assert_eq!(Args::parse("x -- --yes").unwrap().words, vec!["x", "--yes"]);
        assert!(a.only_options(&["other"]).is_err());
        assert_eq!(Args::parse("a  b --yes").unwrap().text(), "a b");
    }

    #[test]
    fn an_option_given_twice_must_agree_and_errors_clip_what_they_echo() {
        let a = Args::parse("save --scope=project --scope=project").unwrap();
        assert_eq!(a.options.get("scope").map(String::as_str), Some("project"));
        let e = Args::parse("save --scope=global --scope=project").unwrap_err();
        assert!(e.contains("--scope given twice"), "{e}");
        assert!(e.contains("\"global\"") && e.contains("\"project\""), "{e}");
        let huge = "x".repeat(10_000);
        let e = Args::parse(&format!("save --scope=global --scope={huge}")).unwrap_err();
        assert!(e.len() < 200 && e.contains('…'), "{e}");
        let e = Args::parse(&format!("--{huge}"))
            .unwrap()
            .only_options(&[])
            .unwrap_err();
        assert!(e.len() < 200 && e.contains('…'), "{e}");
        assert_eq!(clip("short"), "short");
        assert_eq!(clip(&"é".repeat(65)).chars().count(), ECHO_CHARS + 1);
    }
}
