//! The typed view of a settings document (`$SNOWPEA_HOME/settings.json`, a project's
//! `<workdir>/.snowpea/settings.json`): the keys Snowpea reads, their types and defaults
//! (reference behaviour §2). Unknown keys — at the top level and inside every section — are
//! kept in `extra` and written back untouched. [`validate`] checks the sections a patch
//! touched, naming the first bad field by its path (`agent.busy`); [`defaults`] is the
//! document every key falls back to, which `settings.get` shows under the user's values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Most seconds an approval or question may wait (30 days).
pub const MAX_TIMEOUT_SEC: u64 = 30 * 24 * 3600;

macro_rules! section {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $(@$rename:literal)? $field:ident : $ty:ty = $default:expr),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $name {
            $($(#[$fdoc])* $(#[serde(rename = $rename)])? pub $field: $ty,)*
            /// Keys of this section Snowpea does not know, kept as they are.
            #[serde(flatten)]
            pub extra: Map<String, Value>,
        }
        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* extra: Map::new() }
            }
        }
    };
}

/// How a prompt sent while a turn runs is handled (`agent.busy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Busy {
    /// Folded into the running turn.
    Steer,
    /// Run as a later turn.
    Queue,
}

/// A session mode (`permissions.defaultMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModeName {
    /// Read and plan only.
    Plan,
    /// Edit freely, ask before running things.
    Accept,
    /// Run everything but configuration changes.
    Auto,
}

section!(
    /// `agents`: delegated sub-agents.
    Agents { /// Sub-agents running at once, per delegating session.
        max_concurrent: u32 = 3,
        /// How deep delegation may nest (a child of a root session is depth 1).
        @"maxDepth" max_depth: u32 = 2,
        /// Seconds a delegated child may run before it is interrupted.
        @"timeoutSec" timeout_sec: u64 = 1800,
        /// Whether sessions start in delegation mode (the lead hands the work to its team)
        /// unless `/team on|off` pinned it.
        @"delegateByDefault" delegate_by_default: bool = false });
section!(
    /// `team`: teams of workers in git worktrees (`team.start`, `/team`).
    Team {
        /// Workers of a `/team <task>` without `--workers` (1 – 16).
        workers: u32 = 3,
        /// Times a task whose merge conflicts is re-run before it fails (0 – 10).
        @"maxConflictRetries" max_conflict_retries: u32 = 2,
        /// Seconds one task may run before it is interrupted and fails (1 – 86400).
        @"taskTimeoutSec" task_timeout_sec: u64 = 1800 });
section!(
    /// `approvals`.
    Approvals { /// Seconds an approval waits before it times out (1 – 30 days).
        @"timeoutSec" timeout_sec: u64 = 300 });
section!(
    /// `questions` (`ask_user`).
    Questions { /// Seconds a question waits for an answer.
        @"timeoutSec" timeout_sec: u64 = 600 });
section!(
    /// `agent`: the agent loop.
    Agent {
        /// Model calls with tool use in one turn.
        max_tool_rounds: u32 = 200,
        /// Output tokens of one model call; unset = the vendor adapter's default.
        max_tokens: Option<u32> = None,
        /// What a prompt sent while a turn runs does.
        busy: Busy = Busy::Steer });
section!(
    /// `daemon`.
    Daemon { /// Seconds without clients before the daemon may stop (0 = never).
        @"idleTimeoutSec" idle_timeout_sec: u64 = 1800 });
section!(
    /// `search`: the `web_search` tool.
    Search { /// Preferred provider id (`setup.catalog` `search`).
        provider: String = "ddgs".into() });
section!(
    /// `browser`: the `browser_*` tools.
    Browser { /// Browser provider id (`setup.catalog` `browser`).
        provider: String = "local_chromium".into() });
section!(
    /// `memory`: long-term memory (svc-memory, recall in svc-session).
    Memory {
        /// Memory on/off (recall and the memory tools).
        enabled: bool = true,
        /// Memories recalled into a turn's system prompt (0 – 100; 0 = no recall).
        top_k: u32 = 8,
        /// Hits of `memory.search` when the call gives no `limit` (1 – 100; svc-memory).
        @"searchLimit" search_limit: u32 = 10 });
section!(
    /// `scheduler` (svc-scheduler; see its `config.rs` for the rest of the keys).
    Scheduler {
        /// Scheduled jobs run.
        enabled: bool = true,
        /// IANA zone times without an offset are read in; unset = the system zone.
        @"timeZone" time_zone: Option<String> = None });
section!(
    /// `permissions`.
    Permissions { /// Mode of a session created without one.
        @"defaultMode" default_mode: Option<ModeName> = None });
section!(
    /// `updates` (`system.checkUpdate`).
    Updates {
        /// Daily background check.
        check: bool = true,
        /// Where releases come from.
        channel: String = "auto".into() });
section!(
    /// `mcp` (svc-mcp).
    Mcp {
        /// MCP servers on/off.
        enabled: bool = true,
        /// Permission tag per server name.
        permissions: BTreeMap<String, String> = BTreeMap::new(),
        /// Projects whose `.mcp.json` servers start without per-entry trust (global only).
        @"trustedProjects" trusted_projects: Vec<String> = Vec::new() });

/// The whole document: the typed sections plus every other key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SettingsDoc {
    /// `agents`.
    pub agents: Agents,
    /// `team`.
    pub team: Team,
    /// `approvals`.
    pub approvals: Approvals,
    /// `questions`.
    pub questions: Questions,
    /// `agent`.
    pub agent: Agent,
    /// `daemon`.
    pub daemon: Daemon,
    /// `search`.
    pub search: Search,
    /// `browser`.
    pub browser: Browser,
    /// `memory`.
    pub memory: Memory,
    /// `scheduler`.
    pub scheduler: Scheduler,
    /// `permissions`.
    pub permissions: Permissions,
    /// `updates`.
    pub updates: Updates,
    /// `mcp`.
    pub mcp: Mcp,
    /// `providers.<vendor>` and `providers.default` (shapes owned by `provider.*`).
    pub providers: Map<String, Value>,
    /// `gateway.<platform>` chat gateways and `gateway.allowedOrigins`.
    pub gateway: Map<String, Value>,
    /// The global allowlist.
    pub allowlist: Vec<Value>,
    /// Every other top-level key (audio, checkpoints, lsp, …), kept as it is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A field that fails validation: its path inside the document (`agent.busy`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Dotted path in the settings document.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// The document of defaults (`null`-valued optional keys left out).
pub fn defaults() -> Value {
    let mut v = serde_json::to_value(SettingsDoc::default()).unwrap_or_default();
    strip_nulls(&mut v);
    v
}

fn strip_nulls(v: &mut Value) {
    if let Value::Object(m) = v {
        m.retain(|_, x| !x.is_null());
        m.values_mut().for_each(strip_nulls);
    }
}

/// Checks the top-level sections named in `touched` of `doc` (a merged document):
/// their types (serde, naming the exact field) and ranges. Sections not touched are not
/// checked, so an old hand-edited value elsewhere never blocks an unrelated change.
pub fn validate(doc: &Value, touched: &[&str]) -> Result<(), Invalid> {
    for key in touched {
        let Some(value) = doc.get(*key) else { continue };
        let mut one = Map::new();
        one.insert((*key).to_owned(), value.clone());
        let typed: SettingsDoc =
            serde_path_to_error::deserialize(Value::Object(one)).map_err(|e| Invalid {
                path: e.path().to_string(),
                message: e.inner().to_string(),
            })?;
        ranges(&typed, key)?;
    }
    Ok(())
}

fn ranges(d: &SettingsDoc, section: &str) -> Result<(), Invalid> {
    let bad = |path: &str, message: String| {
        Err(Invalid {
            path: path.into(),
            message,
        })
    };
    match section {
        "approvals" if !(1..=MAX_TIMEOUT_SEC).contains(&d.approvals.timeout_sec) => bad(
            "approvals.timeoutSec",
            format!("must be from 1 to {MAX_TIMEOUT_SEC} seconds"),
        ),
        "questions" if !(1..=MAX_TIMEOUT_SEC).contains(&d.questions.timeout_sec) => bad(
            "questions.timeoutSec",
            format!("must be from 1 to {MAX_TIMEOUT_SEC} seconds"),
        ),
        "agent" if d.agent.max_tool_rounds == 0 => {
            bad("agent.max_tool_rounds", "must be at least 1".into())
        }
        "agent" if d.agent.max_tokens == Some(0) => {
            bad("agent.max_tokens", "must be at least 1".into())
        }
        "team" if !(1..=16).contains(&d.team.workers) => {
            bad("team.workers", "must be from 1 to 16".into())
        }
        "team" if d.team.max_conflict_retries > 10 => {
            bad("team.maxConflictRetries", "must be from 0 to 10".into())
        }
        "team" if !(1..=86_400).contains(&d.team.task_timeout_sec) => bad(
            "team.taskTimeoutSec",
            "must be from 1 to 86400 seconds".into(),
        ),
        "memory" if d.memory.top_k > 100 => bad("memory.top_k", "must be from 0 to 100".into()),
        "memory" if !(1..=100).contains(&d.memory.search_limit) => {
            bad("memory.searchLimit", "must be from 1 to 100".into())
        }
        "scheduler" => match d.scheduler.time_zone.as_deref() {
            Some(z) if jiff::tz::TimeZone::get(z.trim()).is_err() || z.trim().is_empty() => bad(
                "scheduler.timeZone",
                format!("{z:?} is not a known IANA time zone"),
            ),
            _ => Ok(()),
        },
        "mcp" => match d
            .mcp
            .permissions
            .iter()
            .find(|(_, p)| !PERMISSIONS.contains(&p.as_str()))
        {
            Some((server, p)) => bad(
                &format!("mcp.permissions.{server}"),
                format!("{p:?} is not one of {}", PERMISSIONS.join(", ")),
            ),
            None => Ok(()),
        },
        "providers" => match d.providers.iter().find(|(k, v)| {
            if k.as_str() == "default" {
                !v.is_string()
            } else {
                !v.is_object()
            }
        }) {
            Some((k, _)) if k == "default" => bad(
                "providers.default",
                "must be a vendor name (a string)".into(),
            ),
            Some((k, _)) => bad(&format!("providers.{k}"), "must be an object".into()),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Permission tags a tool (and an MCP server) may carry.
pub const PERMISSIONS: &[&str] = &[
    "read", "write", "exec", "network", "send", "config", "delegate", "secret",
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_hold_the_reference_values() {
        let d = defaults();
        assert_eq!(d["approvals"]["timeoutSec"], 300);
        assert_eq!(d["questions"]["timeoutSec"], 600);
        assert_eq!(d["agents"]["max_concurrent"], 3);
        assert_eq!(d["team"]["maxConflictRetries"], 2);
        assert_eq!(d["team"]["workers"], 3);
        assert_eq!(d["agent"]["max_tool_rounds"], 200);
        assert!(
            d["agent"].get("max_tokens").is_none(),
            "the vendor's default"
        );
        assert_eq!(d["daemon"]["idleTimeoutSec"], 1800);
        assert_eq!(d["search"]["provider"], "ddgs");
        assert_eq!(d["browser"]["provider"], "local_chromium");
        assert!(d["scheduler"].get("timeZone").is_none());
    }

    #[test]
    fn a_bad_field_is_named_by_its_path() {
        let doc = json!({"agent": {"busy": "sometimes", "other": 1}});
        let e = validate(&doc, &["agent"]).unwrap_err();
        assert_eq!(e.path, "agent.busy");
        assert!(e.message.contains("steer"), "{}", e.message);
        let e = validate(
            &json!({"approvals": {"timeoutSec": "soon"}}),
            &["approvals"],
        )
        .unwrap_err();
        assert_eq!(e.path, "approvals.timeoutSec");
        let e = validate(&json!({"approvals": {"timeoutSec": 0}}), &["approvals"]).unwrap_err();
        assert_eq!(e.path, "approvals.timeoutSec");
        let e = validate(
            &json!({"scheduler": {"timeZone": "Mars/Base"}}),
            &["scheduler"],
        )
        .unwrap_err();
        assert_eq!(e.path, "scheduler.timeZone");
        let e = validate(&json!({"providers": {"openai": "sk"}}), &["providers"]).unwrap_err();
        assert_eq!(e.path, "providers.openai");
        for (doc, path) in [
            (json!({"team": {"workers": 17}}), "team.workers"),
            (
                json!({"team": {"maxConflictRetries": 11}}),
                "team.maxConflictRetries",
            ),
            (
                json!({"team": {"taskTimeoutSec": 0}}),
                "team.taskTimeoutSec",
            ),
        ] {
            assert_eq!(validate(&doc, &["team"]).unwrap_err().path, path);
        }
        validate(
            &json!({"team": {"workers": 16, "maxConflictRetries": 0}}),
            &["team"],
        )
        .unwrap();
        // Untouched sections are not checked; unknown keys pass.
        validate(&json!({"agent": {"busy": 3}, "zzz": {"a": [1]}}), &["zzz"]).unwrap();
        validate(&json!({"agent": {"busy": "queue", "x": {}}}), &["agent"]).unwrap();
    }
}
