//! The `audio.*` settings of `$SNOWPEA_HOME/settings.json` (issue 7 "Settings"):
//! `audio.stt.{provider, language, command}`, `audio.tts.{provider, voice, voices, autoSpeak,
//! command}`, `audio.player`, `audio.recorder`, plus `audio.timeoutSec` (engine deadline,
//! an addition of this service). An unset provider means that direction is off.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use snowpea_common::home::Home;

/// Default deadline of one engine run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The audio settings in force.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AudioSettings {
    /// `audio.stt.provider`: pinned transcription engine; `None` = voice input is off.
    pub stt_provider: Option<String>,
    /// `audio.stt.language`: BCP-47 tag forced on the engine; `None` or `auto` = detect.
    pub stt_language: Option<String>,
    /// `audio.stt.command`: template of the `command` transcription engine (`{path}`).
    pub stt_command: Option<String>,
    /// `audio.tts.provider`: pinned speech engine; `None` = voice output is off.
    pub tts_provider: Option<String>,
    /// `audio.tts.voice`: default voice.
    pub tts_voice: Option<String>,
    /// `audio.tts.voices`: voice per language, e.g. `{"ko": "ko"}`.
    pub tts_voices: BTreeMap<String, String>,
    /// `audio.tts.autoSpeak`: speak every reply.
    pub auto_speak: bool,
    /// `audio.tts.command`: template of the `command` speech engine (`{text}`, `{out}`).
    pub tts_command: Option<String>,
    /// `audio.player`: player program or template with `{path}`.
    pub player: Option<String>,
    /// `audio.recorder`: recorder program or template with `{out}`.
    pub recorder: Option<String>,
    /// `audio.timeoutSec`: deadline of one engine run.
    pub timeout: Duration,
}

fn string(v: &Value, path: &str) -> Option<String> {
    snowpea_common::settings::get(v, path)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

impl AudioSettings {
    /// Reads the settings document (`{}` when missing; a malformed file is logged and
    /// treated as empty so audio keeps answering with "off" rather than failing).
    pub fn load(home: &Home) -> AudioSettings {
        match snowpea_common::settings::load_file(&home.settings_path()) {
            Ok(v) => AudioSettings::from_json(&v),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "settings unreadable; audio settings ignored");
                AudioSettings::from_json(&Value::Null)
            }
        }
    }

    /// Reads the `audio` section of a settings document.
    pub fn from_json(v: &Value) -> AudioSettings {
        let tts_voices = snowpea_common::settings::get(v, "audio.tts.voices")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.to_ascii_lowercase(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let timeout = snowpea_common::settings::get(v, "audio.timeoutSec")
            .and_then(Value::as_f64)
            .filter(|s| *s > 0.0)
            .map(Duration::from_secs_f64)
            .unwrap_or(DEFAULT_TIMEOUT);
        AudioSettings {
            stt_provider: string(v, "audio.stt.provider"),
            stt_language: string(v, "audio.stt.language"),
            stt_command: string(v, "audio.stt.command"),
            tts_provider: string(v, "audio.tts.provider"),
            tts_voice: string(v, "audio.tts.voice"),
            tts_voices,
            auto_speak: snowpea_common::settings::get(v, "audio.tts.autoSpeak")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            tts_command: string(v, "audio.tts.command"),
            player: string(v, "audio.player"),
            recorder: string(v, "audio.recorder"),
            timeout,
        }
    }

    /// The forced transcription language, `None` for `auto`.
    pub fn forced_language(&self) -> Option<&str> {
        self.stt_language
            .as_deref()
            .filter(|l| !l.eq_ignore_ascii_case("auto"))
    }
}

/// What identifies one version of the settings file (for the detection cache).
pub fn settings_stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unset_provider_is_off_and_fields_are_read() {
        let s = AudioSettings::from_json(&json!({"audio": {
            "tts": {"provider": "espeak-ng", "voices": {"KO": "ko"}, "autoSpeak": true},
            "stt": {"provider": " ", "language": "auto"},
            "timeoutSec": 2
        }}));
        assert_eq!(s.tts_provider.as_deref(), Some("espeak-ng"));
        assert_eq!(s.stt_provider, None, "blank provider is unset");
        assert_eq!(s.forced_language(), None);
        assert_eq!(s.tts_voices.get("ko").map(String::as_str), Some("ko"));
        assert!(s.auto_speak);
        assert_eq!(s.timeout, Duration::from_secs(2));
    }
}
