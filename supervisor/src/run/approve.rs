//! Answering `approval.request` (server → client) for `snowpea run`.
//!
//! With `--yes` every request is allowed once. Otherwise the request (tool, summary, risk) is
//! printed to stderr and the answer read from the terminal: stdin when it is one, else
//! `/dev/tty`. Without a terminal (CI, a detached process) the request is denied and the
//! reason printed, so a run never hangs waiting for an answer nobody can give.
//!
//! The terminal is read on a plain thread, not the runtime's blocking pool: a read still
//! waiting when the turn ends (the daemon timed the request out, or Ctrl-C) must not keep
//! the process from exiting.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::sync::Arc;

use serde_json::{json, Value};
use snowpea_sdk::{Client, RpcError};
use tokio::sync::{oneshot, Mutex};

use super::render::tool_summary;

/// How approvals are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `--yes`: allow every request, once.
    AllowAll,
    /// Ask on the terminal; deny when there is none.
    Ask,
}

/// What the person (or the lack of a terminal) decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `y`: allow this call.
    Once,
    /// `a`: allow this tool for the rest of the session.
    Session,
    /// Anything else, or end of input.
    Deny,
    /// No terminal to ask on.
    NoTerminal,
}

/// Registers the `approval.request` handler on `client`.
pub fn install(client: &Client, policy: Policy) {
    // One prompt at a time: concurrent requests would interleave on the terminal.
    let turn = Arc::new(Mutex::new(()));
    client.on_request("approval.request", move |params| {
        let turn = turn.clone();
        async move {
            let request = Request::from_params(&params);
            let answer = match policy {
                Policy::AllowAll => {
                    eprintln!("✓ allowed {} (--yes)", request.headline());
                    Answer::Once
                }
                Policy::Ask => {
                    let _one_at_a_time = turn.lock().await;
                    ask(request.clone()).await
                }
            };
            Ok::<Value, RpcError>(answer_value(&request, &answer))
        }
    });
}

/// The parts of an `approval.request` that are shown (every field optional: odd input is
/// shown as well as it can be, never a panic).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Tool the model wants to run.
    pub tool: String,
    /// One line describing the call: the daemon's `note`, else a summary of `args`.
    pub summary: String,
    /// Risk hint (`low`, `high`, …), empty when absent.
    pub risk: String,
    /// Seconds before the daemon denies on its own, when given.
    pub timeout_sec: Option<f64>,
}

impl Request {
    /// Reads the request's params.
    pub fn from_params(params: &Value) -> Self {
        let field = |name: &str| {
            params
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let tool = match field("tool") {
            t if t.is_empty() => "(unnamed tool)".to_owned(),
            t => t,
        };
        let note = field("note");
        // The daemon's note often starts with the tool's name already (`shell: ls`).
        let note = note.trim();
        let note = note
            .strip_prefix(tool.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
            .unwrap_or(note)
            .trim();
        let summary = if note.is_empty() {
            tool_summary(&tool, params.get("args").unwrap_or(&Value::Null))
        } else {
            note.replace('\n', " ⏎ ")
        };
        Request {
            tool,
            summary,
            risk: field("risk"),
            timeout_sec: params.get("timeoutSec").and_then(Value::as_f64),
        }
    }

    /// `shell: echo hi`.
    pub fn headline(&self) -> String {
        if self.summary.is_empty() {
            self.tool.clone()
        } else {
            format!("{}: {}", self.tool, self.summary)
        }
    }

    /// The text shown before the question.
    pub fn describe(&self) -> String {
        let mut text = format!("? approval needed — {}", self.headline());
        if !self.risk.is_empty() {
            text.push_str(&format!(" (risk: {})", self.risk));
        }
        if let Some(secs) = self.timeout_sec.filter(|s| s.is_finite() && *s > 0.0) {
            text.push_str(&format!(" — denied automatically in {secs:.0}s"));
        }
        text
    }
}

/// The `approval.request` result for an answer.
pub fn answer_value(request: &Request, answer: &Answer) -> Value {
    match answer {
        Answer::Once => json!({ "decision": "allow", "scope": "once" }),
        Answer::Session => json!({ "decision": "allow", "scope": "session" }),
        Answer::Deny => json!({
            "decision": "deny",
            "reason": format!("the user refused `{}` at the terminal", request.tool),
        }),
        Answer::NoTerminal => json!({
            "decision": "deny",
            "reason": "no terminal to ask for approval (snowpea run without --yes)",
        }),
    }
}

/// Parses a typed answer: `y`/`yes` → once, `a`/`always` → session, anything else → deny.
pub fn parse_answer(line: &str) -> Answer {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Answer::Once,
        "a" | "always" => Answer::Session,
        _ => Answer::Deny,
    }
}

/// Asks on the terminal (on its own thread) and reports the outcome on stderr.
async fn ask(request: Request) -> Answer {
    let (tx, rx) = oneshot::channel();
    let question = request.clone();
    let spawned = std::thread::Builder::new()
        .name("approval-prompt".into())
        .spawn(move || {
            let _ = tx.send(ask_blocking(&question));
        });
    let answer = match spawned {
        Ok(_) => rx.await.unwrap_or(Answer::Deny),
        Err(_) => Answer::NoTerminal,
    };
    match answer {
        Answer::Once => eprintln!("✓ allowed {}", request.tool),
        Answer::Session => eprintln!("✓ allowed {} for this session", request.tool),
        Answer::Deny => eprintln!("✗ denied {}", request.tool),
        Answer::NoTerminal => eprintln!("{}", no_terminal_line(&request)),
    }
    answer
}

/// What is printed for a request denied because there is no terminal to ask on (no
/// "denied automatically in …s" countdown: the deny is immediate).
pub fn no_terminal_line(request: &Request) -> String {
    format!(
        "✗ {}: denied (no terminal to ask; use --yes or --mode)",
        request.headline()
    )
}

/// The question and its answer, on the terminal.
fn ask_blocking(request: &Request) -> Answer {
    let Some((mut input, mut output)) = terminal() else {
        return Answer::NoTerminal;
    };
    let mut stderr = std::io::stderr();
    let _ = writeln!(stderr, "{}", request.describe());
    let _ = stderr.flush();
    let _ = write!(
        output,
        "Allow {}? [y]es once / [a]lways this session / [N]o: ",
        request.tool
    );
    let _ = output.flush();
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) | Err(_) => {
            let _ = writeln!(output);
            Answer::Deny
        }
        Ok(_) => parse_answer(&line),
    }
}

/// Where to ask: stdin + stderr when stdin is a terminal, else `/dev/tty` (both ways), else
/// nothing.
fn terminal() -> Option<(Box<dyn BufRead>, Box<dyn Write>)> {
    if std::io::stdin().is_terminal() {
        return Some((
            Box::new(BufReader::new(std::io::stdin())),
            Box::new(std::io::stderr()),
        ));
    }
    let tty = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()?;
    let writer = tty.try_clone().ok()?;
    Some((Box::new(BufReader::new(tty)), Box::new(writer)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{answer_value, parse_answer, Answer, Request};

    #[test]
    fn answers_parse_leniently_and_default_to_deny() {
        assert_eq!(parse_answer("y\n"), Answer::Once);
        assert_eq!(parse_answer(" YES "), Answer::Once);
        assert_eq!(parse_answer("a"), Answer::Session);
        assert_eq!(parse_answer(""), Answer::Deny);
        assert_eq!(parse_answer("sure"), Answer::Deny);
    }

    #[test]
    fn a_request_is_described_from_note_or_args() {
        let r = Request::from_params(&json!({
            "requestId": "ap_1", "sessionId": "s_1", "tool": "shell",
            "args": {"command": "rm -rf build"}, "risk": "high", "timeoutSec": 300
        }));
        assert_eq!(r.headline(), "shell: rm -rf build");
        assert_eq!(
            r.describe(),
            "? approval needed — shell: rm -rf build (risk: high) — denied automatically in 300s"
        );
        let r = Request::from_params(&json!({"tool": "write_file", "note": "write ../x\n"}));
        assert_eq!(r.headline(), "write_file: write ../x");
        let r = Request::from_params(&json!({"tool": "shell", "note": "shell: ls — outside"}));
        assert_eq!(r.headline(), "shell: ls — outside");
        let odd = Request::from_params(&json!(["not", "an", "object"]));
        assert_eq!(odd.headline(), "(unnamed tool)");
    }

    #[test]
    fn answers_map_to_the_protocol_result() {
        let r = Request::from_params(&json!({"tool": "shell"}));
        assert_eq!(
            answer_value(&r, &Answer::Once),
            json!({"decision": "allow", "scope": "once"})
        );
        assert_eq!(answer_value(&r, &Answer::Session)["scope"], "session");
        assert_eq!(answer_value(&r, &Answer::Deny)["decision"], "deny");
        assert_eq!(answer_value(&r, &Answer::NoTerminal)["decision"], "deny");
    }
}
