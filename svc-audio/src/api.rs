//! [`AudioApi`]: the logic of `audio.capabilities`, `audio.voices`, `audio.speak`,
//! `audio.transcribe`, `audio.record.start`, `audio.record.stop`, `audio.install`
//! (spec "audio.*", issue 7); `rpc/audio.rs` only implements the generated trait over it.
//!
//! An unset `audio.tts.provider` / `audio.stt.provider` means that direction is off:
//! there is no fallback to another engine (`unavailable`, `details.reason:
//! "not_pinned"`); `audio.speak{provider}` names an engine for one call.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use snowpea_common::ids::new_id;
use snowpea_proto::audio::v1::{
    AudioCapabilitiesResult, AudioInstallParams, AudioInstallResult, AudioRecordStartParams,
    AudioRecordStartResult, AudioRecordStopParams, AudioRecordStopResult, AudioSpeakParams,
    AudioSpeakResult, AudioTranscribeParams, AudioTranscribeResult, AudioVoicesParams,
    AudioVoicesResult,
};

use crate::config::AudioSettings;
use crate::detect::{self, Detection};
use crate::engines::{self, SpeakJob};
use crate::error::{Error, Result};
use crate::{convert, install, App};

/// Media type of everything svc-audio writes.
pub const WAV_MIME: &str = "audio/wav";

/// The `audio.*` logic over the service state; one method per JSON-RPC method.
#[derive(Debug, Clone)]
pub struct AudioApi {
    app: Arc<App>,
}

impl AudioApi {
    /// The logic over `app`.
    pub fn new(app: Arc<App>) -> Self {
        AudioApi { app }
    }

    /// `audio.capabilities`: what is detected and pinned.
    pub async fn capabilities(&self) -> AudioCapabilitiesResult {
        let (s, det) = self.app.state().await;
        detect::capabilities(&det, &s)
    }

    /// `audio.voices`.
    pub async fn voices(&self, p: AudioVoicesParams) -> Result<AudioVoicesResult> {
        voices(&self.app, p).await
    }

    /// `audio.speak`.
    pub async fn speak(&self, p: AudioSpeakParams) -> Result<AudioSpeakResult> {
        speak(&self.app, p).await
    }

    /// `audio.transcribe`.
    pub async fn transcribe(&self, p: AudioTranscribeParams) -> Result<AudioTranscribeResult> {
        transcribe(&self.app, p).await
    }

    /// `audio.record.start`.
    pub async fn record_start(&self, p: AudioRecordStartParams) -> Result<AudioRecordStartResult> {
        record_start(&self.app, p).await
    }

    /// `audio.record.stop`.
    pub async fn record_stop(&self, p: AudioRecordStopParams) -> Result<AudioRecordStopResult> {
        record_stop(&self.app, p).await
    }

    /// `audio.install`.
    pub async fn install(&self, p: AudioInstallParams) -> Result<AudioInstallResult> {
        install::install(&self.app, p).await
    }
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// The pinned (or per-call) speech engine, usable, or why not.
fn tts_engine(
    provider: Option<String>,
    det: &Detection,
    s: &AudioSettings,
) -> Result<&'static str> {
    let id = match nonempty(provider) {
        Some(name) => engines::normalize_tts(&name).ok_or_else(|| {
            Error::invalid("params.provider", format!("unknown speech engine {name:?} (espeak-ng, piper, command)"))
        })?,
        None => match &s.tts_provider {
            None => {
                return Err(Error::Off {
                    message: "voice output is off: audio.tts.provider is not set (or pass provider for one call)".into(),
                    reason: "not_pinned",
                })
            }
            Some(name) => engines::normalize_tts(name).ok_or_else(|| Error::Off {
                message: format!("audio.tts.provider {name:?} is not a known speech engine (espeak-ng, piper, command)"),
                reason: "engine_missing",
            })?,
        },
    };
    detect::tts_usable(id, det, s)?;
    Ok(id)
}

/// The pinned transcription engine, usable, or why not.
fn stt_engine(det: &Detection, s: &AudioSettings) -> Result<&'static str> {
    let id = match &s.stt_provider {
        None => {
            return Err(Error::Off {
                message: "voice input is off: audio.stt.provider is not set".into(),
                reason: "not_pinned",
            })
        }
        Some(name) => engines::normalize_stt(name).ok_or_else(|| Error::Off {
            message: format!(
                "audio.stt.provider {name:?} is not a known transcription engine (pocketsphinx, local-whisper, command)"
            ),
            reason: "engine_missing",
        })?,
    };
    detect::stt_usable(id, det, s)?;
    Ok(id)
}

fn wav_length(path: &Path) -> Duration {
    hound::WavReader::open(path)
        .map(|r| Duration::from_secs_f64(r.duration() as f64 / r.spec().sample_rate.max(1) as f64))
        .unwrap_or_default()
}

/// Longest `audio.speak` text, in characters (about 20 minutes of speech; espeak-ng writes
/// some 2 KB of wav per character).
pub const MAX_SPEAK_CHARS: usize = 20_000;

/// `audio.speak`.
async fn speak(app: &App, p: AudioSpeakParams) -> Result<AudioSpeakResult> {
    let text = p.text.trim();
    if text.is_empty() {
        return Err(Error::invalid("params.text", "nothing to say"));
    }
    let chars = text.chars().count();
    if chars > MAX_SPEAK_CHARS {
        return Err(Error::invalid(
            "params.text",
            format!(
                "at most {MAX_SPEAK_CHARS} characters per call (got {chars}); split longer text"
            ),
        ));
    }
    let (s, det) = app.state().await;
    let engine = tts_engine(p.provider, &det, &s)?;
    let out = app
        .out_dir(p.session_id.as_deref())?
        .join(format!("{}.wav", new_id("speech")));
    let language = nonempty(p.language).or_else(|| s.forced_language().map(str::to_owned));
    let voice = nonempty(p.voice);
    let job = SpeakJob {
        text,
        voice: voice.as_deref(),
        language: language.as_deref(),
        out: &out,
        timeout: s.timeout,
    };
    let voice = match engines::speak(engine, &job, &det, &s).await {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::remove_file(&out);
            return Err(e);
        }
    };
    if hound::WavReader::open(&out).is_err() {
        let _ = std::fs::remove_file(&out);
        return Err(Error::Engine {
            engine: engine.into(),
            reason: "failed",
            message: format!("{engine} finished without writing a wav file"),
            pid: None,
            stderr: String::new(),
        });
    }
    let mut played = false;
    if p.play {
        match detect::player(&det, &s) {
            Ok(player) => match crate::record::play(&player, &out, wav_length(&out)).await {
                Ok(()) => played = true,
                Err(e) => tracing::warn!(error = %e, "playing the speech failed"),
            },
            Err(why) => tracing::info!(reason = %why, "cannot play here; returning the file only"),
        }
    }
    Ok(AudioSpeakResult {
        mime: WAV_MIME.into(),
        path: out.to_string_lossy().into_owned(),
        played,
        provider: engine.into(),
        voice,
    })
}

/// Audio bytes of a transcribe call: exactly one of `path` and `data`.
fn input_bytes(p: &AudioTranscribeParams) -> Result<(Vec<u8>, Option<String>, &'static str)> {
    match (nonempty(p.path.clone()), nonempty(p.data.clone())) {
        (Some(_), Some(_)) => Err(Error::invalid("params.path", "give path or data, not both")),
        (None, None) => Err(Error::invalid(
            "params.path",
            "give the audio as path or data",
        )),
        (Some(path), None) => {
            let path = PathBuf::from(path);
            if !path.is_absolute() {
                return Err(Error::invalid("params.path", "must be an absolute path"));
            }
            let meta = std::fs::metadata(&path).map_err(|e| {
                Error::invalid(
                    "params.path",
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            if meta.len() as usize > convert::MAX_BYTES {
                return Err(Error::invalid(
                    "params.path",
                    format!("the audio is larger than {} bytes", convert::MAX_BYTES),
                ));
            }
            let bytes = std::fs::read(&path).map_err(|e| {
                Error::invalid(
                    "params.path",
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            Ok((bytes, None, "params.path"))
        }
        (None, Some(data)) => {
            let (bytes, mime) = convert::decode_data(&data)?;
            Ok((bytes, mime, "params.data"))
        }
    }
}

/// Transcribes audio at `bytes` with the pinned engine; returns (text, provider).
async fn transcribe_bytes(
    app: &App,
    bytes: &[u8],
    mime: Option<&str>,
    field: &str,
    language: Option<String>,
) -> Result<(String, &'static str)> {
    let (s, det) = app.state().await;
    let engine = stt_engine(&det, &s)?;
    let scratch = app.paths.tmp();
    std::fs::create_dir_all(&scratch)?;
    let wav = scratch.join(format!("{}.wav", new_id("stt")));
    let converted =
        convert::to_target(bytes, mime, field, det.sox.as_deref(), &scratch, &wav).await;
    let result = match converted {
        Ok(()) => {
            let language = language.or_else(|| s.forced_language().map(str::to_owned));
            engines::transcribe(engine, &wav, language.as_deref(), &app.paths, &det, &s).await
        }
        Err(e) => Err(e),
    };
    let _ = std::fs::remove_file(&wav);
    Ok((result?, engine))
}

/// `audio.transcribe`.
async fn transcribe(app: &App, p: AudioTranscribeParams) -> Result<AudioTranscribeResult> {
    let (bytes, uri_mime, field) = input_bytes(&p)?;
    let mime = nonempty(p.mime.clone()).or(uri_mime);
    if let Some(m) = &mime {
        if !m.starts_with("audio/") && m != "application/octet-stream" {
            return Err(Error::invalid(
                "params.mime",
                format!("{m} is not an audio media type"),
            ));
        }
    }
    let (text, provider) =
        transcribe_bytes(app, &bytes, mime.as_deref(), field, nonempty(p.language)).await?;
    Ok(AudioTranscribeResult {
        provider: provider.into(),
        text,
    })
}

/// `audio.voices`.
async fn voices(app: &App, p: AudioVoicesParams) -> Result<AudioVoicesResult> {
    let engine = engines::normalize_tts(&p.engine).ok_or_else(|| {
        Error::invalid(
            "params.engine",
            format!(
                "unknown speech engine {:?} (espeak-ng, piper, command)",
                p.engine
            ),
        )
    })?;
    let (s, det) = app.state().await;
    let mut voices = match engine {
        engines::ESPEAK => {
            let bin = det.espeak.clone().ok_or_else(|| Error::Off {
                message: format!(
                    "espeak-ng is not installed; install it with `{}`",
                    install::system_install_hint("espeak-ng")
                ),
                reason: "engine_missing",
            })?;
            let all = app.espeak_voices(&bin, s.timeout).await?;
            let mut wanted: Vec<String> = p.languages.iter().map(|l| primary(l)).collect();
            if wanted.is_empty() {
                wanted = vec!["ko".into(), "en".into()];
                if let Some(l) = s.forced_language() {
                    wanted.push(primary(l));
                }
            }
            all.into_iter()
                .filter(|v| wanted.contains(&primary(&v.language)))
                .collect()
        }
        engines::PIPER => engines::piper::voices(&det.piper_voices),
        _ => s
            .tts_voice
            .iter()
            .map(|v| snowpea_proto::audio::v1::audio_voices_result::Voice {
                id: v.clone(),
                label: v.clone(),
                installed: true,
                ..Default::default()
            })
            .collect(),
    };
    voices.sort_by(|a, b| {
        b.installed
            .cmp(&a.installed)
            .then_with(|| a.language.cmp(&b.language))
            .then_with(|| a.id.cmp(&b.id))
    });
    Ok(AudioVoicesResult { voices })
}

fn primary(tag: &str) -> String {
    tag.split(['-', '_'])
        .next()
        .unwrap_or(tag)
        .to_ascii_lowercase()
}

fn session_key(session_id: &Option<String>) -> String {
    session_id.clone().unwrap_or_default()
}

/// `audio.record.start`.
async fn record_start(app: &App, p: AudioRecordStartParams) -> Result<AudioRecordStartResult> {
    let (s, det) = app.state().await;
    let recorder = detect::recorder(&det, &s)?;
    let out = app
        .out_dir(p.session_id.as_deref())?
        .join(format!("{}.wav", new_id("recording")));
    let (path, _) = app
        .recordings
        .start(&session_key(&p.session_id), &recorder, out)
        .await?;
    Ok(AudioRecordStartResult {
        mime: WAV_MIME.into(),
        path: path.to_string_lossy().into_owned(),
        provider: None,
        recording: true,
        text: None,
    })
}

/// `audio.record.stop`.
async fn record_stop(app: &App, p: AudioRecordStopParams) -> Result<AudioRecordStopResult> {
    let path = app.recordings.stop(&session_key(&p.session_id)).await?;
    let (mut text, mut provider) = (None, None);
    if p.transcribe {
        let bytes = std::fs::read(&path)?;
        let (t, engine) =
            transcribe_bytes(app, &bytes, Some(WAV_MIME), "params.transcribe", None).await?;
        text = Some(t);
        provider = Some(engine.to_owned());
    }
    Ok(AudioRecordStopResult {
        mime: WAV_MIME.into(),
        path: path.to_string_lossy().into_owned(),
        provider,
        recording: false,
        text,
    })
}
