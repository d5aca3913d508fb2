//! The recall settings svc-memory applies (`$SNOWPEA_HOME/settings.json`), read at start
//! and again whenever the settings owner announces a change of `memory`
//! ([`crate::App::follow_settings`]), so a change applies without a restart:
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `memory.searchLimit` | 10 | hits of `memory.search` when the call gives no `limit` (1 – 100) |
//!
//! A bad value or an unreadable file falls back to the default with one warning naming it.
//! (`memory.top_k` and `memory.enabled`, the recall of a turn, are applied by svc-session.)

use serde_json::Value;
use snowpea_common::home::Home;

use crate::memory::SEARCH_LIMIT;

/// What svc-memory reads from the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecallConfig {
    /// Default hit count of `memory.search`.
    pub search_limit: usize,
}

impl Default for RecallConfig {
    fn default() -> Self {
        RecallConfig {
            search_limit: SEARCH_LIMIT.0,
        }
    }
}

impl RecallConfig {
    /// Reads the settings document leniently; returns the config and the problems found.
    pub fn from_settings(settings: &Value) -> (RecallConfig, Vec<String>) {
        let mut warnings = Vec::new();
        let mut c = RecallConfig::default();
        match snowpea_common::settings::get(settings, "memory.searchLimit") {
            None | Some(Value::Null) => {}
            Some(v) => match v
                .as_u64()
                .filter(|n| (1..=SEARCH_LIMIT.1 as u64).contains(n))
            {
                Some(n) => c.search_limit = n as usize,
                None => warnings.push(format!(
                    "settings memory.searchLimit must be an integer from 1 to {}, got {v}; using {}",
                    SEARCH_LIMIT.1, SEARCH_LIMIT.0
                )),
            },
        }
        (c, warnings)
    }

    /// Reads `home`'s global settings, logging each problem as a warning.
    pub fn load(home: &Home) -> RecallConfig {
        let (c, warnings) = match snowpea_common::settings::load_file(&home.settings_path()) {
            Ok(s) => RecallConfig::from_settings(&s),
            Err(e) => (
                RecallConfig::default(),
                vec![format!(
                    "cannot read the settings ({e:#}); memory uses its defaults"
                )],
            ),
        };
        for w in warnings {
            tracing::warn!(problem = %w, "bad memory setting; using the default");
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn search_limit_is_read_and_bad_values_fall_back() {
        let (c, w) = RecallConfig::from_settings(&json!({"memory": {"searchLimit": 3}}));
        assert_eq!((c.search_limit, w.len()), (3, 0));
        for bad in [json!(0), json!(101), json!("5"), json!(-1)] {
            let (c, w) = RecallConfig::from_settings(&json!({"memory": {"searchLimit": bad}}));
            assert_eq!((c.search_limit, w.len()), (SEARCH_LIMIT.0, 1), "{bad}");
        }
    }
}

#[cfg(test)]
mod follow_tests {
    use snowpea_common::bus::BusHub;
    use snowpea_proto::rpc::v1::SettingsChange;

    #[tokio::test]
    async fn an_announced_memory_change_is_applied_and_others_are_ignored() {
        let t = tempfile::tempdir().unwrap();
        let home = snowpea_common::home::Home::new(t.path());
        home.ensure_dirs().unwrap();
        let app = crate::App::open(&home).unwrap();
        let hub = BusHub::new();
        let _follow = app.follow_settings(&hub);
        assert_eq!(app.recall().search_limit, 10);
        std::fs::write(home.settings_path(), r#"{"memory": {"searchLimit": 4}}"#).unwrap();
        let change = |k: &str| SettingsChange {
            scope: "global".into(),
            keys: vec![k.into()],
        };
        hub.settings_changed(change("scheduler"));
        hub.settings_changed(change("memory"));
        snowpea_testkit::assert_eventually!(app.recall().search_limit == 4);
    }
}
