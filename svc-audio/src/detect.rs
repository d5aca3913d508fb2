//! Detection (`audio.capabilities`, issue 7 "Detection"): which engines, players,
//! recorders and audio devices this machine has. Fast — a PATH and file-system scan plus
//! one `find_spec` probe of the system Python; no engine is started — and cached by
//! [`crate::App`] until the settings file changes or an install finishes.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use snowpea_proto::audio::v1::AudioCapabilitiesResult;

use crate::config::AudioSettings;
use crate::engines::{self, piper, Paths};

/// Players looked for on PATH, preferred first.
pub const PLAYERS: &[&str] = &["aplay", "paplay", "ffplay", "play"];
/// Recorders looked for on PATH, preferred first.
pub const RECORDERS: &[&str] = &["arecord", "rec", "ffmpeg"];
/// Whisper CLIs looked for (the `local-whisper` engine), preferred first.
pub const WHISPER_CLIS: &[&str] = &["faster-whisper", "whisper-ctranslate2", "whisper"];

/// What is installed here.
#[derive(Debug, Clone, Default)]
pub struct Detection {
    /// `espeak-ng` binary.
    pub espeak: Option<PathBuf>,
    /// `piper` binary (the runtime venv's, else PATH).
    pub piper: Option<PathBuf>,
    /// Piper voices installed under the runtime.
    pub piper_voices: Vec<piper::InstalledVoice>,
    /// A Python that can `import pocketsphinx` (the runtime venv's, else the system's).
    pub pocketsphinx_python: Option<PathBuf>,
    /// A whisper CLI.
    pub whisper: Option<PathBuf>,
    /// `sox` (converts formats other than wav).
    pub sox: Option<PathBuf>,
    /// The system `python3` (creates the runtime venv).
    pub python: Option<PathBuf>,
    /// Players found on PATH, preferred first.
    pub players: Vec<String>,
    /// Recorders found on PATH, preferred first.
    pub recorders: Vec<String>,
    /// An audio output device or sound server exists.
    pub playback_device: bool,
    /// An audio capture device or sound server exists.
    pub capture_device: bool,
}

/// The full path of `name` on `PATH`, when it is an executable file there.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    which_in(name, &path)
}

fn which_in(name: &str, path: &OsString) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    std::env::split_paths(path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// True when the sound server socket or a `/dev/snd` PCM device of that direction
/// (`p` playback, `c` capture) exists.
fn device(direction: char) -> bool {
    if std::env::var_os("PULSE_SERVER").is_some() {
        return true;
    }
    if let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR") {
        let rt = PathBuf::from(rt);
        if rt.join("pulse/native").exists() || rt.join("pipewire-0").exists() {
            return true;
        }
    }
    std::fs::read_dir("/dev/snd").is_ok_and(|d| {
        d.flatten().any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("pcmC") && n.ends_with(direction)
        })
    })
}

/// Probes `python` for importable modules without importing them (`find_spec`).
async fn python_has(python: &Path, modules: &[&str]) -> Vec<bool> {
    let code = format!(
        "import importlib.util as u\nfor m in {modules:?}:\n    print(u.find_spec(m) is not None)"
    );
    let spec = crate::child::ChildSpec::new(
        "python3",
        python,
        vec!["-c".into(), code.into()],
        Duration::from_secs(10),
    );
    match crate::child::run(&spec, None).await {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim() == "True")
            .chain(std::iter::repeat(false))
            .take(modules.len())
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "python probe failed");
            vec![false; modules.len()]
        }
    }
}

/// Runs detection.
pub async fn detect(paths: &Paths) -> Detection {
    let venv_bin = |n: &str| Some(paths.venv_bin(n)).filter(|p| is_executable(p));
    let python = which("python3");
    let venv_python = venv_bin("python");
    let venv_has_ps = venv_python.is_some() && paths.venv_has_package("pocketsphinx");
    let pocketsphinx_python = if venv_has_ps {
        venv_python.clone()
    } else if let Some(py) = &python {
        python_has(py, &["pocketsphinx"]).await[0].then(|| py.clone())
    } else {
        None
    };
    let players = PLAYERS
        .iter()
        .filter(|p| which(p).is_some())
        .map(|s| s.to_string())
        .collect();
    let recorders = RECORDERS
        .iter()
        .filter(|p| which(p).is_some())
        .map(|s| s.to_string())
        .collect();
    Detection {
        espeak: which("espeak-ng"),
        piper: venv_bin("piper").or_else(|| which("piper")),
        piper_voices: piper::installed_voices(&paths.piper_voices()),
        pocketsphinx_python,
        whisper: WHISPER_CLIS
            .iter()
            .find_map(|n| venv_bin(n).or_else(|| which(n))),
        sox: which("sox"),
        python,
        players,
        recorders,
        playback_device: device('p'),
        capture_device: device('c'),
    }
}

/// Why an engine cannot run here, or `Ok` with nothing.
pub type Usable = Result<(), crate::error::Error>;

fn missing(message: String) -> crate::error::Error {
    crate::error::Error::Off {
        message,
        reason: "engine_missing",
    }
}

/// Whether the speech engine `id` (normalised) can run.
pub fn tts_usable(id: &str, det: &Detection, s: &AudioSettings) -> Usable {
    match id {
        engines::ESPEAK => det.espeak.as_ref().map(|_| ()).ok_or_else(|| {
            missing(format!(
                "espeak-ng is not installed; install it with `{}`",
                crate::install::system_install_hint("espeak-ng")
            ))
        }),
        engines::PIPER => {
            if det.piper.is_none() {
                return Err(missing(
                    "piper is not installed; run audio.install {engine: \"piper\"}".into(),
                ));
            }
            if det.piper_voices.is_empty() {
                return Err(crate::error::Error::Off {
                    message: format!(
                        "piper has no voice installed; run audio.install {{engine: \"piper\", voice: \"{}\"}}",
                        piper::DEFAULT_VOICE
                    ),
                    reason: "no_voice",
                });
            }
            Ok(())
        }
        engines::COMMAND => command_usable(s.tts_command.as_deref(), "audio.tts.command"),
        other => Err(crate::error::Error::invalid(
            "params.provider",
            format!("unknown speech engine {other:?}"),
        )),
    }
}

/// Whether the transcription engine `id` (normalised) can run.
pub fn stt_usable(id: &str, det: &Detection, s: &AudioSettings) -> Usable {
    match id {
        engines::POCKETSPHINX => det.pocketsphinx_python.as_ref().map(|_| ()).ok_or_else(|| {
            missing(
                "pocketsphinx is not installed; run audio.install {engine: \"pocketsphinx\"} \
                 (or `pip install pocketsphinx`)"
                    .into(),
            )
        }),
        engines::WHISPER => det.whisper.as_ref().map(|_| ()).ok_or_else(|| {
            missing(
                "no whisper CLI (faster-whisper, whisper-ctranslate2, whisper) on PATH; run \
                 audio.install {engine: \"faster-whisper\"}"
                    .into(),
            )
        }),
        engines::COMMAND => command_usable(s.stt_command.as_deref(), "audio.stt.command"),
        other => Err(crate::error::Error::invalid(
            "audio.stt.provider",
            format!("unknown transcription engine {other:?}"),
        )),
    }
}

fn command_usable(template: Option<&str>, key: &str) -> Usable {
    let Some(t) = template else {
        return Err(missing(format!("{key} is not set")));
    };
    let argv = engines::command::split(t).map_err(|e| missing(format!("{key}: {e}")))?;
    let program = &argv[0];
    if which(program).is_none() {
        return Err(missing(format!(
            "{key}: {program} is not found or not executable"
        )));
    }
    Ok(())
}

/// The player to use: `audio.player` when set, else the first found with a device.
pub fn player(det: &Detection, s: &AudioSettings) -> Result<String, String> {
    if let Some(p) = &s.player {
        return Ok(p.clone());
    }
    let Some(first) = det.players.first() else {
        return Err(format!("no audio player on PATH ({})", PLAYERS.join(", ")));
    };
    if !det.playback_device {
        return Err("no audio output device (no /dev/snd playback device and no PulseAudio/PipeWire server)".into());
    }
    Ok(first.clone())
}

/// The recorder to use: `audio.recorder` when set, else the first found with a device.
pub fn recorder(det: &Detection, s: &AudioSettings) -> Result<String, crate::error::Error> {
    if let Some(r) = &s.recorder {
        return Ok(r.clone());
    }
    let Some(first) = det.recorders.first() else {
        return Err(crate::error::Error::Off {
            message: format!("no recorder on PATH ({})", RECORDERS.join(", ")),
            reason: "no_recorder",
        });
    };
    if !det.capture_device {
        return Err(crate::error::Error::Off {
            message: "no audio input device (no /dev/snd capture device and no PulseAudio/PipeWire server)".into(),
            reason: "no_device",
        });
    }
    Ok(first.clone())
}

/// Builds the `audio.capabilities` result.
pub fn capabilities(det: &Detection, s: &AudioSettings) -> AudioCapabilitiesResult {
    let mut reasons = BTreeMap::new();
    let tts_providers: Vec<String> = [engines::PIPER, engines::ESPEAK, engines::COMMAND]
        .into_iter()
        .filter(|e| tts_usable(e, det, s).is_ok())
        .map(str::to_owned)
        .collect();
    let stt_providers: Vec<String> = [engines::WHISPER, engines::POCKETSPHINX, engines::COMMAND]
        .into_iter()
        .filter(|e| stt_usable(e, det, s).is_ok())
        .map(str::to_owned)
        .collect();

    let tts_pinned = s.tts_provider.as_deref().map(engines::normalize_tts);
    let tts_effective = match &tts_pinned {
        None => {
            reasons.insert(
                "tts".to_owned(),
                format!(
                    "voice output is off: audio.tts.provider is not set (usable here: {})",
                    list_or_none(&tts_providers)
                ),
            );
            None
        }
        Some(None) => {
            reasons.insert(
                "tts".to_owned(),
                format!(
                    "audio.tts.provider {:?} is not a known speech engine",
                    s.tts_provider.as_deref().unwrap_or("")
                ),
            );
            None
        }
        Some(Some(id)) => match tts_usable(id, det, s) {
            Ok(()) => Some(id.to_string()),
            Err(e) => {
                reasons.insert("tts".to_owned(), e.to_string());
                None
            }
        },
    };
    let stt_pinned = s.stt_provider.as_deref().map(engines::normalize_stt);
    let stt_effective = match &stt_pinned {
        None => {
            reasons.insert(
                "stt".to_owned(),
                format!(
                    "voice input is off: audio.stt.provider is not set (usable here: {})",
                    list_or_none(&stt_providers)
                ),
            );
            None
        }
        Some(None) => {
            reasons.insert(
                "stt".to_owned(),
                format!(
                    "audio.stt.provider {:?} is not a known transcription engine",
                    s.stt_provider.as_deref().unwrap_or("")
                ),
            );
            None
        }
        Some(Some(id)) => match stt_usable(id, det, s) {
            Ok(()) => Some(id.to_string()),
            Err(e) => {
                reasons.insert("stt".to_owned(), e.to_string());
                None
            }
        },
    };
    let play = match player(det, s) {
        Ok(_) => true,
        Err(r) => {
            reasons.insert("play".to_owned(), r);
            false
        }
    };
    let record = match recorder(det, s) {
        Ok(_) => true,
        Err(e) => {
            reasons.insert("record".to_owned(), e.to_string());
            false
        }
    };
    let auto_speak = s.auto_speak && tts_effective.is_some();
    if !auto_speak {
        reasons.insert(
            "autoSpeak".to_owned(),
            if s.auto_speak {
                "audio.tts.autoSpeak is on but voice output is off".to_owned()
            } else {
                "audio.tts.autoSpeak is off".to_owned()
            },
        );
    }
    let forced = s.forced_language();
    AudioCapabilitiesResult {
        auto_speak,
        play,
        players: det.players.clone(),
        reasons: reasons.into_iter().collect(),
        record,
        recorders: det.recorders.clone(),
        stt: stt_effective.clone(),
        stt_effective,
        stt_language: forced.unwrap_or("auto").to_owned(),
        stt_language_source: if forced.is_some() {
            "setting"
        } else {
            "detect"
        }
        .to_owned(),
        stt_pinned: stt_pinned.is_some(),
        stt_providers,
        tts: tts_effective.is_some(),
        tts_effective: tts_effective.clone(),
        tts_pinned: tts_pinned.is_some(),
        tts_provider: tts_effective,
        tts_providers,
        voice: s.tts_voice.clone(),
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
#[path = "detect_tests.rs"]
mod tests;
