//! `/deepinit [--max-dirs=N] [--force]` (medium_write: writes `AGENTS.md` files): documents
//! the codebase as a hierarchy of `AGENTS.md` files. The workdir's directories (a walk that
//! honours `.gitignore`, hidden and [`crate::file::list::SKIPPED`] directories left out, at
//! most [`MAX_DEPTH`] deep) that hold files are visited deepest first, so a parent's step can
//! link its children's files; the workdir itself is last. Each directory is one model step
//! with read-only tools whose answer is that directory's `AGENTS.md`, written by the command
//! (never outside the workdir). A directory that already has an `AGENTS.md` is kept unless
//! `--force`. At most `--max-dirs` (default [`DEFAULT_MAX_DIRS`], at most [`MAX_DIRS`])
//! directories are visited; an interrupt stops after the current step (the files written so
//! far stay). See [`super::workflow`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use super::workflow::{
    count_option, headless_unsupported, BoxFut, Driver, Finish, Step, StepEnd, Workflow,
    WorkflowRun,
};
use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/deepinit`.
pub struct Deepinit;

/// Directories visited when `--max-dirs` is not given.
pub const DEFAULT_MAX_DIRS: usize = 12;
/// Most directories `--max-dirs` may ask for.
pub const MAX_DIRS: usize = 40;
/// Deepest directory visited, counted from the workdir (its children are depth 1).
pub const MAX_DEPTH: usize = 3;
/// File names shown to the model per directory.
pub const MAX_LISTED_FILES: usize = 60;
/// Largest `AGENTS.md` written, in bytes (a longer answer is cut at a line).
pub const MAX_FILE_BYTES: usize = 64 * 1024;
/// The file written in each directory.
pub const FILE_NAME: &str = "AGENTS.md";

impl Builtin for Deepinit {
    fn name(&self) -> &'static str {
        "deepinit"
    }
    fn summary(&self) -> &'static str {
        "Write a hierarchy of AGENTS.md files documenting the codebase (one model step per directory)"
    }
    fn usage(&self) -> &'static str {
        "/deepinit [--max-dirs=N] [--force]"
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn bare_is_read(&self) -> bool {
        false
    }
    fn run<'a>(&'a self, _cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            if call.headless {
                return Err(headless_unsupported("deepinit"));
            }
            call.args
                .only_options(&["max-dirs", "force"])
                .map_err(Failure::args)?;
            if !call.args.words.is_empty() {
                return Err(Failure::args(format!("usage: {}", self.usage())));
            }
            let max_dirs = count_option(&call.args, "max-dirs", DEFAULT_MAX_DIRS, MAX_DIRS)?;
            let force = call.args.options.contains_key("force");
            Ok(Reply::Workflow(WorkflowRun(Arc::new(DeepinitRun {
                max_dirs,
                force,
            }))))
        })
    }
}

/// One `/deepinit` run.
struct DeepinitRun {
    max_dirs: usize,
    force: bool,
}

/// One directory to document.
#[derive(Debug, Clone, PartialEq)]
pub struct Dir {
    /// Path relative to the workdir (`.` for the workdir).
    pub rel: String,
    /// Depth below the workdir.
    pub depth: usize,
    /// File names directly inside, sorted.
    pub files: Vec<String>,
}

/// The directories of `workdir` that hold files (see the module doc), deepest first, the
/// workdir last; at most `max` (the deepest are dropped first, the workdir is always kept).
pub fn directories(workdir: &Path, max: usize) -> Vec<Dir> {
    let mut by: std::collections::BTreeMap<String, Dir> = std::collections::BTreeMap::new();
    let walk = ignore::WalkBuilder::new(workdir)
        .max_depth(Some(MAX_DEPTH + 1))
        .hidden(true)
        .follow_links(false)
        .filter_entry(|e| {
            !e.file_name()
                .to_str()
                .is_some_and(|n| crate::file::list::SKIPPED.contains(&n))
        })
        .build();
    for entry in walk.flatten().take(100_000) {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(workdir) else {
            continue;
        };
        let parent = rel.parent().unwrap_or(Path::new(""));
        let depth = parent.components().count();
        if depth > MAX_DEPTH {
            continue;
        }
        let key = if depth == 0 {
            ".".to_owned()
        } else {
            parent.to_string_lossy().into_owned()
        };
        let name = rel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        by.entry(key.clone())
            .or_insert_with(|| Dir {
                rel: key,
                depth,
                files: Vec::new(),
            })
            .files
            .push(name);
    }
    by.entry(".".into()).or_insert_with(|| Dir {
        rel: ".".into(),
        depth: 0,
        files: Vec::new(),
    });
    let mut dirs: Vec<Dir> = by.into_values().collect();
    for d in &mut dirs {
        d.files.sort();
    }
    // Shallow first to pick which to keep, then deepest first to visit.
    dirs.sort_by(|a, b| a.depth.cmp(&b.depth).then(a.rel.cmp(&b.rel)));
    dirs.truncate(max.max(1));
    dirs.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.rel.cmp(&b.rel)));
    dirs
}

/// The prompt of the step documenting `dir`; `children` are the `AGENTS.md` files already
/// below it (relative to the workdir).
pub fn dir_prompt(dir: &Dir, children: &[String], existing: Option<&str>) -> String {
    let mut p = format!(
        "[deepinit {rel}] Write the {FILE_NAME} for the directory `{rel}` of this project: what \
         the directory is for, its key files and what each does, how it is built and tested, \
         conventions to follow, and what to watch out for when changing it. Read the files \
         you need (read-only tools). Answer with only the markdown content of the file.\n\nFiles:\n",
        rel = dir.rel
    );
    for f in dir.files.iter().take(MAX_LISTED_FILES) {
        p.push_str(&format!("- {f}\n"));
    }
    if dir.files.len() > MAX_LISTED_FILES {
        p.push_str(&format!(
            "- … and {} more\n",
            dir.files.len() - MAX_LISTED_FILES
        ));
    }
    if !children.is_empty() {
        p.push_str("\nLink these child documents:\n");
        for c in children {
            p.push_str(&format!("- {c}\n"));
        }
    }
    if let Some(old) = existing {
        p.push_str(&format!(
            "\nThe current {FILE_NAME} (update it, keep what is still true):\n{old}\n"
        ));
    }
    p
}

/// The file content of a step's answer: a fenced answer is unwrapped; cut at a line to
/// [`MAX_FILE_BYTES`]; always ends with a newline.
pub fn file_content(answer: &str) -> String {
    let t = answer.trim();
    let body = t
        .strip_prefix("```")
        .and_then(|r| r.split_once('\n').map(|(_, b)| b))
        .and_then(|b| b.trim_end().strip_suffix("```"))
        .unwrap_or(t);
    let mut out = String::new();
    for line in body.lines() {
        if out.len() + line.len() + 1 > MAX_FILE_BYTES {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Writes `content` to `<workdir>/<rel>/AGENTS.md`, refusing a target whose directory
/// resolves outside the workdir.
fn write_doc(workdir: &Path, rel: &str, content: &str) -> std::result::Result<PathBuf, String> {
    let dir = workdir.join(rel);
    let real_wd = workdir.canonicalize().map_err(|e| e.to_string())?;
    let real_dir = dir.canonicalize().map_err(|e| e.to_string())?;
    if !real_dir.starts_with(&real_wd) {
        return Err(format!("{rel} resolves outside the workdir"));
    }
    let path = real_dir.join(FILE_NAME);
    if path.is_symlink() {
        return Err(format!("{rel}/{FILE_NAME} is a symbolic link"));
    }
    std::fs::write(&path, content).map_err(|e| e.to_string())?;
    Ok(path)
}

fn doc_rel(rel: &str) -> String {
    if rel == "." {
        FILE_NAME.to_owned()
    } else {
        format!("{rel}/{FILE_NAME}")
    }
}

impl Workflow for DeepinitRun {
    fn run<'a>(&'a self, d: &'a dyn Driver) -> BoxFut<'a, Finish> {
        Box::pin(async move {
            let workdir = d.workdir();
            let max = self.max_dirs;
            let wd = workdir.clone();
            let dirs = match tokio::task::spawn_blocking(move || directories(&wd, max)).await {
                Ok(d) => d,
                Err(e) => {
                    return Finish::Error(Some(Failure::failed(
                        "internal",
                        format!("cannot list the workdir: {e}"),
                    )))
                }
            };
            let mut written: Vec<String> = Vec::new();
            let mut kept: Vec<String> = Vec::new();
            let mut failed: Vec<String> = Vec::new();
            for dir in &dirs {
                let doc = doc_rel(&dir.rel);
                let existing = std::fs::read_to_string(workdir.join(&doc)).ok();
                if existing.is_some() && !self.force {
                    kept.push(doc);
                    continue;
                }
                let prefix = if dir.rel == "." {
                    String::new()
                } else {
                    format!("{}/", dir.rel)
                };
                let children: Vec<String> = written
                    .iter()
                    .chain(kept.iter())
                    .filter(|c| c.starts_with(&prefix) && **c != doc)
                    .cloned()
                    .collect();
                let end = d
                    .step(Step {
                        prompt: dir_prompt(dir, &children, existing.as_deref()),
                        allowed_tools: Some(
                            super::review::REVIEW_TOOLS
                                .iter()
                                .map(|s| s.to_string())
                                .collect(),
                        ),
                    })
                    .await;
                let answer = match end {
                    StepEnd::Answer(a) => a,
                    StepEnd::Interrupted => return Finish::Interrupted,
                    StepEnd::Denied => return Finish::Denied,
                    StepEnd::Failed => return Finish::Error(None),
                    StepEnd::Budget => return Finish::Budget,
                };
                let content = file_content(&answer);
                if content.trim().is_empty() {
                    failed.push(format!("{doc}: empty answer"));
                    continue;
                }
                match write_doc(&workdir, &dir.rel, &content) {
                    Ok(_) => written.push(doc),
                    Err(e) => failed.push(format!("{doc}: {e}")),
                }
            }
            let mut text = format!(
                "/deepinit wrote {} {FILE_NAME} file(s) over {} directories",
                written.len(),
                dirs.len()
            );
            if !kept.is_empty() {
                text.push_str(&format!(
                    "; kept {} existing (--force rewrites them)",
                    kept.len()
                ));
            }
            if !failed.is_empty() {
                text.push_str(&format!("; not written: {}", failed.join("; ")));
            }
            Finish::Complete {
                text,
                data: json!({"written": written, "kept": kept, "failed": failed, "directories": dirs.len()}),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_deepest_first_with_the_workdir_last_and_bounded() {
        let t = tempfile::tempdir().unwrap();
        for f in [
            "a.txt",
            "src/lib.rs",
            "src/x/y.rs",
            "node_modules/p/i.js",
            ".hidden/z",
        ] {
            let p = t.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let dirs = directories(t.path(), 10);
        let rels: Vec<&str> = dirs.iter().map(|d| d.rel.as_str()).collect();
        assert_eq!(rels, vec!["src/x", "src", "."]);
        assert_eq!(dirs[1].files, vec!["lib.rs"]);
        // The cap drops the deepest first and keeps the workdir.
        let rels: Vec<String> = directories(t.path(), 2)
            .into_iter()
            .map(|d| d.rel)
            .collect();
        assert_eq!(rels, vec!["src", "."]);
    }

    #[test]
    fn answers_become_file_content() {
        assert_eq!(file_content("```markdown\n# A\nb\n```"), "# A\nb\n");
        assert_eq!(file_content("# A"), "# A\n");
        assert_eq!(file_content("  \n"), "");
    }
}
