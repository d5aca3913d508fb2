//! `/review [focus…]` (low_write: a model turn whose tools are limited to reading): reviews
//! the working tree's diff against `HEAD` (`git diff HEAD`, run with arguments, never a shell
//! string; at most [`MAX_DIFF_BYTES`] of it, [`GIT_TIMEOUT`] to produce it).

use std::time::Duration;

use super::{Builtin, Call, Commands, Failure, PromptTurn, Reply, Risk, Run};

/// `/review`.
pub struct Review;

/// Largest diff put in the review prompt, in bytes.
pub const MAX_DIFF_BYTES: usize = 200 * 1024;
/// Longest `git diff` may take.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// The tools a review turn may call.
pub const REVIEW_TOOLS: &[&str] = &["read_file", "list_dir", "glob", "grep"];

impl Builtin for Review {
    fn name(&self) -> &'static str {
        "review"
    }
    fn summary(&self) -> &'static str {
        "Review the working tree's uncommitted changes (a model turn with read-only tools)"
    }
    fn usage(&self) -> &'static str {
        "/review [focus]"
    }
    fn risk(&self) -> Risk {
        Risk::LowWrite
    }
    fn bare_is_read(&self) -> bool {
        false
    }
    fn run<'a>(&'a self, _cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            if call.headless {
                return Err(Failure {
                    code: "invalid_params",
                    stable: super::codes::HEADLESS_UNSUPPORTED,
                    message:
                        "/review runs a model turn; use `snowpea run` or an interactive client"
                            .into(),
                });
            }
            let mut cmd = tokio::process::Command::new("git");
            cmd.args(["--no-pager", "diff", "--no-color", "--no-ext-diff", "HEAD"])
                .current_dir(call.session.workdir())
                .env("GIT_TERMINAL_PROMPT", "0")
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true);
            let out = match tokio::time::timeout(GIT_TIMEOUT, cmd.output()).await {
                Err(_) => return Err(Failure::failed("unavailable", "git diff took too long")),
                Ok(Err(e)) => {
                    return Err(Failure::failed(
                        "unavailable",
                        format!("cannot run git: {e}"),
                    ))
                }
                Ok(Ok(o)) => o,
            };
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                return Err(Failure::not_found(format!(
                    "no diff to review: {}",
                    err.trim().lines().next().unwrap_or("git diff failed")
                )));
            }
            let mut diff = String::from_utf8_lossy(&out.stdout).into_owned();
            if diff.trim().is_empty() {
                return Ok(Reply::done(
                    "nothing to review: the working tree has no changes against HEAD",
                    serde_json::json!({"changes": 0}),
                ));
            }
            let truncated = diff.len() > MAX_DIFF_BYTES;
            if truncated {
                let cut = crate::tools::args::floor_char_boundary(&diff, MAX_DIFF_BYTES);
                diff.truncate(cut);
            }
            let focus = call.args.text();
            let mut text = String::from(
                "Review these uncommitted changes: point out bugs, risky changes and missing tests, \
                 most important first, with file and line. Do not change any file.\n",
            );
            if !focus.is_empty() {
                text.push_str(&format!("Focus: {focus}\n"));
            }
            text.push_str(&format!("\n```diff\n{diff}\n```\n"));
            if truncated {
                text.push_str(&format!("(diff truncated at {MAX_DIFF_BYTES} bytes)\n"));
            }
            Ok(Reply::Prompt(PromptTurn {
                text,
                skill: false,
                allowed_tools: Some(REVIEW_TOOLS.iter().map(|s| s.to_string()).collect()),
                after: None,
            }))
        })
    }
}
