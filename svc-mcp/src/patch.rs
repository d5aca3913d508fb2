//! The patch of `mcp.update` (spec: "Keys to change; anything absent is kept"), with a way
//! to clear a field (issue 6: a leaked env secret must be removable through the API).
//!
//! Each field of the patch is [`Change::Keep`] (absent), [`Change::Set`] or
//! [`Change::Clear`] (the key is removed from the entry):
//! * an explicit empty object/array or `null` clears `env`, `headers`, `args`,
//!   `toolsInclude`, `toolsExclude`, and `null` clears any other field (`cwd`, `type`,
//!   `timeoutSec`, `toolTimeoutSec`, `disabled`, `permission` back to the default);
//! * an empty string clears `cwd`, `type`, `command` or `url`.
//!
//! On the wire (protobuf) an empty map or list, and a JSON `null`, are indistinguishable from
//! an absent field. Their presence travels beside the message: the gateway lists the params
//! the client sent as `null`, `{}` or `[]` in the request metadata [`CLEARED_FIELDS`], as
//! comma-separated JSON paths (`patch.env,patch.toolsInclude`; camelCase or snake_case, so
//! a grpcurl caller can send it too).

use std::collections::{HashMap, HashSet};

use indexmap::IndexMap;
use snowpea_proto::mcp::v1::McpServerDraft as Patch;
use tonic::metadata::MetadataMap;

use crate::config::{ServerEntry, ToolsFilter};

/// Request metadata listing the params sent as `null`, `{}` or `[]` (comma-separated JSON
/// paths, e.g. `patch.env,patch.args`), which the gateway fills in.
pub const CLEARED_FIELDS: &str = snowpea_proto::json::CLEARED_FIELDS_KEY;

/// What a patch does to one field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Change<T> {
    /// Absent: the field is kept.
    #[default]
    Keep,
    /// `null`, `{}`, `[]` (or `""` for a string): the field is removed.
    Clear,
    /// The new value.
    Set(T),
}

impl<T> Change<T> {
    /// Applies the change to `field`.
    pub fn apply_to(self, field: &mut Option<T>) {
        match self {
            Change::Keep => {}
            Change::Clear => *field = None,
            Change::Set(v) => *field = Some(v),
        }
    }

    fn is_keep(&self) -> bool {
        matches!(self, Change::Keep)
    }
}

/// The patch of one `mcp.update`, field by field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryPatch {
    /// `type`.
    pub kind: Change<String>,
    /// `command` (setting it drops `url` and `headers`).
    pub command: Change<String>,
    /// `url` (setting it drops `command`, `args`, `env` and `cwd`).
    pub url: Change<String>,
    /// `args`.
    pub args: Change<Vec<String>>,
    /// `env`.
    pub env: Change<IndexMap<String, String>>,
    /// `cwd`.
    pub cwd: Change<String>,
    /// `headers`.
    pub headers: Change<IndexMap<String, String>>,
    /// `disabled`.
    pub disabled: Change<bool>,
    /// `timeoutSec`.
    pub timeout_sec: Change<i64>,
    /// `toolTimeoutSec`.
    pub tool_timeout_sec: Change<i64>,
    /// `toolsInclude`.
    pub tools_include: Change<Vec<String>>,
    /// `toolsExclude`.
    pub tools_exclude: Change<Vec<String>>,
    /// `permission` (cleared: back to the default).
    pub permission: Change<String>,
}

/// The camelCase names under `patch.` listed in [`CLEARED_FIELDS`].
pub fn cleared_fields(md: &MetadataMap) -> HashSet<String> {
    md.get_all(CLEARED_FIELDS)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|p| p.trim().strip_prefix("patch."))
        .map(camel)
        .collect()
}

fn camel(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut upper = false;
    for c in s.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn sorted(m: HashMap<String, String>) -> IndexMap<String, String> {
    let mut pairs: Vec<(String, String)> = m.into_iter().collect();
    pairs.sort();
    pairs.into_iter().collect()
}

impl EntryPatch {
    /// The patch from the protobuf message and the names the client sent as `null`/`{}`/`[]`
    /// ([`cleared_fields`]).
    pub fn from_proto(p: Patch, cleared: &HashSet<String>) -> EntryPatch {
        let is_cleared = |name: &str| cleared.contains(name);
        let list = |v: Vec<String>, name: &str| -> Change<Vec<String>> {
            if !v.is_empty() {
                Change::Set(v)
            } else if is_cleared(name) {
                Change::Clear
            } else {
                Change::Keep
            }
        };
        let map = |m: HashMap<String, String>, name: &str| {
            if !m.is_empty() {
                Change::Set(sorted(m))
            } else if is_cleared(name) {
                Change::Clear
            } else {
                Change::Keep
            }
        };
        fn scalar<T>(v: Option<T>, cleared: bool) -> Change<T> {
            match v {
                Some(v) => Change::Set(v),
                None if cleared => Change::Clear,
                None => Change::Keep,
            }
        }
        let string = |v: Option<String>, name: &str| match v {
            Some(s) if s.is_empty() => Change::Clear,
            v => scalar(v, is_cleared(name)),
        };
        EntryPatch {
            kind: string(p.r#type, "type"),
            command: string(p.command, "command"),
            url: string(p.url, "url"),
            args: list(p.args, "args"),
            env: map(p.env, "env"),
            cwd: string(p.cwd, "cwd"),
            headers: map(p.headers, "headers"),
            disabled: scalar(p.disabled, is_cleared("disabled")),
            timeout_sec: scalar(p.timeout_sec, is_cleared("timeoutSec")),
            tool_timeout_sec: scalar(p.tool_timeout_sec, is_cleared("toolTimeoutSec")),
            tools_include: list(p.tools_include, "toolsInclude"),
            tools_exclude: list(p.tools_exclude, "toolsExclude"),
            permission: scalar(p.permission, is_cleared("permission")),
        }
    }

    /// `entry` with the patch applied (the permission is not part of the entry).
    pub fn apply(self, mut entry: ServerEntry) -> ServerEntry {
        self.kind.apply_to(&mut entry.kind);
        // A new command makes it a stdio server, a new url a remote one: the other
        // transport's fields go.
        if let Change::Set(_) = &self.command {
            entry.url = None;
            entry.headers = None;
        }
        self.command.apply_to(&mut entry.command);
        if let Change::Set(_) = &self.url {
            entry.command = None;
            entry.args = None;
            entry.env = None;
            entry.cwd = None;
        }
        self.url.apply_to(&mut entry.url);
        self.args.apply_to(&mut entry.args);
        self.env.apply_to(&mut entry.env);
        self.cwd.apply_to(&mut entry.cwd);
        self.headers.apply_to(&mut entry.headers);
        self.disabled.apply_to(&mut entry.disabled);
        self.timeout_sec.apply_to(&mut entry.timeout_sec);
        self.tool_timeout_sec.apply_to(&mut entry.tool_timeout_sec);
        if !self.tools_include.is_keep() || !self.tools_exclude.is_keep() {
            let mut filter = entry.tools.take().unwrap_or_default();
            self.tools_include.apply_to(&mut filter.include);
            self.tools_exclude.apply_to(&mut filter.exclude);
            entry.tools = (filter != ToolsFilter::default()).then_some(filter);
        }
        entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(v: serde_json::Value) -> ServerEntry {
        serde_json::from_value(v).unwrap()
    }

    fn names(s: &[&str]) -> HashSet<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    fn full() -> ServerEntry {
        entry(json!({
            "command": "node", "args": ["s.js"], "env": {"TOKEN": "leaked"}, "cwd": "sub",
            "timeoutSec": 5, "toolTimeoutSec": 9, "disabled": true,
            "tools": {"include": ["a"], "exclude": ["b"]}
        }))
    }

    #[test]
    fn absent_keeps_and_empty_without_presence_keeps() {
        let p = EntryPatch::from_proto(Patch::default(), &HashSet::new());
        assert_eq!(p, EntryPatch::default());
        assert_eq!(p.apply(full()), full());
    }

    /// (cleared names, what the entry looks like after)
    #[test]
    fn null_or_empty_clears_the_field() {
        let table: &[(&[&str], serde_json::Value)] = &[
            (
                &["env"],
                json!({"command": "node", "args": ["s.js"], "cwd": "sub", "timeoutSec": 5,
                       "toolTimeoutSec": 9, "disabled": true,
                       "tools": {"include": ["a"], "exclude": ["b"]}}),
            ),
            (
                &["args", "toolsInclude", "toolsExclude"],
                json!({"command": "node", "env": {"TOKEN": "leaked"}, "cwd": "sub",
                       "timeoutSec": 5, "toolTimeoutSec": 9, "disabled": true}),
            ),
            (
                &[
                    "cwd",
                    "timeoutSec",
                    "toolTimeoutSec",
                    "disabled",
                    "toolsInclude",
                ],
                json!({"command": "node", "args": ["s.js"], "env": {"TOKEN": "leaked"},
                       "tools": {"exclude": ["b"]}}),
            ),
        ];
        for (cleared, after) in table {
            let p = EntryPatch::from_proto(Patch::default(), &names(cleared));
            assert_eq!(p.apply(full()), entry(after.clone()), "{cleared:?}");
        }
    }

    #[test]
    fn a_value_wins_over_presence_and_empty_strings_clear() {
        let p = EntryPatch::from_proto(
            Patch {
                env: [("NEW".to_string(), "v".to_string())].into_iter().collect(),
                cwd: Some(String::new()),
                ..Default::default()
            },
            &names(&["env"]),
        );
        let after = p.apply(full());
        assert_eq!(after.env_keys(), vec!["NEW".to_string()]);
        assert_eq!(after.cwd, None);
    }

    #[test]
    fn switching_transport_drops_the_other_transports_fields() {
        let p = EntryPatch::from_proto(
            Patch {
                url: Some("https://x.example/mcp".into()),
                ..Default::default()
            },
            &HashSet::new(),
        );
        let after = p.apply(full());
        assert_eq!(after.command, None);
        assert_eq!(after.env, None);
        assert_eq!(after.args, None);
        assert_eq!(after.url.as_deref(), Some("https://x.example/mcp"));
    }

    #[test]
    fn cleared_fields_come_from_metadata_in_either_spelling() {
        let mut md = MetadataMap::new();
        md.insert(
            CLEARED_FIELDS,
            "patch.env, patch.tools_include,workdir".parse().unwrap(),
        );
        md.append(CLEARED_FIELDS, "patch.toolTimeoutSec".parse().unwrap());
        assert_eq!(
            cleared_fields(&md),
            names(&["env", "toolsInclude", "toolTimeoutSec"])
        );
    }
}
