//! `audio.install` and its `audio.install.progress` events, with no network beyond the
//! registries: a pip install from a pre-downloaded wheel directory (`PIP_NO_INDEX`,
//! `PIP_FIND_LINKS` on the service's environment), a piper voice from a `file://` mirror,
//! and system packages answered with the platform's install command.

use std::time::Duration;

use serde_json::{json, Value};
use snowpea_proto::audio::v1::{AudioInstallParams, AudioVoicesParams};
use snowpea_proto::error::ErrorCode;
use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;
use snowpea_proto::rpc::v1::{outbound, SubscribeRequest};
use snowpea_testkit::CheckedTask;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use super::harness::{call, call_within, have, Svc};

/// Subscribes to the service's bus and forwards every `audio.install.progress` params.
/// The `audio.install.progress` notifications of `svc`, read by a task whose panic (a
/// notification that is not JSON) fails the test; keep the task while reading.
async fn progress_events(svc: &Svc) -> (mpsc::UnboundedReceiver<Value>, CheckedTask<()>) {
    let mut bus = ServiceBusClient::new(svc.channel());
    let mut stream = tokio::time::timeout(
        Duration::from_secs(10),
        bus.subscribe(SubscribeRequest {
            gateway_id: "test".into(),
        }),
    )
    .await
    .expect("subscribe in time")
    .expect("subscribe")
    .into_inner();
    let (tx, rx) = mpsc::unbounded_channel();
    let feed = CheckedTask::spawn("audio.install.progress feed", async move {
        while let Some(Ok(item)) = stream.next().await {
            if let Some(outbound::Item::Notification(n)) = item.item {
                if n.method == "audio.install.progress" {
                    let _ = tx.send(serde_json::from_str(&n.params_json).unwrap());
                }
            }
        }
    });
    (rx, feed)
}

fn drain(rx: &mut mpsc::UnboundedReceiver<Value>) -> Vec<Value> {
    let mut v = Vec::new();
    while let Ok(e) = rx.try_recv() {
        v.push(e);
    }
    v
}

/// The distinct stages in the order they first appear, and a check that steps never go back.
fn stages(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut last_step = 0;
    for e in events {
        let step = e["step"].as_i64().unwrap();
        assert!(step >= last_step, "steps go forward: {events:#?}");
        last_step = step;
        let s = e["stage"].as_str().unwrap().to_owned();
        if out.last() != Some(&s) {
            out.push(s);
        }
    }
    out
}

#[tokio::test]
async fn system_packages_and_unknown_engines() {
    let svc = Svc::start(json!({})).await;
    let r = call(svc.audio().install(AudioInstallParams {
        engine: "espeak-ng".into(),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert!(!r.ok);
    assert_eq!(r.engine, "espeak-ng");
    let hint = r.hint.unwrap();
    assert!(
        hint.contains("espeak-ng") && (hint.contains("install") || hint.contains("add")),
        "{hint}"
    );
    if std::path::Path::new("/etc/debian_version").exists() {
        assert!(hint.contains("apt-get install -y espeak-ng"), "{hint}");
    }
    let r = call(svc.audio().install(AudioInstallParams {
        engine: "edge-tts".into(),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert!(!r.ok && r.hint.unwrap().contains("local"));
    let e = call(svc.audio().install(AudioInstallParams {
        engine: "nope".into(),
        ..Default::default()
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidParams);
}

#[tokio::test]
async fn a_piper_voice_installs_from_a_mirror_with_byte_progress_and_is_not_selected() {
    if !have("python3", "downloads voices") {
        return;
    }
    let mirror = tempfile::tempdir().unwrap();
    let dir = mirror.path().join("en/en_US/test/low");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("en_US-test-low.onnx"), vec![7u8; 300_000]).unwrap();
    std::fs::write(
        dir.join("en_US-test-low.onnx.json"),
        br#"{"audio": {"sample_rate": 16000}}"#,
    )
    .unwrap();
    let url = format!("file://{}", mirror.path().display());
    let settings = json!({"audio": {"tts": {"provider": "espeak-ng"}}});
    let svc = Svc::start_with(
        settings.clone(),
        &[("SNOWPEA_AUDIO_PIPER_VOICES_URL", &url)],
    )
    .await;
    let (mut rx, _feed) = progress_events(&svc).await;
    let r = call(svc.audio().install(AudioInstallParams {
        engine: "piper".into(),
        voice: Some("en_US-test-low".into()),
        warmup: false,
    }))
    .await
    .unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.voice.as_deref(), Some("en_US-test-low"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let events = drain(&mut rx);
    assert_eq!(
        stages(&events),
        ["resolve", "download", "verify", "check"],
        "{events:#?}"
    );
    assert!(events
        .iter()
        .all(|e| e["engine"] == "piper" && e["voice"] == "en_US-test-low" && e["steps"] == 4));
    let bytes: Vec<&Value> = events
        .iter()
        .filter(|e| e.get("bytesDone").is_some())
        .collect();
    assert!(
        bytes.iter().any(|e| e["bytesDone"] == 300_000
            && e["bytesTotal"] == 300_000
            && e["percent"] == 100.0),
        "{bytes:#?}"
    );
    let voices = call(svc.audio().voices(AudioVoicesParams {
        engine: "piper".into(),
        languages: vec![],
    }))
    .await
    .unwrap()
    .voices;
    assert!(
        voices[0].installed
            && voices[0].id == "en_US-test-low"
            && voices[0].size_bytes == Some(300_000),
        "{voices:?}"
    );
    // Installing never selects: settings untouched, the pinned engine unchanged.
    let on_disk: Value =
        serde_json::from_slice(&std::fs::read(svc.home.path().join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(on_disk, settings);
    let c = call(svc.audio().capabilities(())).await.unwrap();
    assert_ne!(c.tts_effective.as_deref(), Some("piper"));

    let e = call(svc.audio().install(AudioInstallParams {
        engine: "piper".into(),
        voice: Some("../../etc/passwd".into()),
        warmup: false,
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidParams);
}

/// pocketsphinx and its dependencies as wheels, downloaded once per target dir.
fn wheel_dir() -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("audio-wheels");
    let has_wheel = |d: &std::path::Path| {
        std::fs::read_dir(d).is_ok_and(|r| {
            r.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("pocketsphinx"))
        })
    };
    if has_wheel(&dir) {
        return Some(dir);
    }
    let status = std::process::Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--quiet",
            "--only-binary=:all:",
            "-d",
        ])
        .arg(&dir)
        .arg("pocketsphinx")
        .status();
    match status {
        Ok(s) if s.success() && has_wheel(&dir) => Some(dir),
        _ => {
            eprintln!(
                "SKIP: cannot pre-download the pocketsphinx wheel with pip (registry unreachable?)"
            );
            None
        }
    }
}

#[tokio::test]
async fn pocketsphinx_installs_into_the_runtime_venv_from_a_local_wheel_dir_with_staged_progress() {
    if !have("python3", "creates the runtime venv") {
        return;
    }
    let Some(wheels) = wheel_dir() else { return };
    let wheels = wheels.to_string_lossy().into_owned();
    let svc = Svc::start_with(
        json!({}),
        &[("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", &wheels)],
    )
    .await;
    let (mut rx, _feed) = progress_events(&svc).await;
    let r = call_within(
        Duration::from_secs(600),
        svc.audio().install(AudioInstallParams {
            engine: "pocketsphinx".into(),
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let events = drain(&mut rx);
    assert!(r.ok, "{r:?}\n{events:#?}");
    assert_eq!(r.engine, "pocketsphinx");
    assert!(r.log.contains("Successfully installed"), "{}", r.log);
    assert_eq!(
        stages(&events),
        ["resolve", "download", "install", "check"],
        "{events:#?}"
    );
    assert!(events
        .iter()
        .all(|e| e["steps"] == 4 && e["engine"] == "pocketsphinx" && e["voice"] == ""));
    assert!(
        events
            .iter()
            .any(|e| e["line"].as_str().unwrap_or("").contains(&wheels)),
        "pip lines are streamed"
    );
    let last = events.last().unwrap();
    assert_eq!(
        (last["stage"].as_str(), last["percent"].as_f64()),
        (Some("check"), Some(100.0))
    );
    let venv_python = svc.home.path().join("audio-runtime/venv/bin/python");
    assert!(venv_python.exists());
    let c = call(svc.audio().capabilities(())).await.unwrap();
    assert!(
        c.stt_providers.contains(&"pocketsphinx".to_string()),
        "{c:?}"
    );
    assert!(!c.stt_pinned, "installing never selects the engine");
}
