//! `audio.record.start/stop`: a clear error without a device (as in CI), and a full
//! recording with a configured recorder (sox generating a tone stands in for the
//! microphone).

use serde_json::json;
use snowpea_proto::audio::v1::{AudioRecordStartParams, AudioRecordStopParams};
use snowpea_proto::error::ErrorCode;

use super::harness::{call, have, script, Svc};

#[tokio::test]
async fn without_a_recorder_or_device_recording_is_a_clear_error() {
    // An empty PATH: no recorder can be found, whatever the machine has.
    let svc = Svc::start_with(json!({}), &[("PATH", "/nonexistent")]).await;
    let e = call(svc.audio().record_start(AudioRecordStartParams {
        session_id: Some("s_1".into()),
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable, "{e:?}");
    assert_eq!(e.details.as_ref().unwrap()["reason"], "no_recorder");
    assert!(e.message.contains("no recorder on PATH"), "{}", e.message);
    let e = call(svc.audio().record_stop(AudioRecordStopParams {
        session_id: Some("s_1".into()),
        transcribe: false,
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
}

#[tokio::test]
async fn a_recorder_that_dies_at_once_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let broken = script(
        dir.path(),
        "broken-rec",
        "echo 'no such device hw:0' >&2; exit 1",
    );
    let svc =
        Svc::start(json!({"audio": {"recorder": format!("{} {{out}}", broken.display())}})).await;
    // Normally start sees the recorder die within its grace period; on a loaded machine
    // the exit may come later, and then stop reports it. Either way the error says why.
    let e = match call(svc.audio().record_start(AudioRecordStartParams::default())).await {
        Err(e) => {
            assert_eq!(e.code, ErrorCode::Unavailable);
            e
        }
        Ok(_) => call(svc.audio().record_stop(AudioRecordStopParams::default()))
            .await
            .unwrap_err(),
    };
    assert!(e.message.contains("no such device"), "{}", e.message);
}

#[tokio::test]
async fn record_start_then_stop_with_transcription() {
    if !have("sox", "stands in for the microphone") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let stt = script(
        dir.path(),
        "len-stt",
        "echo transcribed $(wc -c < \"$1\") bytes",
    );
    // A microphone stand-in that keeps running like a real recorder until it is stopped:
    // sox writing to a file finishes 120 s of audio in milliseconds, so it would look like
    // a recorder that died at once on an unloaded machine (a flaky start).
    let mic = script(
        dir.path(),
        "fake-mic",
        "sox -q -n -r 16000 -c 1 -b 16 \"$1\" synth 1 sine 440\nexec sleep 120",
    );
    let svc = Svc::start(json!({"audio": {
        "recorder": format!("{} {{out}}", mic.display()),
        "stt": {"provider": "command", "command": format!("{} {{path}}", stt.display())}
    }}))
    .await;
    let started = call(svc.audio().record_start(AudioRecordStartParams {
        session_id: Some("s_rec".into()),
    }))
    .await
    .unwrap();
    assert!(started.recording);
    assert_eq!(started.mime, "audio/wav");
    let again = call(svc.audio().record_start(AudioRecordStartParams {
        session_id: Some("s_rec".into()),
    }))
    .await
    .unwrap();
    assert_eq!(
        again.path, started.path,
        "a second start answers the running recording"
    );
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let stopped = call(svc.audio().record_stop(AudioRecordStopParams {
        session_id: Some("s_rec".into()),
        transcribe: true,
    }))
    .await
    .unwrap();
    assert!(!stopped.recording);
    assert_eq!(stopped.path, started.path);
    assert_eq!(stopped.provider.as_deref(), Some("command"));
    assert!(
        stopped.text.as_deref().unwrap().starts_with("transcribed"),
        "{:?}",
        stopped.text
    );
    let r = hound::WavReader::open(&stopped.path).expect("a finished wav");
    assert!(r.duration() > 16_000 / 4, "{} samples", r.duration());
    let e = call(svc.audio().record_stop(AudioRecordStopParams {
        session_id: Some("s_rec".into()),
        transcribe: false,
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
}
