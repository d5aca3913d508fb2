//! piper (PyPI `piper-tts`, installed by `audio.install` into the runtime venv). Voices are
//! model files it must have locally (`audio-runtime/piper-voices/<id>.onnx` with its
//! `.onnx.json`); with none installed piper is reported unusable with the install call to
//! make. `piper --model <onnx> --output_file <out>` reads the text on stdin.

use std::path::{Path, PathBuf};
use std::time::Duration;

use snowpea_proto::audio::v1::audio_voices_result::Voice;

use crate::child::{run, ChildSpec};
use crate::error::{Error, Result};

/// The voice suggested when none is installed.
pub const DEFAULT_VOICE: &str = "en_US-lessac-medium";

/// Voices of the rhasspy/piper-voices catalogue offered for install: (id, gender).
pub const KNOWN_VOICES: &[(&str, &str)] = &[
    ("en_US-lessac-medium", "male"),
    ("en_US-amy-medium", "female"),
    ("en_US-ryan-high", "male"),
    ("en_GB-alan-medium", "male"),
    ("en_GB-jenny_dioco-medium", "female"),
    ("de_DE-thorsten-medium", "male"),
    ("fr_FR-siwis-medium", "female"),
    ("es_ES-davefx-medium", "male"),
    ("it_IT-riccardo-x_low", "male"),
    ("nl_NL-mls-medium", "female"),
    ("ru_RU-irina-medium", "female"),
    ("zh_CN-huayan-medium", "female"),
];

/// A voice model on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct InstalledVoice {
    /// Voice id, e.g. `en_US-lessac-medium`.
    pub id: String,
    /// The `.onnx` model.
    pub model: PathBuf,
    /// Size of the model in bytes.
    pub size: u64,
}

/// The BCP-47 tag of a voice id: `en_US-lessac-medium` → `en-US`.
pub fn language_of(id: &str) -> String {
    id.split('-').next().unwrap_or("").replace('_', "-")
}

/// Voices installed in `dir` (a model counts only with its `.onnx.json` config).
pub fn installed_voices(dir: &Path) -> Vec<InstalledVoice> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<InstalledVoice> = entries
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let id = path
                .file_name()?
                .to_str()?
                .strip_suffix(".onnx")?
                .to_owned();
            let config = dir.join(format!("{id}.onnx.json"));
            config.exists().then(|| InstalledVoice {
                size: e.metadata().map(|m| m.len()).unwrap_or(0),
                id,
                model: path,
            })
        })
        .collect();
    v.sort_by(|a, b| a.id.cmp(&b.id));
    v
}

/// The voice to use: the one asked for (must be installed), else one matching the
/// language, else the first installed.
pub fn pick_voice(
    installed: &[InstalledVoice],
    wanted: Option<&str>,
    language: Option<&str>,
) -> Result<InstalledVoice> {
    if let Some(w) = wanted {
        return installed.iter().find(|v| v.id == w).cloned().ok_or_else(|| Error::Off {
            message: format!("piper voice {w:?} is not installed; run audio.install {{engine: \"piper\", voice: \"{w}\"}}"),
            reason: "no_voice",
        });
    }
    let lang = language.map(|l| l.to_ascii_lowercase().replace('_', "-"));
    lang.as_deref()
        .and_then(|l| {
            installed
                .iter()
                .find(|v| language_of(&v.id).to_ascii_lowercase().starts_with(l.split('-').next().unwrap_or(l)))
        })
        .or_else(|| installed.first())
        .cloned()
        .ok_or_else(|| Error::Off {
            message: format!("piper has no voice installed; run audio.install {{engine: \"piper\", voice: \"{DEFAULT_VOICE}\"}}"),
            reason: "no_voice",
        })
}

/// Writes `text` spoken by the voice `model` to the wav `out`.
pub async fn speak(
    bin: &Path,
    model: &Path,
    text: &str,
    out: &Path,
    timeout: Duration,
) -> Result<()> {
    let mut spec = ChildSpec::new(
        super::PIPER,
        bin,
        vec![
            "--model".into(),
            model.into(),
            "--output_file".into(),
            out.into(),
        ],
        timeout,
    );
    spec.stdin = Some(text.as_bytes().to_vec());
    run(&spec, None).await?;
    Ok(())
}

/// Installed voices, then the known catalogue (not installed), for `audio.voices`.
pub fn voices(installed: &[InstalledVoice]) -> Vec<Voice> {
    let mut out: Vec<Voice> = installed
        .iter()
        .map(|v| Voice {
            gender: KNOWN_VOICES
                .iter()
                .find(|(id, _)| *id == v.id)
                .map(|(_, g)| g.to_string()),
            id: v.id.clone(),
            installed: true,
            label: label(&v.id),
            language: language_of(&v.id),
            sample: false,
            size_bytes: Some(v.size as i64),
        })
        .collect();
    for (id, gender) in KNOWN_VOICES {
        if !installed.iter().any(|v| v.id == *id) {
            out.push(Voice {
                gender: Some(gender.to_string()),
                id: id.to_string(),
                installed: false,
                label: label(id),
                language: language_of(id),
                sample: false,
                size_bytes: None,
            });
        }
    }
    out
}

fn label(id: &str) -> String {
    let mut parts = id.split('-');
    let lang = parts.next().unwrap_or("");
    let name = parts.next().unwrap_or(id);
    let quality = parts.next().unwrap_or("");
    format!("{name} ({lang}, {quality})")
}

/// Download URLs (model, config) of a catalogue voice id under `base`
/// (`https://huggingface.co/rhasspy/piper-voices/resolve/main`).
pub fn voice_urls(base: &str, id: &str) -> Option<(String, String)> {
    let mut parts = id.split('-');
    let locale = parts.next()?;
    let name = parts.next()?;
    let quality = parts.next()?;
    if parts.next().is_some() || !locale.contains('_') {
        return None;
    }
    let family = locale.split('_').next()?;
    let dir = format!("{base}/{family}/{locale}/{name}/{quality}/{id}");
    Some((format!("{dir}.onnx"), format!("{dir}.onnx.json")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installed_voices_need_their_config_and_are_picked_by_language() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("de_DE-thorsten-medium.onnx"), b"m").unwrap();
        std::fs::write(d.path().join("de_DE-thorsten-medium.onnx.json"), b"{}").unwrap();
        std::fs::write(d.path().join("en_US-amy-medium.onnx"), b"m").unwrap();
        let v = installed_voices(d.path());
        assert_eq!(v.len(), 1, "a model without config is not installed");
        assert_eq!(
            pick_voice(&v, None, Some("de")).unwrap().id,
            "de_DE-thorsten-medium"
        );
        let e = pick_voice(&v, Some("en_US-amy-medium"), None).unwrap_err();
        assert!(e.to_string().contains("audio.install"), "{e}");
        assert!(pick_voice(&[], None, None).is_err());
    }

    #[test]
    fn catalogue_urls() {
        let (m, c) = voice_urls("https://h/main", "en_US-lessac-medium").unwrap();
        assert_eq!(
            m,
            "https://h/main/en/en_US/lessac/medium/en_US-lessac-medium.onnx"
        );
        assert!(c.ends_with(".onnx.json"));
        assert!(voice_urls("https://h", "../etc").is_none());
    }
}
