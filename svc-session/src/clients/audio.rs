//! autoSpeak (issue 7): after a turn completes with `audio.tts.autoSpeak` on, svc-session
//! asks svc-audio (over its unix socket, with a deadline) to speak the reply and emits
//! the `audio.spoken{path, mime, provider, voice, played, utterance:"reply"}` session
//! event. Runs in the background: failures — svc-audio down, voice output off, an engine
//! error — are logged and never touch the turn.

use std::time::Duration;

use serde_json::Value;
use snowpea_common::home::Home;
use snowpea_proto::audio::v1::audio_service_client::AudioServiceClient;
use snowpea_proto::audio::v1::AudioSpeakParams;
use snowpea_proto::session::v1 as pb;

use crate::events::EventLog;

/// Deadline of one `audio.speak` call (synthesis plus playback on the daemon's machine).
pub const SPEAK_TIMEOUT: Duration = Duration::from_secs(120);

/// True when `audio.tts.autoSpeak` is on in the global settings.
pub fn auto_speak_on(home: &Home) -> bool {
    snowpea_common::settings::load_file(&home.settings_path())
        .ok()
        .and_then(|s| {
            snowpea_common::settings::get(&s, "audio.tts.autoSpeak").and_then(Value::as_bool)
        })
        .unwrap_or(false)
}

/// Speaks `text` (the reply of a turn of `session_id`) through svc-audio when autoSpeak
/// is on, and returns the `audio.spoken` payload; `None` when autoSpeak is off, the reply
/// is empty, or speaking failed (logged).
pub async fn speak_reply(
    home: &Home,
    session_id: &str,
    text: &str,
) -> Option<pb::AudioSpokenEvent> {
    if text.trim().is_empty() || !auto_speak_on(home) {
        return None;
    }
    let mut client =
        AudioServiceClient::new(snowpea_common::client::unix_channel(home.socket("audio")))
            .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST);
    let req = AudioSpeakParams {
        text: text.to_owned(),
        session_id: Some(session_id.to_owned()),
        play: true,
        ..Default::default()
    };
    let spoken = match tokio::time::timeout(SPEAK_TIMEOUT, client.speak(req)).await {
        Err(_) => {
            tracing::warn!(
                session_id,
                "autoSpeak: svc-audio did not answer within {SPEAK_TIMEOUT:?}"
            );
            return None;
        }
        Ok(Err(status)) => {
            tracing::warn!(session_id, error = %status.message(), code = ?status.code(), "autoSpeak: speaking the reply failed");
            return None;
        }
        Ok(Ok(r)) => r.into_inner(),
    };
    Some(pb::AudioSpokenEvent {
        path: spoken.path,
        mime: spoken.mime,
        provider: spoken.provider,
        voice: spoken.voice,
        played: spoken.played,
        utterance: "reply".into(),
        ..Default::default()
    })
}

/// Speaks the reply in the background and emits `audio.spoken` on the session when it
/// worked. Call after `turn.done` of a completed turn; returns at once.
pub fn spawn_speak_reply(
    home: Home,
    log: EventLog,
    session_id: String,
    host_tools_from: Option<String>,
    text: String,
) {
    if text.trim().is_empty() || !auto_speak_on(&home) {
        return;
    }
    tokio::spawn(async move {
        if let Some(payload) = speak_reply(&home, &session_id, &text).await {
            log.event(&session_id, host_tools_from, &payload, &[]);
        }
    });
}

/// Deadline of the `audio.capabilities` call `setup.catalog` makes.
pub const CAPABILITIES_TIMEOUT: Duration = Duration::from_secs(2);

/// The speech engines usable on this machine as svc-audio reports them
/// (`audio.capabilities` `sttProviders`, `ttsProviders`); both empty when svc-audio is down
/// or slow (logged).
pub async fn usable_engines(home: &Home) -> (Vec<String>, Vec<String>) {
    let mut client =
        AudioServiceClient::new(snowpea_common::client::unix_channel(home.socket("audio")));
    let req = ();
    match tokio::time::timeout(CAPABILITIES_TIMEOUT, client.capabilities(req)).await {
        Ok(Ok(r)) => {
            let r = r.into_inner();
            (r.stt_providers, r.tts_providers)
        }
        Ok(Err(status)) => {
            tracing::warn!(error = %status.message(), "audio.capabilities failed; speech engines shown inactive");
            (vec![], vec![])
        }
        Err(_) => {
            tracing::warn!("svc-audio did not answer audio.capabilities within {CAPABILITIES_TIMEOUT:?}; speech engines shown inactive");
            (vec![], vec![])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn off_or_unreachable_is_none_and_never_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        assert!(
            speak_reply(&home, "s_1", "hello").await.is_none(),
            "autoSpeak off"
        );
        std::fs::write(
            home.settings_path(),
            r#"{"audio":{"tts":{"autoSpeak":true}}}"#,
        )
        .unwrap();
        assert!(auto_speak_on(&home));
        // No svc-audio socket: logged, None, quickly.
        let r =
            tokio::time::timeout(Duration::from_secs(10), speak_reply(&home, "s_1", "hello")).await;
        assert_eq!(r.expect("bounded"), None);
        assert!(speak_reply(&home, "s_1", "  ").await.is_none());
    }
}
