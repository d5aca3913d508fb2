//! Starts the real binary on a temp home (settings and environment set on the child,
//! never on the test process) and hands back clients; kills the process on drop. Every
//! await on the other process has a timeout.

use std::future::Future;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use snowpea_proto::audio::v1::audio_service_client::AudioServiceClient;
use snowpea_proto::error::RpcError;
use snowpea_testkit::ServiceProcess;
use tonic::transport::Channel;

/// Deadline of one ordinary call in tests.
pub const CALL: Duration = Duration::from_secs(60);

/// A running `snowpea-svc-audio` (the kit's [`ServiceProcess`]).
pub struct Svc {
    process: ServiceProcess,
    /// The temp home (kept alive while the test runs; dropped after the process).
    pub home: tempfile::TempDir,
}

impl Svc {
    /// Starts the service on a fresh temp home with `settings.json` = `settings`.
    pub async fn start(settings: Value) -> Svc {
        Svc::start_with(settings, &[]).await
    }

    /// Same, with extra environment on the service process.
    pub async fn start_with(settings: Value, env: &[(&str, &str)]) -> Svc {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
        let process = ServiceProcess::new(
            "audio",
            env!("CARGO_BIN_EXE_snowpea-svc-audio"),
            home.path(),
        )
        .envs(env.iter().copied())
        .env("SNOWPEA_LOG", "warn")
        .start()
        .await;
        Svc { process, home }
    }

    /// Replaces `settings.json` (detection is re-run on the next call: mtime/size change).
    pub fn write_settings(&self, settings: Value) {
        let path = self.home.path().join("settings.json");
        let tmp = self.home.path().join("settings.json.tmp");
        std::fs::write(&tmp, format!("{settings}\n")).unwrap();
        // Make sure the stamp changes even within one mtime tick.
        let f = std::fs::File::options().write(true).open(&tmp).unwrap();
        f.set_modified(std::time::SystemTime::now() + Duration::from_secs(1))
            .unwrap();
        std::fs::rename(tmp, path).unwrap();
    }

    /// SIGKILLs the process (kill -9) and reaps it.
    pub fn kill9(&mut self) {
        self.process.kill9();
    }

    /// Starts the process again on the same home.
    pub async fn restart(&mut self) {
        self.process.restart().await;
    }

    /// A fresh AudioService client (a new connection).
    pub fn audio(&self) -> AudioServiceClient<Channel> {
        AudioServiceClient::new(self.channel())
    }

    /// A fresh channel.
    pub fn channel(&self) -> Channel {
        self.process.channel()
    }
}

/// Awaits `f` with the call deadline; panics on timeout.
pub async fn call<T>(
    f: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, RpcError> {
    call_within(CALL, f).await
}

/// Awaits `f` with `deadline`; panics on timeout.
pub async fn call_within<T>(
    deadline: Duration,
    f: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, RpcError> {
    snowpea_testkit::within(deadline, "call to svc-audio", f)
        .await
        .map(tonic::Response::into_inner)
        .map_err(|s| RpcError::from_status(&s))
}

/// True when `program` is on PATH; otherwise prints why the test skips.
pub fn have(program: &str, why: &str) -> bool {
    let found = snowpea_svc_audio::detect::which(program).is_some();
    if !found {
        snowpea_common::test_deps::missing(
            program,
            &format!("needed for {why}; .ci/run installs it"),
        );
    }
    found
}

/// True when the system python can import pocketsphinx; otherwise prints why the test skips.
pub fn have_pocketsphinx() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import pocketsphinx"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        snowpea_common::test_deps::missing(
            "the pocketsphinx Python package",
            "`pip install pocketsphinx`; .ci/run installs it",
        );
    }
    ok
}

/// True while `pid` is a live process.
pub fn alive(pid: u32) -> bool {
    snowpea_svc_audio::child::is_alive(pid)
}

/// Waits (bounded) until `pid` is gone; false if it is still alive after `within`.
pub async fn gone_within(pid: u32, within: Duration) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < within {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    !alive(pid)
}

/// Writes an executable script and returns its path.
pub fn script(dir: &std::path::Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}
