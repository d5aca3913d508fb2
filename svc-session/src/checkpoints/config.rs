//! Checkpoint settings (`checkpoints.enabled`, `checkpoints.maxTurns`,
//! `checkpoints.maxBytes`), read from the effective settings of the workdir at each capture.
//! A missing or unusable value falls back to its default.

use std::path::Path;

use serde_json::Value;
use snowpea_common::home::Home;

/// Default of `checkpoints.maxTurns`: checkpoints kept per session.
pub const DEFAULT_MAX_TURNS: u64 = 100;
/// Default of `checkpoints.maxBytes`: blob bytes kept per session (500 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 500 << 20;

/// The checkpoint settings in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// False: nothing is captured and `checkpoint.list` is empty.
    pub enabled: bool,
    /// Most checkpoints kept per session; older ones are pruned first.
    pub max_turns: u64,
    /// Most blob bytes kept per session; older checkpoints are pruned first.
    pub max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            enabled: true,
            max_turns: DEFAULT_MAX_TURNS,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

impl Limits {
    /// The settings of `workdir` (global, then project), defaults where unset.
    pub fn load(home: &Home, workdir: &Path) -> Limits {
        let settings = snowpea_common::settings::load_effective(home, Some(workdir))
            .unwrap_or_else(|e| {
                tracing::warn!(error = %format!("{e:#}"), "settings unreadable; checkpoint defaults used");
                Value::Null
            });
        Self::from_settings(&settings)
    }

    /// The limits of a settings object.
    pub fn from_settings(settings: &Value) -> Limits {
        let get = |k: &str| snowpea_common::settings::get(settings, k);
        let d = Limits::default();
        Limits {
            enabled: get("checkpoints.enabled")
                .and_then(Value::as_bool)
                .unwrap_or(d.enabled),
            max_turns: get("checkpoints.maxTurns")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
                .unwrap_or(d.max_turns),
            max_bytes: get("checkpoints.maxBytes")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
                .unwrap_or(d.max_bytes),
        }
    }
}
