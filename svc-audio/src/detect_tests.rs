use super::*;
use serde_json::json;

fn det() -> Detection {
    Detection {
        espeak: Some("/usr/bin/espeak-ng".into()),
        pocketsphinx_python: Some("/usr/bin/python3".into()),
        players: vec!["aplay".into()],
        recorders: vec!["arecord".into()],
        ..Default::default()
    }
}

#[test]
fn nothing_pinned_means_off_with_reasons_and_no_fallback() {
    let c = capabilities(&det(), &AudioSettings::from_json(&json!({})));
    assert!(!c.tts && !c.tts_pinned && c.tts_effective.is_none() && c.tts_provider.is_none());
    assert!(c.stt.is_none() && !c.stt_pinned);
    assert_eq!(c.tts_providers, vec!["espeak-ng"]);
    assert_eq!(c.stt_providers, vec!["pocketsphinx"]);
    assert!(
        c.reasons["tts"].contains("audio.tts.provider is not set"),
        "{:?}",
        c.reasons
    );
    assert!(c.reasons["stt"].contains("audio.stt.provider is not set"));
    assert_eq!(c.stt_language, "auto");
    assert_eq!(c.stt_language_source, "detect");
}

#[test]
fn no_device_turns_play_and_record_off_with_reasons() {
    let c = capabilities(&det(), &AudioSettings::from_json(&json!({})));
    assert!(!c.play && !c.record);
    assert!(
        c.reasons["record"].contains("no audio input device"),
        "{:?}",
        c.reasons
    );
    assert!(c.reasons["play"].contains("no audio output device"));
    assert_eq!(c.recorders, vec!["arecord"]);
    let c = capabilities(
        &Detection {
            recorders: vec![],
            ..det()
        },
        &AudioSettings::default(),
    );
    assert!(c.reasons["record"].contains("no recorder on PATH"));
}

#[test]
fn pinned_and_present_is_effective() {
    let s = AudioSettings::from_json(&json!({"audio": {
        "tts": {"provider": "espeak", "voice": "en-us", "autoSpeak": true},
        "stt": {"provider": "pocketsphinx", "language": "en-US"}
    }}));
    let c = capabilities(&det(), &s);
    assert!(c.tts && c.tts_pinned && c.auto_speak);
    assert_eq!(c.tts_effective.as_deref(), Some("espeak-ng"));
    assert_eq!(c.stt_effective.as_deref(), Some("pocketsphinx"));
    assert_eq!(c.voice.as_deref(), Some("en-us"));
    assert_eq!(
        (c.stt_language.as_str(), c.stt_language_source.as_str()),
        ("en-US", "setting")
    );
    assert!(!c.reasons.contains_key("tts") && !c.reasons.contains_key("autoSpeak"));
}

#[test]
fn pinned_but_missing_says_how_to_install() {
    let s = AudioSettings::from_json(&json!({"audio": {
        "tts": {"provider": "piper", "autoSpeak": true},
        "stt": {"provider": "local-whisper"}
    }}));
    let c = capabilities(&det(), &s);
    assert!(c.tts_pinned && !c.tts && c.tts_effective.is_none());
    assert!(
        c.reasons["tts"].contains("audio.install"),
        "{:?}",
        c.reasons
    );
    assert!(c.reasons["stt"].contains("whisper"));
    assert!(!c.auto_speak);
    assert!(c.reasons["autoSpeak"].contains("voice output is off"));
    let with_piper = Detection {
        piper: Some("/x/piper".into()),
        ..det()
    };
    let c = capabilities(&with_piper, &s);
    assert!(c.reasons["tts"].contains("no voice"), "{:?}", c.reasons);
}

#[test]
fn which_finds_executables_only() {
    assert!(which("sh").is_some());
    assert!(which("definitely-not-a-program-xyz").is_none());
}
