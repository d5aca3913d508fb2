//! Real engines: espeak-ng speaks, pocketsphinx transcribes (issue 7 "Done means").

use base64::Engine as _;
use serde_json::json;
use snowpea_proto::audio::v1::{AudioSpeakParams, AudioTranscribeParams, AudioVoicesParams};
use snowpea_proto::error::ErrorCode;

use super::harness::{call, have, have_pocketsphinx, Svc};

fn real_engines() -> serde_json::Value {
    json!({"audio": {"tts": {"provider": "espeak-ng"}, "stt": {"provider": "pocketsphinx"}}})
}

#[tokio::test]
async fn speak_hello_world_with_espeak_then_transcribe_it_with_pocketsphinx() {
    if !have("espeak-ng", "text to speech") || !have_pocketsphinx() {
        return;
    }
    let svc = Svc::start(real_engines()).await;
    let spoken = call(svc.audio().speak(AudioSpeakParams {
        text: "hello world".into(),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert_eq!(spoken.provider, "espeak-ng");
    assert_eq!(spoken.mime, "audio/wav");
    assert_eq!(spoken.voice.as_deref(), Some("en-us"));
    assert!(!spoken.played);
    assert!(
        spoken
            .path
            .starts_with(svc.home.path().join("audio").to_str().unwrap()),
        "{}",
        spoken.path
    );
    let wav = std::fs::read(&spoken.path).unwrap();
    assert!(wav.len() > 10_000 && &wav[..4] == b"RIFF");

    let heard = call(svc.audio().transcribe(AudioTranscribeParams {
        path: Some(spoken.path.clone()),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert_eq!(heard.provider, "pocketsphinx");
    let text = heard.text.to_lowercase();
    assert!(
        text.contains("hello") || text.contains("world"),
        "pocketsphinx heard {text:?}"
    );

    // The same audio as a data URI gives the same transcript.
    let uri = format!(
        "data:audio/wav;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&wav)
    );
    let again = call(svc.audio().transcribe(AudioTranscribeParams {
        data: Some(uri),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert_eq!(again.text, heard.text);
}

#[tokio::test]
async fn speech_of_a_session_goes_to_its_workspace() {
    if !have("espeak-ng", "text to speech") {
        return;
    }
    let svc = Svc::start(real_engines()).await;
    let ws = svc.home.path().join("sessions").join("2026-01-01_s_abc");
    std::fs::create_dir_all(&ws).unwrap();
    let spoken = call(svc.audio().speak(AudioSpeakParams {
        text: "-rf starts with a dash".into(),
        session_id: Some("s_abc".into()),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert!(
        spoken.path.starts_with(ws.join("audio").to_str().unwrap()),
        "{}",
        spoken.path
    );
}

#[tokio::test]
async fn bad_audio_is_invalid_params_with_a_reason() {
    let svc = Svc::start(real_engines()).await;
    let cases = [
        (
            AudioTranscribeParams {
                data: Some("%%%".into()),
                ..Default::default()
            },
            "base64",
        ),
        (
            AudioTranscribeParams {
                data: Some(
                    base64::engine::general_purpose::STANDARD.encode(b"this is not audio at all"),
                ),
                ..Default::default()
            },
            "unknown audio format",
        ),
        (
            AudioTranscribeParams {
                path: Some("/nonexistent/a.wav".into()),
                ..Default::default()
            },
            "cannot read",
        ),
        (AudioTranscribeParams::default(), "path or data"),
        (
            AudioTranscribeParams {
                data: Some(
                    base64::engine::general_purpose::STANDARD.encode(b"RIFF\x10\0\0\0WAVEjunkjunk"),
                ),
                ..Default::default()
            },
            "wav",
        ),
    ];
    for (params, reason) in cases {
        let e = call(svc.audio().transcribe(params)).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidParams, "{e:?}");
        assert!(
            e.message.contains(reason),
            "{reason:?} not in {:?}",
            e.message
        );
    }
}

#[tokio::test]
async fn unset_provider_means_off_and_a_per_call_provider_previews() {
    let svc = Svc::start(json!({})).await;
    let e = call(svc.audio().speak(AudioSpeakParams {
        text: "hi".into(),
        ..Default::default()
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert_eq!(e.details.as_ref().unwrap()["reason"], "not_pinned");
    let e = call(svc.audio().transcribe(AudioTranscribeParams {
        path: Some("/x.wav".into()),
        ..Default::default()
    }))
    .await
    .unwrap_err();
    assert_eq!(
        e.code,
        ErrorCode::InvalidParams,
        "the path is checked first: {e:?}"
    );
    let e = call(svc.audio().speak(AudioSpeakParams {
        text: "hi".into(),
        provider: Some("festival".into()),
        ..Default::default()
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidParams);
    if have("espeak-ng", "text to speech") {
        let spoken = call(svc.audio().speak(AudioSpeakParams {
            text: "preview".into(),
            provider: Some("espeak-ng".into()),
            voice: Some("de".into()),
            ..Default::default()
        }))
        .await
        .unwrap();
        assert_eq!(
            (spoken.provider.as_str(), spoken.voice.as_deref()),
            ("espeak-ng", Some("de"))
        );
    }
}

#[tokio::test]
async fn espeak_voices_are_its_real_list_filtered_by_language() {
    if !have("espeak-ng", "text to speech") {
        return;
    }
    let svc = Svc::start(json!({})).await;
    let v = call(svc.audio().voices(AudioVoicesParams {
        engine: "espeak-ng".into(),
        languages: vec!["de".into()],
    }))
    .await
    .unwrap()
    .voices;
    assert!(v.iter().any(|v| v.id == "de"), "{v:?}");
    assert!(v.iter().all(|v| v.language.starts_with("de")));
    let v = call(svc.audio().voices(AudioVoicesParams {
        engine: "espeak-ng".into(),
        languages: vec![],
    }))
    .await
    .unwrap()
    .voices;
    assert!(
        v.iter().any(|v| v.id == "en-us") && v.iter().any(|v| v.language.starts_with("ko")),
        "{v:?}"
    );
    let e = call(svc.audio().voices(AudioVoicesParams {
        engine: "nope".into(),
        languages: vec![],
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidParams);
}

/// Long text and unknown voices: text up to the cap is spoken (on stdin, so a leading dash
/// is never an option), longer text and a voice espeak-ng lacks are the caller's
/// `invalid_params`, a bad voice in settings is `unavailable` (`no_voice`).
#[tokio::test]
async fn espeak_long_text_and_unknown_voices() {
    if !have("espeak-ng", "text to speech") {
        return;
    }
    let svc = Svc::start(json!({"audio": {"tts": {"provider": "espeak-ng"}}})).await;
    let text = format!("-v {}", "a. ".repeat(6_000));
    let spoken = call(svc.audio().speak(AudioSpeakParams {
        text: text.clone(),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert!(std::fs::metadata(&spoken.path).unwrap().len() > 100_000);
    let e = call(svc.audio().speak(AudioSpeakParams {
        text: "é".repeat(150_000),
        ..Default::default()
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidParams);
    assert!(
        e.message.starts_with("params.text: at most"),
        "{}",
        e.message
    );

    let e = call(svc.audio().speak(AudioSpeakParams {
        text: "hi".into(),
        voice: Some("nosuchvoice".into()),
        ..Default::default()
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidParams, "{e:?}");
    assert!(e.message.starts_with("params.voice:"), "{}", e.message);
    let e = call(svc.audio().speak(AudioSpeakParams {
        text: "hi".into(),
        language: Some("xx-nowhere".into()),
        ..Default::default()
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidParams, "{e:?}");
    assert!(e.message.starts_with("params.language:"), "{}", e.message);

    svc.write_settings(
        json!({"audio": {"tts": {"provider": "espeak-ng", "voice": "nosuchvoice"}}}),
    );
    let e = call(svc.audio().speak(AudioSpeakParams {
        text: "hi".into(),
        ..Default::default()
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable, "{e:?}");
    assert_eq!(e.details.unwrap()["reason"], "no_voice");
}
