//! svc-audio benchmark (docs/PERFORMANCE.md "svc-audio"): `audio.speak` and
//! `audio.transcribe` latency of a ~3-second utterance per installed engine, through the
//! real binary over its unix socket, and the service's idle memory.
//!
//! Run: `cargo bench -p snowpea-svc-audio --bench latency` (engines that are not
//! installed are reported as skipped).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use snowpea_proto::audio::v1::audio_service_client::AudioServiceClient;
use snowpea_proto::audio::v1::{AudioSpeakParams, AudioTranscribeParams};

/// About three seconds with espeak-ng's default rate.
const UTTERANCE: &str = "The quick brown fox jumps over the lazy dog.";
const RUNS: usize = 7;

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        r#"{"audio": {"stt": {"provider": "pocketsphinx"}}}"#,
    )
    .unwrap();
    let socket = home.path().join("run/audio.sock");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_snowpea-svc-audio"))
        .arg("--home")
        .arg(home.path())
        .arg("--socket")
        .arg(&socket)
        .env("SNOWPEA_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    while !snowpea_common::client::is_serving(&socket, "", Duration::from_millis(200)).await {
        assert!(started.elapsed() < Duration::from_secs(10), "not SERVING");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("start to SERVING: {}", ms(started.elapsed()));
    let mut c = AudioServiceClient::new(snowpea_common::client::unix_channel(&socket));
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!("idle RSS after start: {} KiB", rss_kib(child.id()));
    let caps = c.capabilities(()).await.unwrap().into_inner();
    println!(
        "tts providers: {:?}, stt providers: {:?}",
        caps.tts_providers, caps.stt_providers
    );
    let t = Instant::now();
    for _ in 0..100 {
        c.capabilities(()).await.unwrap();
    }
    println!(
        "audio.capabilities (cached) mean: {:.3} ms",
        t.elapsed().as_secs_f64() * 10.0
    );

    let mut sample = None;
    for engine in &caps.tts_providers {
        if engine == "command" {
            continue;
        }
        let mut times = Vec::new();
        for _ in 0..RUNS {
            let t = Instant::now();
            let r = c
                .speak(AudioSpeakParams {
                    text: UTTERANCE.into(),
                    provider: Some(engine.clone()),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            times.push(t.elapsed());
            sample = Some(r.path);
        }
        let path = sample.clone().unwrap();
        let r = hound::WavReader::open(&path).unwrap();
        let secs = r.duration() as f64 / r.spec().sample_rate as f64;
        println!(
            "speak {engine}: median {} over {RUNS} runs ({secs:.2} s of audio)",
            ms(median(times))
        );
    }
    let Some(path) = sample else {
        println!("no speech engine installed: nothing to transcribe");
        let _ = child.kill();
        let _ = child.wait();
        return;
    };
    for engine in &caps.stt_providers {
        if engine == "command" {
            continue;
        }
        std::fs::write(
            home.path().join("settings.json"),
            format!(r#"{{"audio": {{"stt": {{"provider": "{engine}"}}}}}}"#),
        )
        .unwrap();
        let mut times = Vec::new();
        let mut text = String::new();
        for _ in 0..RUNS {
            let t = Instant::now();
            text = c
                .transcribe(AudioTranscribeParams {
                    path: Some(path.clone()),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .text;
            times.push(t.elapsed());
        }
        println!(
            "transcribe {engine}: median {} over {RUNS} runs, heard {text:?}",
            ms(median(times))
        );
    }
    println!("RSS after the runs: {} KiB", rss_kib(child.id()));
    let _ = child.kill();
    let _ = child.wait();
}
