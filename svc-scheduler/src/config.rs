//! The scheduler's settings (`$SNOWPEA_HOME/settings.json`, read when a job is created or
//! changed and at start-up):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `scheduler.timeZone` | the system zone | IANA zone times without an offset are read in |
//! | `scheduler.catchUpWindowMinutes` | 60 | default catch-up window of new jobs |
//! | `scheduler.hostWaitSec` | 300 | default wait for a job's `hostToolsFrom` host |
//! | `scheduler.runTimeoutSec` | 3600 | longest a run may take before it ends `failed` |
//! | `approvals.timeoutSec` | 300 | how long a run's approval waits before `denied_by_timeout` |

use jiff::tz::TimeZone;
use serde_json::Value;

use crate::spec::{self, SpecError};

/// Largest `sessionTemplate.hostWaitSec` (and `scheduler.hostWaitSec`): 7 days.
pub const MAX_HOST_WAIT_SEC: i64 = 7 * 24 * 3600;
/// Largest `sessionTemplate.catchUpWindowMinutes` (and `scheduler.catchUpWindowMinutes`): 1 year.
pub const MAX_CATCH_UP_WINDOW_MINUTES: i64 = 365 * 24 * 60;
/// Largest `scheduler.runTimeoutSec` and `approvals.timeoutSec` the scheduler uses: 30 days.
pub const MAX_TIMEOUT_SEC: i64 = 30 * 24 * 3600;

/// Settings the scheduler reads.
#[derive(Debug, Clone)]
pub struct Config {
    /// Zone times without an offset are read in.
    pub time_zone: TimeZone,
    /// Its IANA name (stored with each job), `UTC` when the zone has none.
    pub time_zone_name: String,
    /// Default catch-up window, minutes.
    pub catch_up_window_minutes: i64,
    /// Default host wait, seconds.
    pub host_wait_sec: i64,
    /// Longest run, seconds.
    pub run_timeout_sec: i64,
    /// Approval timeout of a run, seconds.
    pub approval_timeout_sec: i64,
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
        }
    }
}

impl Config {
    /// Reads the settings document; a bad time zone name is an error naming the setting.
    pub fn from_settings(settings: &Value) -> Result<Config, SpecError> {
        let get = |path: &str| snowpea_common::settings::get(settings, path);
        let int = |path: &str, default: i64, max: i64| {
            get(path)
                .and_then(Value::as_i64)
                .filter(|v| (0..=max).contains(v))
                .unwrap_or(default)
        };
        let time_zone = spec::time_zone(get("scheduler.timeZone").and_then(Value::as_str))?;
        let time_zone_name = time_zone.iana_name().unwrap_or("UTC").to_owned();
        let d = Config::default();
        Ok(Config {
            time_zone,
            time_zone_name,
            catch_up_window_minutes: int(
                "scheduler.catchUpWindowMinutes",
                d.catch_up_window_minutes,
                MAX_CATCH_UP_WINDOW_MINUTES,
            ),
            host_wait_sec: int("scheduler.hostWaitSec", d.host_wait_sec, MAX_HOST_WAIT_SEC),
            run_timeout_sec: int(
                "scheduler.runTimeoutSec",
                d.run_timeout_sec,
                MAX_TIMEOUT_SEC,
            )
            .max(1),
            approval_timeout_sec: int(
                "approvals.timeoutSec",
                d.approval_timeout_sec,
                MAX_TIMEOUT_SEC,
            ),
        })
    }

    /// Reads `$SNOWPEA_HOME/settings.json`.
    pub fn load(home: &snowpea_common::home::Home) -> anyhow::Result<Config> {
        let settings = snowpea_common::settings::load_file(&home.settings_path())?;
        Ok(Config::from_settings(&settings)?)
    }
}
