//! Search tools: `glob` (file names) and `grep` (file contents, ripgrep's crates).
//!
//! Both walk the workdir with the `ignore` walker: `.gitignore`/`.ignore` rules apply (also
//! outside a git repository) and hidden files and directories are skipped. Results are
//! relative to the workdir, in file-name order, and capped.

use std::path::Path;

use futures::future::BoxFuture;
use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::args::{self, floor_char_boundary};
use super::paths;
use super::{run_blocking, Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use crate::backend::Backend;
use snowpea_session_llm::provider::ToolSpec;

/// Most paths `glob` returns.
pub const MAX_GLOB_RESULTS: usize = 1000;
/// Most matching lines `grep` returns.
pub const MAX_GREP_MATCHES: usize = 1000;
/// Longest line text `grep` shows; longer lines are cut with `…`.
const MAX_GREP_LINE: usize = 400;

/// A glob as the search tools understand it: a pattern without `/` matches a file's name
/// at any depth (`*.rs`), one with `/` matches the whole path relative to the workdir
/// (`src/**/*.rs`); `*` never crosses `/`, `**` does.
#[derive(Debug, Clone)]
pub struct PathGlob {
    matcher: GlobMatcher,
    name_only: bool,
}

impl PathGlob {
    /// Compiles `pattern`; the error says what is wrong with it.
    pub fn new(pattern: &str) -> Result<Self, String> {
        let trimmed = pattern.trim();
        let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
        if trimmed.is_empty() {
            return Err("glob pattern must not be empty".into());
        }
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("invalid glob pattern `{pattern}`: {e}"))?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            name_only: !trimmed.contains('/'),
        })
    }

    /// Whether the workdir-relative path `rel` matches.
    pub fn is_match(&self, rel: &Path) -> bool {
        if self.name_only {
            rel.file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        } else {
            self.matcher.is_match(rel)
        }
    }
}

/// The workdir-relative path as text, with `/` separators.
fn rel_text(rel: &Path) -> String {
    rel.to_string_lossy().into_owned()
}

/// Output of an interrupted search.
fn interrupted() -> ToolOutput {
    ToolOutput {
        ok: false,
        content: "interrupted".into(),
        meta: json!({ "interrupted": true }),
        diff: None,
    }
}

/// `glob{pattern}`: files whose path matches a glob.
#[derive(Debug, Clone, Copy, Default)]
pub struct Glob;

impl Glob {
    fn search(
        backend: &dyn Backend,
        root: &Path,
        glob: &PathGlob,
        pattern: &str,
        cap: usize,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        let mut found: Vec<String> = Vec::new();
        let mut bytes = 0usize;
        let mut truncated = false;
        let finished = backend.walk_files(root, cancel, &mut |_, rel| {
            if !glob.is_match(rel) {
                return true;
            }
            let text = rel_text(rel);
            if found.len() >= MAX_GLOB_RESULTS || bytes + text.len() + 1 > cap {
                truncated = true;
                return false;
            }
            bytes += text.len() + 1;
            found.push(text);
            true
        });
        if !finished {
            return interrupted();
        }
        let mut content = if found.is_empty() {
            format!("No files match `{pattern}`.")
        } else {
            found.join("\n")
        };
        if truncated {
            content.push_str(&format!(
                "\n[truncated: showing the first {} matches; narrow the pattern]",
                found.len()
            ));
        }
        ToolOutput {
            ok: true,
            content,
            meta: json!({ "pattern": pattern, "count": found.len(), "truncated": truncated }),
            diff: None,
        }
    }
}

impl Tool for Glob {
    fn name(&self) -> &'static str {
        "glob"
    }

    fn permission(&self) -> Permission {
        Permission::Read
    }

    fn category(&self) -> &'static str {
        "search"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: format!(
                "Find files by name with a glob pattern. A pattern without `/` matches file names at any \
                 depth (`*.rs`); one with `/` matches the path relative to the working directory \
                 (`src/**/*.ts`); `*` does not cross `/`, `**` does, `{{a,b}}` alternates. Files ignored \
                 by .gitignore and hidden files are skipped. Returns at most {MAX_GLOB_RESULTS} paths, \
                 relative to the working directory."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": { "type": "string", "description": "Glob pattern, e.g. `**/*.rs` or `Cargo.toml`." }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, args: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        let pattern = args::required_str(args, "pattern")?;
        PathGlob::new(pattern)?;
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: vec![],
            summary: format!("glob {}", args::one_line(pattern, 200)),
        })
    }

    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(run_blocking(move || {
            let pattern = match args::required_str(&args, "pattern") {
                Ok(p) => p,
                Err(e) => return ToolOutput::error(e),
            };
            let glob = match PathGlob::new(pattern) {
                Ok(g) => g,
                Err(e) => return ToolOutput::error(e),
            };
            let root = paths::canonical_workdir(&ctx.workdir);
            Self::search(
                ctx.backend.as_ref(),
                &root,
                &glob,
                pattern,
                ctx.output_cap.max(256),
                &ctx.cancel,
            )
        }))
    }
}

/// `grep{pattern, glob?}`: lines matching a regular expression, as `path:line:text`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grep;

impl Grep {
    fn matcher(pattern: &str) -> Result<RegexMatcher, String> {
        if pattern.is_empty() {
            return Err("argument `pattern` must not be empty".into());
        }
        RegexMatcherBuilder::new()
            .line_terminator(Some(b'\n'))
            .build(pattern)
            .map_err(|e| format!("invalid regular expression `{pattern}`: {e}"))
    }

    fn search(
        backend: &dyn Backend,
        root: &Path,
        matcher: &RegexMatcher,
        glob: Option<&PathGlob>,
        pattern: &str,
        cap: usize,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        let mut out = String::new();
        let mut matches = 0usize;
        let mut files = 0usize;
        let mut truncated = false;
        let finished = backend.walk_files(root, cancel, &mut |path, rel| {
            if glob.is_some_and(|g| !g.is_match(rel)) {
                return true;
            }
            let rel = rel_text(rel);
            let before = matches;
            // Errors on one file (unreadable, vanished) skip it; the search goes on.
            let Ok(reader) = backend.open(path) else {
                return !cancel.is_cancelled();
            };
            let _ = searcher.search_reader(
                matcher,
                reader,
                Lossy(|line_number, line| {
                    let text = line.trim_end_matches(['\n', '\r']);
                    let cut = floor_char_boundary(text, MAX_GREP_LINE);
                    let ellipsis = if cut < text.len() { "…" } else { "" };
                    let entry = format!("{rel}:{line_number}:{}{ellipsis}\n", &text[..cut]);
                    if matches >= MAX_GREP_MATCHES || out.len() + entry.len() > cap {
                        truncated = true;
                        return Ok(false);
                    }
                    out.push_str(&entry);
                    matches += 1;
                    Ok(true)
                }),
            );
            if matches > before {
                files += 1;
            }
            !truncated && !cancel.is_cancelled()
        });
        if !finished || cancel.is_cancelled() {
            return interrupted();
        }
        let mut content = if matches == 0 {
            format!("No matches for `{pattern}`.")
        } else {
            out.trim_end().to_string()
        };
        if truncated {
            content.push_str(&format!(
                "\n[truncated: showing the first {matches} matches; narrow the pattern or add a glob]"
            ));
        }
        ToolOutput {
            ok: true,
            content,
            meta: json!({ "pattern": pattern, "matches": matches, "files": files, "truncated": truncated }),
            diff: None,
        }
    }
}

impl Tool for Grep {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn permission(&self) -> Permission {
        Permission::Read
    }

    fn category(&self) -> &'static str {
        "search"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: format!(
                "Search file contents with a regular expression (Rust regex syntax, as ripgrep; use \
                 `(?i)` for case-insensitive). Returns matching lines as `path:line:text`, paths relative \
                 to the working directory, at most {MAX_GREP_MATCHES}. `glob` limits the files searched \
                 (`*.rs`, `src/**/*.ts`). Files ignored by .gitignore, hidden files and binary files are \
                 skipped."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": { "type": "string", "description": "Regular expression to search for." },
                    "glob": { "type": "string", "description": "Only search files matching this glob." }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, args: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        let pattern = args::required_str(args, "pattern")?;
        Self::matcher(pattern)?;
        let glob = args::optional_str(args, "glob")?;
        if let Some(glob) = glob {
            PathGlob::new(glob)?;
        }
        let mut summary = format!("grep {}", args::one_line(pattern, 200));
        if let Some(glob) = glob {
            summary.push_str(&format!(" in {}", args::one_line(glob, 100)));
        }
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: vec![],
            summary,
        })
    }

    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(run_blocking(move || {
            let parsed = (|| {
                let pattern = args::required_str(&args, "pattern")?;
                let matcher = Self::matcher(pattern)?;
                let glob = args::optional_str(&args, "glob")?
                    .map(PathGlob::new)
                    .transpose()?;
                Ok::<_, String>((pattern, matcher, glob))
            })();
            match parsed {
                Ok((pattern, matcher, glob)) => {
                    let root = paths::canonical_workdir(&ctx.workdir);
                    Self::search(
                        ctx.backend.as_ref(),
                        &root,
                        &matcher,
                        glob.as_ref(),
                        pattern,
                        ctx.output_cap.max(256),
                        &ctx.cancel,
                    )
                }
                Err(e) => ToolOutput::error(e),
            }
        }))
    }
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
