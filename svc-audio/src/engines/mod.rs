//! The speech engines (issue 7 "Engines"): text to speech — [`espeak`], [`piper`],
//! [`command`]; speech to text — [`pocketsphinx`], [`whisper`] (`local-whisper`),
//! [`command`]. Every engine runs as a watched child process ([`crate::child`]); this
//! module names them, normalises ids and dispatches one synthesis or transcription.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::AudioSettings;
use crate::detect::Detection;
use crate::error::{Error, Result};

pub mod command;
pub mod espeak;
pub mod piper;
pub mod pocketsphinx;
pub mod whisper;

/// Engine id of espeak-ng.
pub const ESPEAK: &str = "espeak-ng";
/// Engine id of piper.
pub const PIPER: &str = "piper";
/// Engine id of the user's command templates.
pub const COMMAND: &str = "command";
/// Engine id of pocketsphinx.
pub const POCKETSPHINX: &str = "pocketsphinx";
/// Engine id of a local whisper CLI.
pub const WHISPER: &str = "local-whisper";

/// The speech engine id for a name users may write, `None` when unknown.
pub fn normalize_tts(id: &str) -> Option<&'static str> {
    match id.trim().to_ascii_lowercase().as_str() {
        "espeak-ng" | "espeak" => Some(ESPEAK),
        "piper" | "piper-tts" => Some(PIPER),
        "command" => Some(COMMAND),
        _ => None,
    }
}

/// The transcription engine id for a name users may write, `None` when unknown.
pub fn normalize_stt(id: &str) -> Option<&'static str> {
    match id.trim().to_ascii_lowercase().as_str() {
        "pocketsphinx" => Some(POCKETSPHINX),
        "local-whisper" | "whisper" | "faster-whisper" => Some(WHISPER),
        "command" => Some(COMMAND),
        _ => None,
    }
}

/// Files svc-audio keeps under `$SNOWPEA_HOME/audio-runtime/`.
#[derive(Debug, Clone)]
pub struct Paths {
    root: PathBuf,
}

impl Paths {
    /// The runtime under `home`.
    pub fn new(home: &snowpea_common::home::Home) -> Self {
        Paths {
            root: home.root().join("audio-runtime"),
        }
    }
    /// `audio-runtime/`.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The Python virtual environment pip installs go to.
    pub fn venv(&self) -> PathBuf {
        self.root.join("venv")
    }
    /// A program in the venv's `bin/`.
    pub fn venv_bin(&self, name: &str) -> PathBuf {
        self.venv().join("bin").join(name)
    }
    /// True when the venv holds the importable package `name` (a file-system check).
    pub fn venv_has_package(&self, name: &str) -> bool {
        std::fs::read_dir(self.venv().join("lib")).is_ok_and(|d| {
            d.flatten().any(|e| {
                e.path()
                    .join("site-packages")
                    .join(name)
                    .join("__init__.py")
                    .exists()
            })
        })
    }
    /// Installed piper voices (`<id>.onnx` + `<id>.onnx.json`).
    pub fn piper_voices(&self) -> PathBuf {
        self.root.join("piper-voices")
    }
    /// Helper scripts svc-audio ships.
    pub fn helpers(&self) -> PathBuf {
        self.root.join("helpers")
    }
    /// Scratch files (converted audio), removed after each call.
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }
}

/// One synthesis request, resolved.
#[derive(Debug, Clone)]
pub struct SpeakJob<'a> {
    /// What to say.
    pub text: &'a str,
    /// Voice asked for (param), else `None`.
    pub voice: Option<&'a str>,
    /// BCP-47 language for voice selection.
    pub language: Option<&'a str>,
    /// Where the wav goes.
    pub out: &'a Path,
    /// Engine deadline.
    pub timeout: Duration,
}

/// Synthesises `job` with engine `id` (normalised and usable); returns the voice used.
pub async fn speak(
    id: &str,
    job: &SpeakJob<'_>,
    det: &Detection,
    s: &AudioSettings,
) -> Result<Option<String>> {
    let configured = job
        .voice
        .map(str::to_owned)
        .or_else(|| {
            job.language
                .and_then(|l| voice_for_language(&s.tts_voices, l))
        })
        .or_else(|| s.tts_voice.clone());
    match id {
        ESPEAK => {
            let bin = det
                .espeak
                .as_ref()
                .ok_or_else(|| Error::Internal("espeak-ng vanished".into()))?;
            // Whoever chose the voice hears about a voice espeak-ng lacks: the caller's
            // `voice` or `language` (invalid_params), else the settings (unavailable).
            let (voice, chosen_by) = match (job.voice, configured) {
                (Some(v), _) => (v.to_owned(), Some("params.voice")),
                (None, Some(v)) => (v, None),
                (None, None) => (espeak::default_voice(job.language), Some("params.language")),
            };
            match espeak::speak(bin, job.text, &voice, job.out, job.timeout).await {
                Ok(()) => Ok(Some(voice)),
                Err(espeak::SpeakError::Engine(e)) => Err(e),
                Err(espeak::SpeakError::NoSuchVoice) => Err(match chosen_by {
                    Some(field) => Error::invalid(
                        field,
                        format!("espeak-ng has no voice {voice:?}; audio.voices lists the ones it has"),
                    ),
                    None => Error::Off {
                        message: format!(
                            "espeak-ng has no voice {voice:?} (settings audio.tts); pick one audio.voices lists"
                        ),
                        reason: "no_voice",
                    },
                }),
            }
        }
        PIPER => {
            let bin = det
                .piper
                .as_ref()
                .ok_or_else(|| Error::Internal("piper vanished".into()))?;
            let voice = piper::pick_voice(&det.piper_voices, configured.as_deref(), job.language)?;
            piper::speak(bin, &voice.model, job.text, job.out, job.timeout).await?;
            Ok(Some(voice.id))
        }
        COMMAND => {
            let template = s
                .tts_command
                .as_deref()
                .ok_or_else(|| Error::Internal("audio.tts.command vanished".into()))?;
            command::speak(
                template,
                job.text,
                configured.as_deref(),
                job.out,
                job.timeout,
            )
            .await?;
            Ok(configured)
        }
        other => Err(Error::invalid(
            "params.provider",
            format!("unknown speech engine {other:?}"),
        )),
    }
}

/// `audio.tts.voices[lang]`, trying the full tag then its primary subtag.
fn voice_for_language(
    voices: &std::collections::BTreeMap<String, String>,
    lang: &str,
) -> Option<String> {
    let lang = lang.to_ascii_lowercase();
    voices
        .get(&lang)
        .or_else(|| voices.get(lang.split(['-', '_']).next().unwrap_or("")))
        .cloned()
}

/// Transcribes the 16 kHz mono 16-bit wav at `wav` with engine `id` (normalised and
/// usable).
pub async fn transcribe(
    id: &str,
    wav: &Path,
    language: Option<&str>,
    paths: &Paths,
    det: &Detection,
    s: &AudioSettings,
) -> Result<String> {
    let text = match id {
        POCKETSPHINX => {
            let python = det
                .pocketsphinx_python
                .as_ref()
                .ok_or_else(|| Error::Internal("pocketsphinx vanished".into()))?;
            if language.is_some_and(|l| !l.to_ascii_lowercase().starts_with("en")) {
                tracing::info!(
                    language,
                    "pocketsphinx has only its bundled English model; language ignored"
                );
            }
            pocketsphinx::transcribe(python, paths, wav, s.timeout).await?
        }
        WHISPER => {
            let bin = det
                .whisper
                .as_ref()
                .ok_or_else(|| Error::Internal("whisper vanished".into()))?;
            whisper::transcribe(bin, wav, language, paths, s.timeout).await?
        }
        COMMAND => {
            let template = s
                .stt_command
                .as_deref()
                .ok_or_else(|| Error::Internal("audio.stt.command vanished".into()))?;
            command::transcribe(template, wav, language, s.timeout).await?
        }
        other => {
            return Err(Error::invalid(
                "audio.stt.provider",
                format!("unknown transcription engine {other:?}"),
            ))
        }
    };
    Ok(text.split_whitespace().collect::<Vec<_>>().join(" "))
}
