//! Reading plugin hooks: `<plugin>/hooks/hooks.json` in Claude Code's layout
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/check.sh", "timeout": 10}]}]}}
//! ```
//!
//! (the `hooks` wrapper may be left out). Events other than [`HookEvent`]'s are ignored; a
//! hook of another `type` than `command`, an empty command or a bad matcher regex is
//! reported in [`Loaded::errors`] and skipped, never fatal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::HookEvent;

/// Timeout of a hook without `timeout`, seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Longest `timeout` a hook may ask for, seconds.
pub const MAX_TIMEOUT_SECS: u64 = 120;
/// Most hooks kept over all plugins (the rest are reported and skipped).
pub const MAX_HOOKS: usize = 200;

/// One hook command.
#[derive(Debug, Clone)]
pub struct HookDef {
    /// The plugin declaring it (its folder name).
    pub plugin: String,
    /// The plugin's folder (`${CLAUDE_PLUGIN_ROOT}`).
    pub root: PathBuf,
    /// When it runs.
    pub event: HookEvent,
    /// Which tools it applies to (tool events; `None` = every tool).
    pub matcher: Option<regex::Regex>,
    /// The program and its arguments (the plugin's `command` split shell-style, the plugin
    /// root substituted; never run through a shell).
    pub argv: Vec<String>,
    /// How long it may run.
    pub timeout: Duration,
}

/// What the plugins declare.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The usable hooks, plugin by plugin in name order, each in file order.
    pub hooks: Vec<HookDef>,
    /// `<plugin>: <why>` for every entry skipped.
    pub errors: Vec<String>,
}

/// Substitutes the plugin root and splits `command` into argv (no shell).
pub fn argv_of(command: &str, root: &Path) -> Result<Vec<String>, String> {
    let root = root.to_string_lossy();
    let expanded = command
        .replace("${CLAUDE_PLUGIN_ROOT}", &root)
        .replace("${SNOWPEA_PLUGIN_ROOT}", &root)
        .replace("$CLAUDE_PLUGIN_ROOT", &root);
    let argv = shlex::split(&expanded).ok_or("unbalanced quotes in the command")?;
    if argv.is_empty() {
        return Err("empty command".into());
    }
    Ok(argv)
}

/// The hooks of one plugin folder (a missing `hooks/hooks.json` declares none).
pub fn load_plugin(root: &Path, out: &mut Loaded) {
    let plugin = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let path = root.join("hooks").join("hooks.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            out.errors
                .push(format!("{plugin}: {}: {e}", path.display()));
            return;
        }
    };
    let doc: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            out.errors
                .push(format!("{plugin}: hooks/hooks.json is not JSON: {e}"));
            return;
        }
    };
    let events = doc.get("hooks").unwrap_or(&doc);
    let Some(events) = events.as_object() else {
        out.errors
            .push(format!("{plugin}: hooks/hooks.json must be an object"));
        return;
    };
    for (name, groups) in events {
        let Some(event) = HookEvent::parse(name) else {
            continue;
        };
        for group in groups.as_array().map(Vec::as_slice).unwrap_or_default() {
            let matcher = match group.get("matcher").and_then(Value::as_str) {
                None | Some("" | "*") => None,
                Some(m) => match regex::Regex::new(&format!("^(?:{m})$")) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        out.errors
                            .push(format!("{plugin}: {name} matcher {m:?}: {e}"));
                        continue;
                    }
                },
            };
            for h in group
                .get("hooks")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                if h.get("type").and_then(Value::as_str).unwrap_or("command") != "command" {
                    out.errors.push(format!(
                        "{plugin}: {name}: only hooks of type \"command\" run here"
                    ));
                    continue;
                }
                let command = h.get("command").and_then(Value::as_str).unwrap_or_default();
                let argv = match argv_of(command, root) {
                    Ok(a) => a,
                    Err(e) => {
                        out.errors.push(format!("{plugin}: {name}: {e}"));
                        continue;
                    }
                };
                if out.hooks.len() >= MAX_HOOKS {
                    out.errors
                        .push(format!("{plugin}: {name}: more than {MAX_HOOKS} hooks"));
                    continue;
                }
                let secs = h
                    .get("timeout")
                    .and_then(Value::as_f64)
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .map_or(DEFAULT_TIMEOUT_SECS as f64, |s| {
                        s.min(MAX_TIMEOUT_SECS as f64)
                    });
                out.hooks.push(HookDef {
                    plugin: plugin.clone(),
                    root: root.to_path_buf(),
                    event,
                    matcher: matcher.clone(),
                    argv,
                    timeout: Duration::from_secs_f64(secs),
                });
            }
        }
    }
}

/// The hooks of every installed plugin under `plugins_dir` (`$SNOWPEA_HOME/plugins`), in
/// plugin name order.
pub fn load(plugins_dir: &Path) -> Loaded {
    let mut out = Loaded::default();
    let Ok(dir) = std::fs::read_dir(plugins_dir) else {
        return out;
    };
    let mut roots: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
    roots.sort();
    for root in roots.iter().filter(|r| r.is_dir()) {
        load_plugin(root, &mut out);
    }
    out
}
