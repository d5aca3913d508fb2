//! The scheduler's settings (`$SNOWPEA_HOME/settings.json`, read at start-up, when a job is
//! created or changed, and before each run):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `scheduler.timeZone` | the system zone | IANA zone times without an offset are read in |
//! | `scheduler.catchUpWindowMinutes` | 60 | default catch-up window of new jobs |
//! | `scheduler.hostWaitSec` | 300 | default wait for a job's `hostToolsFrom` host |
//! | `scheduler.runTimeoutSec` | 3600 | longest a run may take before it ends `failed` |
//! | `approvals.timeoutSec` | 300 | how long a run's approval waits before `denied_by_timeout` |
//! | `scheduler.keepRuns` | 100 | run sessions kept per job (older ones are deleted after each run); 0 keeps all |
//!
//! Settings never stop the scheduler: an unreadable `settings.json`, an unknown, empty or
//! non-string `scheduler.timeZone`, or a number of the wrong type or out of range is reported
//! as a warning naming the setting ([`Loaded::warnings`]) and that setting falls back to its
//! default (the zone to the system zone, then UTC).

use jiff::tz::TimeZone;
use serde_json::Value;

/// Largest `sessionTemplate.hostWaitSec` (and `scheduler.hostWaitSec`): 7 days.
pub const MAX_HOST_WAIT_SEC: i64 = 7 * 24 * 3600;
/// Largest `sessionTemplate.catchUpWindowMinutes` (and `scheduler.catchUpWindowMinutes`): 1 year.
pub const MAX_CATCH_UP_WINDOW_MINUTES: i64 = 365 * 24 * 60;
/// Largest `scheduler.runTimeoutSec` and `approvals.timeoutSec` the scheduler uses: 30 days.
pub const MAX_TIMEOUT_SEC: i64 = 30 * 24 * 3600;
/// Largest `scheduler.keepRuns`.
pub const MAX_KEEP_RUNS: i64 = 1_000_000;

/// Settings the scheduler reads.
#[derive(Debug, Clone)]
pub struct Config {
    /// Zone times without an offset are read in.
    pub time_zone: TimeZone,
    /// Its IANA name (stored with each job).
    pub time_zone_name: String,
    /// Default catch-up window, minutes.
    pub catch_up_window_minutes: i64,
    /// Default host wait, seconds.
    pub host_wait_sec: i64,
    /// Longest run, seconds.
    pub run_timeout_sec: i64,
    /// Approval timeout of a run, seconds.
    pub approval_timeout_sec: i64,
    /// Run sessions kept per job (0 = all).
    pub keep_runs: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            time_zone: TimeZone::UTC,
            time_zone_name: "UTC".into(),
            catch_up_window_minutes: 60,
            host_wait_sec: 300,
            run_timeout_sec: 3600,
            approval_timeout_sec: 300,
            keep_runs: 100,
        }
    }
}

/// Settings as read: the config, and what was wrong with them (each naming its setting).
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The config, every bad setting replaced by its default.
    pub config: Config,
    /// One line per bad setting, naming it and saying what is used instead.
    pub warnings: Vec<String>,
}

/// The system's zone when it has an IANA name (it is stored with each job by name), else UTC.
pub fn system_zone() -> (TimeZone, String) {
    match TimeZone::try_system() {
        Ok(tz) => match tz.iana_name().map(str::to_owned) {
            Some(name) => (tz, name),
            None => (TimeZone::UTC, "UTC".into()),
        },
        Err(_) => (TimeZone::UTC, "UTC".into()),
    }
}

/// `scheduler.timeZone`: an IANA name; anything else falls back to the system zone with a
/// warning.
fn zone_setting(value: Option<&Value>, warnings: &mut Vec<String>) -> (TimeZone, String) {
    let problem = match value {
        None | Some(Value::Null) => return system_zone(),
        Some(Value::String(name)) if name.trim().is_empty() => "is empty".to_owned(),
        Some(Value::String(name)) => match TimeZone::get(name.trim()) {
            Ok(tz) => {
                let stored = tz.iana_name().unwrap_or(name.trim()).to_owned();
                return (tz, stored);
            }
            Err(e) => format!(
                "{} is not a known IANA time zone ({e})",
                crate::spec::quote(name)
            ),
        },
        Some(other) => format!(
            "must be an IANA time zone name (a string), got {}",
            crate::spec::quote(&other.to_string())
        ),
    };
    let (tz, name) = system_zone();
    warnings.push(format!(
        "settings scheduler.timeZone {problem}; using the system zone {name}"
    ));
    (tz, name)
}

impl Config {
    /// Reads the settings document leniently (see the module docs).
    pub fn from_settings(settings: &Value) -> Loaded {
        let mut warnings = Vec::new();
        let get = |path: &str| snowpea_common::settings::get(settings, path);
        let d = Config::default();
        let mut int = |path: &str, default: i64, max: i64| match get(path) {
            None | Some(Value::Null) => default,
            Some(v) => match v.as_i64().filter(|v| (0..=max).contains(v)) {
                Some(v) => v,
                None => {
                    warnings.push(format!(
                        "settings {path} must be an integer from 0 to {max}, got {}; using {default}",
                        crate::spec::quote(&v.to_string())
                    ));
                    default
                }
            },
        };
        let catch_up_window_minutes = int(
            "scheduler.catchUpWindowMinutes",
            d.catch_up_window_minutes,
            MAX_CATCH_UP_WINDOW_MINUTES,
        );
        let host_wait_sec = int("scheduler.hostWaitSec", d.host_wait_sec, MAX_HOST_WAIT_SEC);
        let run_timeout_sec = int(
            "scheduler.runTimeoutSec",
            d.run_timeout_sec,
            MAX_TIMEOUT_SEC,
        )
        .max(1);
        let approval_timeout_sec = int(
            "approvals.timeoutSec",
            d.approval_timeout_sec,
            MAX_TIMEOUT_SEC,
        );
        let keep_runs = int("scheduler.keepRuns", d.keep_runs, MAX_KEEP_RUNS);
        let (time_zone, time_zone_name) = zone_setting(get("scheduler.timeZone"), &mut warnings);
        Loaded {
            config: Config {
                time_zone,
                time_zone_name,
                catch_up_window_minutes,
                host_wait_sec,
                run_timeout_sec,
                approval_timeout_sec,
                keep_runs,
            },
            warnings,
        }
    }

    /// Reads `settings_path` (`$SNOWPEA_HOME/settings.json`) leniently: a file that cannot be
    /// read or parsed gives the defaults and a warning.
    pub fn load(settings_path: &std::path::Path) -> Loaded {
        match snowpea_common::settings::load_file(settings_path) {
            Ok(settings) => Config::from_settings(&settings),
            Err(e) => {
                let mut loaded = Config::from_settings(&Value::Object(Default::default()));
                loaded.warnings.insert(
                    0,
                    format!("cannot read the settings ({e:#}); the scheduler uses its defaults"),
                );
                loaded
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn zone_warning(value: Value) -> (String, Vec<String>) {
        let l = Config::from_settings(&json!({ "scheduler": { "timeZone": value } }));
        (l.config.time_zone_name, l.warnings)
    }

    #[test]
    fn a_bad_time_zone_falls_back_to_the_system_zone_with_a_warning() {
        let (_, system) = system_zone();
        for bad in [json!("Mars/Olympus"), json!(42), json!(""), json!("  ")] {
            let (name, warnings) = zone_warning(bad.clone());
            assert_eq!(name, system, "{bad}");
            assert_eq!(warnings.len(), 1, "{bad}: {warnings:?}");
            assert!(
                warnings[0].starts_with("settings scheduler.timeZone "),
                "{}",
                warnings[0]
            );
        }
        assert!(zone_warning(json!("Mars/Olympus")).1[0].contains("\"Mars/Olympus\""));
        let (name, warnings) = zone_warning(json!("Asia/Seoul"));
        assert_eq!((name.as_str(), warnings.len()), ("Asia/Seoul", 0));
        let l = Config::from_settings(&json!({}));
        assert!(l.warnings.is_empty());
        assert_eq!(l.config.time_zone_name, system);
    }

    #[test]
    fn bad_numbers_fall_back_to_their_defaults_with_a_warning() {
        let l = Config::from_settings(&json!({
            "scheduler": {"hostWaitSec": 1_000_000_000_000_i64, "catchUpWindowMinutes": "soon",
                          "runTimeoutSec": -1},
            "approvals": {"timeoutSec": 30}
        }));
        let c = &l.config;
        assert_eq!(
            (
                c.host_wait_sec,
                c.catch_up_window_minutes,
                c.run_timeout_sec,
                c.approval_timeout_sec
            ),
            (300, 60, 3600, 30)
        );
        assert_eq!(l.warnings.len(), 3, "{:?}", l.warnings);
        assert!(l
            .warnings
            .iter()
            .any(|w| w.contains("scheduler.hostWaitSec")));
    }

    #[test]
    fn an_unreadable_settings_file_gives_the_defaults_and_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{ not json").unwrap();
        let l = Config::load(&path);
        assert_eq!(l.config.host_wait_sec, 300);
        assert_eq!(l.warnings.len(), 1);
        assert!(l.warnings[0].contains("settings"), "{}", l.warnings[0]);
        // A missing file is just the defaults.
        assert!(Config::load(&dir.path().join("none.json"))
            .warnings
            .is_empty());
    }
}
