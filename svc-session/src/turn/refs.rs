//! `@` references in prompt text (spec `message.user.refs`; issue 16 "What the user
//! attaches"): `@path` (a file), `@path:10-40` or `@path:7` (lines of a file), `@dir/` or
//! `@dir` (a folder, as a listing) are resolved against the session's workdir and given to
//! the model after the prompt as delimited blocks; `message.user.refs` lists them as
//! `{path, kind, lines?, truncated?, error?}`.
//!
//! * A reference is `@` at the start of the text or after whitespace, followed by a path of
//!   non-whitespace characters (trailing `.,;:!?)` are not part of it). An e-mail address
//!   (`a@b.c`) is not a reference.
//! * A path that leaves the workdir (`..`, an absolute path elsewhere, a symlink out) or that
//!   does not exist is reported with `error` and never read.
//! * A file's text is capped at [`MAX_FILE_BYTES`], a listing at [`MAX_LISTING`] entries, and
//!   all references together at [`MAX_TOTAL_BYTES`]; a cut one has `truncated: true`.
//! * At most [`MAX_REFS`] references per prompt are resolved.

use std::path::{Component, Path, PathBuf};

use serde_json::{json, Value};

/// Bytes of one file given to the model.
pub const MAX_FILE_BYTES: usize = 64 * 1024;
/// Bytes of all references of one prompt.
pub const MAX_TOTAL_BYTES: usize = 256 * 1024;
/// Entries of one folder listing.
pub const MAX_LISTING: usize = 200;
/// References resolved per prompt.
pub const MAX_REFS: usize = 20;

/// The references of one prompt.
#[derive(Debug, Default, Clone)]
pub struct Resolved {
    /// `message.user.refs`.
    pub refs: Vec<Value>,
    /// The blocks appended to the prompt for the model (empty when there are none).
    pub context: String,
}

/// The `@` tokens of `text`, in order, without the `@`.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut prev_ws = true;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '@' && prev_ws {
            let start = i + 1;
            let mut end = start;
            while end < chars.len() && !chars[end].is_whitespace() {
                end += 1;
            }
            let mut token: String = chars[start..end].iter().collect();
            while token.ends_with(['.', ',', ';', '!', '?', ')', '"', '\'']) {
                token.pop();
            }
            if token.ends_with(':') {
                token.pop();
            }
            if !token.is_empty() {
                out.push(token);
            }
            i = end;
            prev_ws = false;
            continue;
        }
        prev_ws = c.is_whitespace();
        i += 1;
    }
    out
}

/// Splits `path:10-40` / `path:7` into the path and a 1-based inclusive line range.
fn split_range(token: &str) -> (&str, Option<(usize, usize)>) {
    if let Some((path, range)) = token.rsplit_once(':') {
        let parsed = match range.split_once('-') {
            Some((a, b)) => a.parse().ok().zip(b.parse().ok()),
            None => range.parse().ok().map(|n| (n, n)),
        };
        if let Some((a, b)) = parsed.filter(|(a, b): &(usize, usize)| *a >= 1 && a <= b) {
            return (path, Some((a, b)));
        }
    }
    (token, None)
}

/// `path` inside `workdir` (canonical), or why not.
fn inside(workdir: &Path, path: &str) -> Result<PathBuf, &'static str> {
    let p = Path::new(path);
    if p.is_relative() && p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err("outside the workdir");
    }
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        workdir.join(p)
    };
    if !joined.starts_with(workdir) {
        return Err("outside the workdir");
    }
    let real = std::fs::canonicalize(&joined).map_err(|_| "not found")?;
    if !real.starts_with(workdir) {
        return Err("outside the workdir");
    }
    Ok(real)
}

fn cut(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// Resolves the references of `text` against `workdir` (canonical) — module doc.
pub fn resolve(workdir: &Path, text: &str) -> Resolved {
    let mut out = Resolved::default();
    let mut budget = MAX_TOTAL_BYTES;
    for token in tokens(text).into_iter().take(MAX_REFS) {
        let (path, lines) = split_range(&token);
        let mut r = json!({"path": path});
        let real = match inside(workdir, path) {
            Ok(p) => p,
            Err(why) => {
                r["kind"] = json!("missing");
                r["error"] = json!(why);
                out.refs.push(r);
                continue;
            }
        };
        let (kind, body, truncated) = if real.is_dir() {
            let mut names: Vec<String> = std::fs::read_dir(&real)
                .map(|d| {
                    d.flatten()
                        .map(|e| {
                            let dir = e.file_type().is_ok_and(|t| t.is_dir());
                            format!(
                                "{}{}",
                                e.file_name().to_string_lossy(),
                                if dir { "/" } else { "" }
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            let truncated = names.len() > MAX_LISTING;
            names.truncate(MAX_LISTING);
            ("folder", names.join("\n"), truncated)
        } else {
            let bytes = match std::fs::read(&real) {
                Ok(b) => b,
                Err(_) => {
                    r["kind"] = json!("file");
                    r["error"] = json!("unreadable");
                    out.refs.push(r);
                    continue;
                }
            };
            let all = String::from_utf8_lossy(&bytes).into_owned();
            let text = match lines {
                Some((a, b)) => {
                    r["lines"] = json!([a, b]);
                    all.lines()
                        .skip(a - 1)
                        .take(b - a + 1)
                        .collect::<Vec<_>>()
                        .join("\n")
                }
                None => all,
            };
            let (kept, truncated) = cut(&text, MAX_FILE_BYTES);
            ("file", kept.to_owned(), truncated)
        };
        let (body, over_budget) = cut(&body, budget);
        budget -= body.len();
        r["kind"] = json!(kind);
        if truncated || over_budget {
            r["truncated"] = json!(true);
        }
        let range = r
            .get("lines")
            .map(|l| format!(" lines=\"{}-{}\"", l[0], l[1]))
            .unwrap_or_default();
        out.context.push_str(&format!(
            "\n\n<ref path=\"{path}\" kind=\"{kind}\"{range}{}>\n{body}\n</ref>",
            if truncated || over_budget {
                " truncated=\"true\""
            } else {
                ""
            }
        ));
        out.refs.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_skip_mail_addresses_and_trailing_punctuation() {
        assert_eq!(
            tokens("see @src/a.rs:10-40, and @docs/ but not me@example.com (@x.txt)."),
            ["src/a.rs:10-40", "docs/"]
        );
        assert_eq!(tokens("@a @b"), ["a", "b"]);
    }

    #[test]
    fn files_ranges_folders_escapes_and_missing() {
        let t = tempfile::tempdir().unwrap();
        let w = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(w.join("src")).unwrap();
        let body: String = (1..=50).map(|i| format!("line {i}\n")).collect();
        std::fs::write(w.join("src/a.rs"), &body).unwrap();
        std::fs::write(w.join("big.txt"), "x".repeat(MAX_FILE_BYTES + 10)).unwrap();
        std::os::unix::fs::symlink("/etc", w.join("out")).unwrap();
        let r = resolve(
            &w,
            "@src/a.rs:10-12 @src @../secret @/etc/passwd @out/hostname @nope.rs @big.txt",
        );
        let refs = &r.refs;
        assert_eq!(
            refs[0],
            json!({"path": "src/a.rs", "kind": "file", "lines": [10, 12]})
        );
        assert!(r.context.contains("line 10\nline 11\nline 12\n</ref>"));
        assert!(!r.context.contains("line 13"));
        assert_eq!(refs[1]["kind"], "folder");
        assert!(r.context.contains("a.rs"));
        for i in [2, 3, 4] {
            assert_eq!(refs[i]["error"], "outside the workdir", "{}", refs[i]);
        }
        assert_eq!(refs[5]["error"], "not found");
        assert_eq!(refs[6]["truncated"], true);
        assert!(!r.context.contains("root:"), "nothing outside was read");
    }
}
