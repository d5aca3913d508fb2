//! Which session a headless command runs in — the target rule (issue 39 item 6; printed by
//! `snowpea cmd --help`, documented in docs/OPERATIONS.md):
//!
//! 1. `--session ID`;
//! 2. else, of the open sessions rooted at the directory (`--workdir DIR`, else the current
//!    one), the most recently active that a client such as `snowpea chat` opened — not one
//!    `snowpea run` opened (`originSurface` [`RUN_SURFACE`]);
//! 3. else the directory's most recently active `snowpea run` session;
//! 4. else none (`--workdir` then creates one, `originSurface` [`CMD_SURFACE`]).
//!
//! `snowpea run --continue` continues the session of rule 3 ([`latest_run`]), open or saved.

use std::path::Path;

use serde_json::{json, Value};
use snowpea_sdk::Client;

/// `originSurface` of the sessions `snowpea run` creates.
pub const RUN_SURFACE: &str = "run";

/// `originSurface` of the sessions `snowpea cmd --workdir` creates for a command.
pub const CMD_SURFACE: &str = "cmd";

/// One candidate of a `session.list` answer.
struct Candidate<'a> {
    id: &'a str,
    last_active: &'a str,
    from_run: bool,
    seq: u64,
}

/// The chat sessions of `list` (a `session.list` result) rooted at `dir`.
fn candidates<'a>(list: &'a Value, dir: &Path) -> Vec<Candidate<'a>> {
    list.get("sessions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|s| Path::new(s["workdir"].as_str().unwrap_or_default()) == dir)
        .filter(|s| s["kind"].as_str().is_none_or(|k| k == "chat"))
        .filter_map(|s| {
            Some(Candidate {
                id: s["sessionId"].as_str().filter(|id| !id.is_empty())?,
                last_active: s["lastActivityAt"]
                    .as_str()
                    .or_else(|| s["createdAt"].as_str())
                    .unwrap_or_default(),
                from_run: s["originSurface"] == RUN_SURFACE,
                seq: s["seq"].as_u64().unwrap_or(0),
            })
        })
        .collect()
}

/// Rules 2 and 3 over `list` (a `session.list` result of open sessions): the session a
/// command in `dir` runs in, if any.
pub fn pick(list: &Value, dir: &Path) -> Option<String> {
    let all = candidates(list, dir);
    let newest = |from_run: bool| {
        all.iter()
            .filter(|c| c.from_run == from_run)
            .max_by(|a, b| a.last_active.cmp(b.last_active))
            .map(|c| c.id.to_owned())
    };
    newest(false).or_else(|| newest(true))
}

/// The most recently active `snowpea run` session of `dir` in `list` (open or saved), with
/// its last `seq`.
pub fn latest_run(list: &Value, dir: &Path) -> Option<(String, u64)> {
    candidates(list, dir)
        .into_iter()
        .filter(|c| c.from_run)
        .max_by(|a, b| a.last_active.cmp(b.last_active))
        .map(|c| (c.id.to_owned(), c.seq))
}

/// [`pick`] over the open sessions of the daemon behind `client`.
pub async fn of_dir(client: &Client, dir: &Path) -> Result<Option<String>, snowpea_sdk::Error> {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let list = client
        .call(
            "session.list",
            json!({"workdir": dir.to_string_lossy(), "kinds": ["chat"]}),
        )
        .await?;
    Ok(pick(&list, &dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, wd: &str, surface: Option<&str>, at: &str) -> Value {
        json!({"sessionId": id, "workdir": wd, "kind": "chat", "originSurface": surface, "lastActivityAt": at, "seq": 7})
    }

    #[test]
    fn a_clients_session_wins_over_newer_run_sessions_then_the_latest_run() {
        let dir = Path::new("/p");
        let list = json!({"sessions": [
            session("chat-old", "/p", Some("tui"), "2026-01-01T00:00:00Z"),
            session("chat-new", "/p", None, "2026-01-02T00:00:00Z"),
            session("run-newest", "/p", Some("run"), "2026-01-09T00:00:00Z"),
            session("elsewhere", "/q", Some("tui"), "2026-01-10T00:00:00Z"),
            {"sessionId": "child", "workdir": "/p", "kind": "subagent", "lastActivityAt": "2026-01-11T00:00:00Z"},
        ]});
        assert_eq!(pick(&list, dir).as_deref(), Some("chat-new"));
        let runs_only = json!({"sessions": [
            session("run-1", "/p", Some("run"), "2026-01-01T00:00:00Z"),
            session("run-2", "/p", Some("run"), "2026-01-03T00:00:00Z"),
        ]});
        assert_eq!(pick(&runs_only, dir).as_deref(), Some("run-2"));
        assert_eq!(latest_run(&list, dir), Some(("run-newest".into(), 7)));
        assert_eq!(pick(&json!({"sessions": []}), dir), None);
        assert_eq!(latest_run(&json!({}), dir), None);
    }
}
