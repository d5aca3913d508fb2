//! espeak-ng (Debian package `espeak-ng`): `espeak-ng -v <voice> -w <out.wav> --stdin` with
//! the text on stdin, and its real voice list from `espeak-ng --voices`.

use std::path::Path;
use std::time::Duration;

use snowpea_proto::audio::v1::audio_voices_result::Voice;

use crate::child::{run, ChildSpec};
use crate::error::Result;

/// The espeak-ng voice for a BCP-47 language: `en` → `en-us`, otherwise the tag itself
/// lower-cased (espeak-ng accepts `de`, `fr`, `pt-br`, `ko`, …).
pub fn default_voice(language: Option<&str>) -> String {
    match language.map(|l| l.trim().to_ascii_lowercase().replace('_', "-")) {
        None => "en-us".into(),
        Some(l) if l.is_empty() || l == "auto" || l == "en" => "en-us".into(),
        Some(l) => l,
    }
}

/// Writes `text` spoken with `voice` to the wav `out`. The text goes to stdin: never read
/// as an option, and not limited by the kernel's 128 KiB cap on one argument.
///
/// Errors: [`SpeakError::NoSuchVoice`] when espeak-ng does not know `voice`; any other
/// failure of the child as [`crate::error::Error`].
pub async fn speak(
    bin: &Path,
    text: &str,
    voice: &str,
    out: &Path,
    timeout: Duration,
) -> std::result::Result<(), SpeakError> {
    let mut spec = ChildSpec::new(
        super::ESPEAK,
        bin,
        vec![
            "-v".into(),
            voice.into(),
            "-w".into(),
            out.into(),
            "--stdin".into(),
        ],
        timeout,
    );
    spec.stdin = Some(text.as_bytes().to_vec());
    match run(&spec, None).await {
        Ok(_) => Ok(()),
        Err(e) if e.stderr().contains("voice does not exist") => Err(SpeakError::NoSuchVoice),
        Err(e) => Err(SpeakError::Engine(e.into())),
    }
}

/// How [`speak`] failed.
#[derive(Debug)]
pub enum SpeakError {
    /// espeak-ng has no voice of that name (`audio.voices` lists the ones it has).
    NoSuchVoice,
    /// The engine failed otherwise.
    Engine(crate::error::Error),
}

/// Every voice espeak-ng has (`espeak-ng --voices`).
pub async fn voices(bin: &Path, timeout: Duration) -> Result<Vec<Voice>> {
    let spec = ChildSpec::new(super::ESPEAK, bin, vec!["--voices".into()], timeout);
    let out = run(&spec, None).await?;
    Ok(parse_voices(&String::from_utf8_lossy(&out.stdout)))
}

/// Parses the `--voices` table: `Pty Language Age/Gender VoiceName File Other Languages`.
pub fn parse_voices(table: &str) -> Vec<Voice> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 5 {
                return None;
            }
            let gender = match cols[2].rsplit('/').next() {
                Some("M") => Some("male".to_owned()),
                Some("F") => Some("female".to_owned()),
                _ => None,
            };
            Some(Voice {
                gender,
                id: cols[1].to_owned(),
                installed: true,
                label: cols[3].replace('_', " "),
                language: cols[1].to_owned(),
                sample: false,
                size_bytes: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voice_table_parses() {
        let t = "Pty Language       Age/Gender VoiceName          File                 Other Languages\n \
                 5  af              --/M      Afrikaans          gmw/af\n \
                 2  en-us           --/M      English_(America)  gmw/en-US            (en 3)\n";
        let v = parse_voices(t);
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].id, "en-us");
        assert_eq!(v[1].label, "English (America)");
        assert_eq!(v[1].gender.as_deref(), Some("male"));
    }

    #[test]
    fn default_voice_follows_language() {
        assert_eq!(default_voice(None), "en-us");
        assert_eq!(default_voice(Some("en")), "en-us");
        assert_eq!(default_voice(Some("pt_BR")), "pt-br");
    }
}
