use super::*;

fn sh(label: &str, script: &str, timeout: Duration) -> ChildSpec {
    ChildSpec::new(label, "sh", vec!["-c".into(), script.into()], timeout)
}

#[tokio::test]
async fn output_and_stdin_pass_through() {
    let mut spec = ChildSpec::new("cat", "cat", vec![], Duration::from_secs(10));
    spec.stdin = Some(b"hello".to_vec());
    let out = run(&spec, None).await.unwrap();
    assert_eq!(out.stdout, b"hello");
}

#[tokio::test]
async fn a_crashing_engine_is_a_clear_error() {
    let e = run(
        &sh(
            "crashy",
            "echo dying >&2; kill -SEGV $$",
            Duration::from_secs(10),
        ),
        None,
    )
    .await
    .unwrap_err();
    assert!(matches!(e, ChildError::Crashed { signal: 11, .. }), "{e:?}");
    assert!(
        e.to_string().contains("crashed") && e.to_string().contains("dying"),
        "{e}"
    );
}

#[tokio::test]
async fn a_failing_engine_reports_its_status_and_stderr() {
    let e = run(
        &sh(
            "failing",
            "echo no model >&2; exit 3",
            Duration::from_secs(10),
        ),
        None,
    )
    .await
    .unwrap_err();
    assert!(matches!(e, ChildError::Failed { code: 3, .. }), "{e:?}");
    assert!(e.to_string().contains("no model"), "{e}");
}

#[tokio::test]
async fn a_hanging_engine_is_killed_with_its_whole_group() {
    // The grandchild (`sleep`) must die with the engine, not only the direct child.
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let script = format!("sleep 60 & echo $! > {}; wait", pidfile.display());
    let started = std::time::Instant::now();
    let e = tokio::time::timeout(
        Duration::from_secs(20),
        run(&sh("hangs", &script, Duration::from_millis(500)), None),
    )
    .await
    .expect("run returns after the engine's timeout")
    .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    let ChildError::Timeout { pid, .. } = e else {
        panic!("expected a timeout, got {e:?}")
    };
    assert!(!is_alive(pid), "engine {pid} still alive");
    let grandchild: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for _ in 0..50 {
        if !is_alive(grandchild) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("grandchild {grandchild} survived the kill");
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let e = run(
        &ChildSpec::new(
            "ghost",
            "/nonexistent/engine",
            vec![],
            Duration::from_secs(5),
        ),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(e.reason(), "spawn");
}

#[tokio::test]
async fn lines_are_streamed() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    run(
        &sh("lines", "echo one; echo two >&2", Duration::from_secs(10)),
        Some(tx),
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    while let Ok(l) = rx.try_recv() {
        got.push(l);
    }
    got.sort();
    assert_eq!(got, vec!["one", "two"]);
}
