//! Fault tests (issue 7 "Done means"): an engine that crashes, one that hangs past its
//! timeout (killed, clear error, pid gone), and a kill -9 of svc-audio in the middle of a
//! transcription (the caller gets an error, the engine dies with the service, the next
//! call after the restart works).

use std::time::{Duration, Instant};

use serde_json::json;
use snowpea_proto::audio::v1::{AudioSpeakParams, AudioTranscribeParams};
use snowpea_proto::error::ErrorCode;

use super::harness::{alive, call, call_within, gone_within, script, Svc};

/// A valid 0.2 s silent 16 kHz wav.
fn silence(dir: &std::path::Path) -> String {
    let p = dir.join("silence.wav");
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(&p, spec).unwrap();
    for _ in 0..3200 {
        w.write_sample(0i16).unwrap();
    }
    w.finalize().unwrap();
    p.to_string_lossy().into_owned()
}

#[tokio::test]
async fn a_crashing_engine_is_a_clear_error_and_the_service_lives_on() {
    let dir = tempfile::tempdir().unwrap();
    let crash = script(
        dir.path(),
        "crash-tts",
        "echo 'voice model corrupt' >&2\nkill -SEGV $$",
    );
    let svc = Svc::start(json!({"audio": {
        "tts": {"provider": "command", "command": format!("{} {{text}} {{out}}", crash.display())},
    }}))
    .await;
    let e = call(svc.audio().speak(AudioSpeakParams {
        text: "hi".into(),
        ..Default::default()
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal, "{e:?}");
    let d = e.details.clone().unwrap();
    assert_eq!(d["reason"], "crashed");
    assert_eq!(d["engine"], "command");
    assert!(
        e.message.contains("crashed") && e.message.contains("voice model corrupt"),
        "{}",
        e.message
    );
    // The service is still there.
    call(svc.audio().capabilities(())).await.unwrap();
}

#[tokio::test]
async fn a_hanging_engine_is_killed_after_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let hang = script(dir.path(), "hang-stt", "sleep 300");
    let svc = Svc::start(json!({"audio": {
        "stt": {"provider": "command", "command": format!("{} {{path}}", hang.display())},
        "timeoutSec": 1
    }}))
    .await;
    let started = Instant::now();
    let e = call_within(
        Duration::from_secs(30),
        svc.audio().transcribe(AudioTranscribeParams {
            path: Some(silence(dir.path())),
            ..Default::default()
        }),
    )
    .await
    .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(e.code, ErrorCode::Internal, "{e:?}");
    let d = e.details.clone().unwrap();
    assert_eq!(d["reason"], "timeout");
    assert!(e.message.contains("killed"), "{}", e.message);
    let pid = d["pid"].as_u64().expect("pid in details") as u32;
    assert!(
        gone_within(pid, Duration::from_secs(5)).await,
        "engine {pid} still alive"
    );
}

#[tokio::test]
async fn kill_9_of_svc_audio_during_a_transcription_fails_the_call_and_the_restart_works() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("engine.pid");
    let sleep_pidfile = dir.path().join("grandchild.pid");
    let slow = script(
        dir.path(),
        "slow-stt",
        &format!(
            "sleep 300 &\necho $! > {}\necho $$ > {}\nwait\necho never",
            sleep_pidfile.display(),
            pidfile.display()
        ),
    );
    let fast = script(dir.path(), "fast-stt", "echo heard it");
    let settings = |cmd: &std::path::Path| json!({"audio": {"stt": {"provider": "command", "command": format!("{} {{path}}", cmd.display())}}});
    let mut svc = Svc::start(settings(&slow)).await;
    let wav = silence(dir.path());
    let mut client = svc.audio();
    let wav2 = wav.clone();
    let pending = tokio::spawn(async move {
        call_within(
            Duration::from_secs(30),
            client.transcribe(AudioTranscribeParams {
                path: Some(wav2),
                ..Default::default()
            }),
        )
        .await
    });
    // Wait (bounded) until the engine runs, then kill -9 the service under it.
    let mut engine_pid = None;
    for _ in 0..400 {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            engine_pid = Some(pid);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let engine_pid = engine_pid.expect("the engine started within 10 s");
    assert!(alive(engine_pid));
    svc.kill9();
    let outcome = tokio::time::timeout(Duration::from_secs(30), pending)
        .await
        .unwrap()
        .unwrap();
    let e = outcome.expect_err("a call whose service died must fail");
    assert!(
        matches!(e.code, ErrorCode::Unavailable | ErrorCode::Internal),
        "caller sees a transport error: {e:?}"
    );
    // PDEATHSIG: the engine does not outlive the service.
    assert!(
        gone_within(engine_pid, Duration::from_secs(5)).await,
        "engine {engine_pid} outlived svc-audio"
    );

    svc.write_settings(settings(&fast));
    svc.restart().await;
    // The engine's own child (same process group) is killed by the restarted service.
    let grandchild: u32 = std::fs::read_to_string(&sleep_pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        gone_within(grandchild, Duration::from_secs(5)).await,
        "the engine's child {grandchild} survived the restart"
    );
    let heard = call(svc.audio().transcribe(AudioTranscribeParams {
        path: Some(wav),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert_eq!(
        (heard.text.as_str(), heard.provider.as_str()),
        ("heard it", "command")
    );
}

#[tokio::test]
async fn command_templates_never_reach_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("must-survive");
    std::fs::write(&marker, b"x").unwrap();
    // The engine records its argv, one per line, and writes a valid wav.
    let argv_file = dir.path().join("argv.txt");
    let tts = script(
        dir.path(),
        "argv-tts",
        &format!(
            "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > {}\nsox -q -n -r 16000 -c 1 -b 16 \"$2\" trim 0 0.1 2>/dev/null || cp {} \"$2\"",
            argv_file.display(),
            silence(dir.path())
        ),
    );
    let svc = Svc::start(json!({"audio": {
        "tts": {"provider": "command", "command": format!("{} {{text}} {{out}}", tts.display())},
    }}))
    .await;
    let text = format!("hello; rm -rf {} && echo $(id) `id`", marker.display());
    let spoken = call(svc.audio().speak(AudioSpeakParams {
        text: text.clone(),
        ..Default::default()
    }))
    .await
    .unwrap();
    let argv = std::fs::read_to_string(&argv_file).unwrap();
    let lines: Vec<&str> = argv.lines().collect();
    assert_eq!(
        lines,
        vec![text.as_str(), spoken.path.as_str()],
        "the text is exactly one argument"
    );
    assert!(marker.exists());
}
