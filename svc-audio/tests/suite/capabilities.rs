//! `audio.capabilities`: every field, reasons, and the cache following settings changes.

use serde_json::json;

use super::harness::{call, have, Svc};

fn no_sound_device() -> bool {
    let snd = std::fs::read_dir("/dev/snd")
        .map(|d| d.count() > 0)
        .unwrap_or(false);
    !snd && std::env::var_os("PULSE_SERVER").is_none()
        && std::env::var_os("XDG_RUNTIME_DIR").is_none()
}

#[tokio::test]
async fn nothing_pinned_reports_off_with_reasons() {
    let svc = Svc::start(json!({})).await;
    let c = call(svc.audio().capabilities(())).await.unwrap();
    assert!(!c.tts && !c.tts_pinned && c.tts_effective.is_none() && c.tts_provider.is_none());
    assert!(c.stt.is_none() && !c.stt_pinned && c.stt_effective.is_none());
    assert!(
        c.reasons["tts"].contains("audio.tts.provider is not set"),
        "{:?}",
        c.reasons
    );
    assert!(c.reasons["stt"].contains("audio.stt.provider is not set"));
    assert_eq!(
        (c.stt_language.as_str(), c.stt_language_source.as_str()),
        ("auto", "detect")
    );
    assert!(!c.auto_speak && c.reasons.contains_key("autoSpeak"));
    if have("espeak-ng", "tts providers") {
        assert!(
            c.tts_providers.contains(&"espeak-ng".to_string()),
            "{:?}",
            c.tts_providers
        );
    }
    if !c.record {
        assert!(!c.reasons["record"].is_empty());
    }
    if !c.play {
        assert!(!c.reasons["play"].is_empty());
    }
    if no_sound_device() {
        assert!(!c.record, "no audio device here, so no recording");
        assert!(!c.play);
    }
}

#[tokio::test]
async fn detection_follows_settings_changes() {
    let svc = Svc::start(json!({})).await;
    let c = call(svc.audio().capabilities(())).await.unwrap();
    assert!(!c.tts_pinned);
    svc.write_settings(json!({"audio": {
        "tts": {"provider": "piper", "voice": "en_US-amy-medium", "autoSpeak": true},
        "stt": {"provider": "local-whisper", "language": "de"}
    }}));
    let c = call(svc.audio().capabilities(())).await.unwrap();
    assert!(c.tts_pinned && c.stt_pinned);
    assert_eq!(c.voice.as_deref(), Some("en_US-amy-medium"));
    assert_eq!(
        (c.stt_language.as_str(), c.stt_language_source.as_str()),
        ("de", "setting")
    );
    if c.tts_effective.is_none() {
        assert!(c.reasons["tts"].contains("piper"), "{:?}", c.reasons);
        assert!(!c.auto_speak);
    }
    if c.stt_effective.is_none() {
        assert!(c.reasons["stt"].contains("whisper"), "{:?}", c.reasons);
    }
}

#[tokio::test]
async fn detection_is_fast_and_cached() {
    let svc = Svc::start(json!({"audio": {"tts": {"provider": "espeak-ng"}}})).await;
    let _ = call(svc.audio().capabilities(())).await.unwrap();
    let start = std::time::Instant::now();
    for _ in 0..20 {
        call(svc.audio().capabilities(())).await.unwrap();
    }
    // Not a benchmark: a cached answer must not start anything (20 calls well under 2 s
    // even on a loaded 2-core CI machine; one python probe alone takes ~50 ms).
    assert!(
        start.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

/// Regression (issue 32 item 8): with no speech engine installed the service stopped
/// declaring `audio` once detection ran, so `system.hello` lost it although every
/// `audio.*` method still answers. It is declared whatever is installed.
#[tokio::test]
async fn audio_is_declared_without_any_speech_engine() {
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().to_str().unwrap().to_owned();
    let svc = Svc::start_with(json!({}), &[("PATH", path.as_str())]).await;
    // Detection has run (and found nothing) once audio.capabilities answered.
    let c = call(svc.audio().capabilities(())).await.unwrap();
    assert!(
        c.tts_providers.is_empty() && c.stt_providers.is_empty(),
        "{c:?}"
    );
    let mut bus = snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient::new(svc.channel());
    let caps = call(bus.capabilities(())).await.unwrap().capabilities;
    assert_eq!(caps, ["audio"]);
}
