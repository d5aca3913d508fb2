//! How `snowpea run` shows a turn: [`Renderer`] turns each `session.event` into output.
//!
//! * Plain mode: `message.delta` text goes to stdout as it streams; tool calls and results
//!   are short lines on stderr (`▸ shell: cargo test`, `✓ shell: 3 passed (+12 lines)`,
//!   `✗ shell: exit 1`), `error` events and a turn that did not complete are reported on
//!   stderr. `--verbose` adds the full tool output and the model's reasoning (stderr). On a
//!   terminal a spinner with the elapsed time shows while the model thinks ([`Renderer::tick`]).
//! * `--json`: every event is one JSON line `{sessionId, seq, kind, payload, ts}` on stdout,
//!   and nothing else is written to stdout.
//!
//! Write errors (a closed pipe, e.g. `snowpea run … | head -1`) are ignored: the turn still
//! runs to its end and the exit code still reports it.

use std::io::Write;

use serde_json::Value;
use snowpea_sdk::SessionEvent;

/// Longest tool summary shown on one stderr line (characters).
const SUMMARY_MAX: usize = 120;

/// Longest short result shown after `✓ <tool>:` (characters).
const RESULT_MAX: usize = 80;

/// Spinner frames, one per [`Renderer::tick`].
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Renders the events of one `snowpea run` to an output (stdout) and a diagnostics stream
/// (stderr).
#[derive(Debug)]
pub struct Renderer<O: Write, E: Write> {
    json: bool,
    out: O,
    err: E,
    /// Break a partial stdout line before writing to stderr (only when both show on one
    /// terminal; a piped stdout keeps the answer byte for byte).
    break_lines: bool,
    /// The last byte written to `out` was a newline (or nothing was written).
    out_at_line_start: bool,
    /// A `message.delta` arrived since the last `message.done`.
    streamed: bool,
    /// The error of the last failed `tool.result`: the `error` event that usually follows
    /// with the same message is not shown twice.
    last_tool_error: Option<String>,
    /// `--verbose`: full tool output and reasoning.
    verbose: bool,
    /// Reasoning received since the last other event (shown with `--verbose`).
    reasoning: String,
    /// Show a spinner (stderr is a terminal, plain mode).
    spinner: bool,
    /// Since when the model has been thinking (nothing streamed yet), if it is.
    thinking_since: Option<std::time::Instant>,
    /// A spinner line is on stderr and must be cleared before the next output.
    spinner_shown: bool,
    /// Frame counter of the spinner.
    frame: usize,
}

impl<O: Write, E: Write> Renderer<O, E> {
    /// A renderer writing answers/events to `out` and diagnostics to `err`. `break_lines`:
    /// stdout and stderr share a terminal, so a partial answer line is ended before a
    /// diagnostic line.
    pub fn new(json: bool, out: O, err: E, break_lines: bool) -> Self {
        Renderer {
            json,
            out,
            err,
            break_lines,
            out_at_line_start: true,
            streamed: false,
            last_tool_error: None,
            verbose: false,
            reasoning: String::new(),
            spinner: false,
            thinking_since: None,
            spinner_shown: false,
            frame: 0,
        }
    }

    /// `--verbose`: also show the full output of every tool call and the model's reasoning.
    pub fn with_verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }

    /// Show a spinner with the elapsed time while the model thinks (only for a terminal on
    /// stderr, and never in `--json` mode).
    pub fn with_spinner(mut self, spinner: bool) -> Self {
        self.spinner = spinner && !self.json;
        self
    }

    /// Redraws the spinner (called every ~100 ms by `snowpea run`); a no-op unless the
    /// model is thinking and the spinner is on.
    pub fn tick(&mut self) {
        let (true, Some(since)) = (self.spinner, self.thinking_since) else {
            return;
        };
        self.frame = (self.frame + 1) % FRAMES.len();
        let _ = write!(
            self.err,
            "\r{} thinking {:.1}s\x1b[K",
            FRAMES[self.frame],
            since.elapsed().as_secs_f64()
        );
        let _ = self.err.flush();
        self.spinner_shown = true;
    }

    fn clear_spinner(&mut self) {
        if self.spinner_shown {
            let _ = write!(self.err, "\r\x1b[K");
            let _ = self.err.flush();
            self.spinner_shown = false;
        }
    }

    fn flush_reasoning(&mut self) {
        if self.reasoning.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.reasoning);
        for line in text.trim().lines() {
            self.diag(&format!("… {line}"));
        }
    }

    /// Shows one event.
    pub fn event(&mut self, event: &SessionEvent) {
        if self.json {
            if let Ok(line) = serde_json::to_string(event) {
                let _ = writeln!(self.out, "{line}");
                let _ = self.out.flush();
            }
            return;
        }
        let p = &event.payload;
        if event.kind != "message.reasoning" {
            self.flush_reasoning();
        }
        self.thinking_since = match event.kind.as_str() {
            // The model is called next.
            "turn.started" | "message.user" | "tool.result" => {
                Some(self.thinking_since.unwrap_or_else(std::time::Instant::now))
            }
            "message.reasoning" | "usage" | "context" => self.thinking_since,
            _ => None,
        };
        if self.thinking_since.is_none() {
            self.clear_spinner();
        }
        match event.kind.as_str() {
            "message.reasoning" if self.verbose => {
                self.reasoning.push_str(str_field(p, "text"));
            }
            "message.delta" => {
                let text = str_field(p, "text");
                self.streamed = true;
                self.answer(text);
            }
            "message.done" => {
                // A message that arrived whole (no deltas) is still shown.
                let role = str_field(p, "role");
                if !self.streamed && (role.is_empty() || role == "assistant") {
                    self.answer(str_field(p, "text"));
                }
                self.streamed = false;
            }
            "tool.call" => {
                let name = str_field(p, "name");
                let args = p.get("args").unwrap_or(&Value::Null);
                let summary = tool_summary(name, args);
                if summary.is_empty() {
                    self.diag(&format!("▸ {name}"));
                } else {
                    self.diag(&format!("▸ {name}: {summary}"));
                }
            }
            "tool.result" => {
                let name = str_field(p, "name");
                if p.get("ok").and_then(Value::as_bool).unwrap_or(false) {
                    let output = str_field(p, "output");
                    let short = short_result(output);
                    if short.is_empty() {
                        self.diag(&format!("✓ {name}"));
                    } else {
                        self.diag(&format!("✓ {name}: {short}"));
                    }
                    if self.verbose {
                        for line in output.lines() {
                            self.diag(&format!("  │ {line}"));
                        }
                    }
                } else {
                    let error = str_field(p, "error");
                    self.last_tool_error = Some(error.to_owned()).filter(|e| !e.is_empty());
                    let why = one_line(error);
                    if why.is_empty() {
                        self.diag(&format!("✗ {name}"));
                    } else {
                        self.diag(&format!("✗ {name}: {why}"));
                    }
                }
            }
            "error" => {
                let code = str_field(p, "code");
                let message = str_field(p, "message");
                if self.last_tool_error.take().as_deref() == Some(message) {
                    return;
                }
                self.diag(&format!("error: {message} ({code})"));
            }
            "turn.done" => {
                self.end_answer_line();
                let reason = str_field(p, "reason");
                if !reason.is_empty() && reason != "complete" {
                    self.diag(&format!("turn ended: {reason}"));
                }
            }
            _ => {}
        }
    }

    /// A diagnostic line on stderr (approval outcomes, interrupts, …).
    pub fn diag(&mut self, line: &str) {
        self.clear_spinner();
        if self.break_lines && !self.out_at_line_start {
            let _ = self.out.write_all(b"\n");
            let _ = self.out.flush();
            self.out_at_line_start = true;
        }
        let _ = writeln!(self.err, "{line}");
        let _ = self.err.flush();
    }

    /// Ends the answer with a newline if it has none (plain mode only), so the shell prompt
    /// starts on its own line.
    pub fn end_answer_line(&mut self) {
        if !self.json && !self.out_at_line_start {
            let _ = self.out.write_all(b"\n");
            let _ = self.out.flush();
            self.out_at_line_start = true;
        }
    }

    fn answer(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.clear_spinner();
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
        self.out_at_line_start = text.ends_with('\n');
    }

    /// The writers back (tests read what was written).
    pub fn into_inner(self) -> (O, E) {
        (self.out, self.err)
    }
}

/// A string field of an event payload, `""` when absent or not a string.
fn str_field<'a>(payload: &'a Value, field: &str) -> &'a str {
    payload
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The one-line summary of a tool call: the argument a person recognises it by (the shell
/// command, the path, the pattern), else the compact JSON of its arguments; at most
/// [`SUMMARY_MAX`] characters.
pub fn tool_summary(tool: &str, args: &Value) -> String {
    let key = match tool {
        "shell" => Some("command"),
        "read_file" | "write_file" | "edit_file" | "list_dir" => Some("path"),
        "glob" | "grep" => Some("pattern"),
        _ => None,
    };
    let text = match key.and_then(|k| args.get(k)).and_then(Value::as_str) {
        Some(s) => s.to_owned(),
        None => match args {
            Value::Null => String::new(),
            Value::Object(m) if m.is_empty() => String::new(),
            other => other.to_string(),
        },
    };
    truncate(&one_line(&text), SUMMARY_MAX)
}

/// The short result line of a tool's output: its first non-empty line, at most
/// [`RESULT_MAX`] characters, and how many more lines there are.
pub fn short_result(output: &str) -> String {
    let mut lines = output.lines().filter(|l| !l.trim().is_empty());
    let Some(first) = lines.next() else {
        return String::new();
    };
    let more = lines.count();
    let first = truncate(first.trim(), RESULT_MAX);
    if more == 0 {
        first
    } else {
        format!("{first} (+{more} lines)")
    }
}

/// `text` with line breaks folded into `⏎` so it fits one line.
fn one_line(text: &str) -> String {
    text.trim().replace("\r\n", " ⏎ ").replace('\n', " ⏎ ")
}

/// At most `max` characters of `text`, with `…` when cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
