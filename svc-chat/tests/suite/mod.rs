//! svc-chat service tests.

mod connection;
mod service;
mod targets;

use std::path::Path;

use snowpea_testkit::ServiceProcess;

/// A temp home for svc-chat: `settings.json` points Telegram at `base_url` (1 s long polls),
/// `credentials.json` holds `credentials`.
pub fn home(base_url: &str, credentials: &serde_json::Value) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        serde_json::json!({"gateway": {"telegram": {"baseUrl": base_url, "pollTimeoutSec": 1}}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        home.path().join("credentials.json"),
        credentials.to_string(),
    )
    .unwrap();
    home
}

/// svc-chat started on `home` (the built binary, a fresh socket).
pub async fn start(home: &Path) -> ServiceProcess {
    ServiceProcess::new("chat", env!("CARGO_BIN_EXE_snowpea-svc-chat"), home)
        .start()
        .await
}
