use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use snowpea_testkit::sshd::Sshd;
use snowpea_testkit::within;

use super::config::{self, BackendConfig, KnownHosts};
use super::*;
use crate::tools::{self, test_context, ToolOutput};

const LONG: Duration = Duration::from_secs(60);

/// A backend whose files live under `/snowpea-virtual/…`, a path that does not exist on
/// this host: it maps them onto a temp dir and records every operation. A tool that
/// bypassed the backend would touch the unmapped path and fail.
#[derive(Debug)]
struct Mapped {
    root: PathBuf,
    ops: Mutex<Vec<String>>,
    local: local::Local,
}

const VIRTUAL: &str = "/snowpea-virtual/work";

impl Mapped {
    fn new(root: &Path) -> Arc<Mapped> {
        Arc::new(Mapped {
            root: root.to_path_buf(),
            ops: Mutex::new(Vec::new()),
            local: local::Local::new(None),
        })
    }

    fn map(&self, op: &str, p: &Path) -> PathBuf {
        self.ops.lock().unwrap().push(op.to_owned());
        let rel = p
            .strip_prefix(VIRTUAL)
            .unwrap_or_else(|_| panic!("{op} outside the virtual root: {}", p.display()));
        self.root.join(rel)
    }

    fn ops(&self) -> Vec<String> {
        std::mem::take(&mut *self.ops.lock().unwrap())
    }
}

impl Backend for Mapped {
    fn kind(&self) -> BackendKind {
        BackendKind::Docker
    }
    fn workdir(&self) -> Option<PathBuf> {
        Some(VIRTUAL.into())
    }
    fn metadata(&self, path: &Path) -> io::Result<Meta> {
        self.local.metadata(&self.map("metadata", path))
    }
    fn symlink_metadata(&self, path: &Path) -> io::Result<Meta> {
        self.local
            .symlink_metadata(&self.map("symlink_metadata", path))
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        self.local.open(&self.map("open", path))
    }
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.local.read_link(&self.map("read_link", path))
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mapped = self.map("read_dir", path);
        Ok(self
            .local
            .read_dir(&mapped)?
            .into_iter()
            .map(|e| DirEntry {
                path: path.join(&e.name),
                ..e
            })
            .collect())
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.local.create_dir_all(&self.map("create_dir_all", path))
    }
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.local.write_atomic(&self.map("write", path), bytes)
    }
    fn exec(&self, mut req: ExecRequest, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        req.cwd = self.map("exec", &req.cwd);
        self.local.exec(req, ctx)
    }
    fn close(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

/// One call per built-in tool that touches files or runs commands, with what its output
/// must contain. Adding a built-in tool without a case here fails the test.
fn case(name: &str) -> (Value, &'static str) {
    match name {
        "read_file" => (json!({"path": "a.txt"}), "alpha"),
        "write_file" => (
            json!({"path": "sub/new.txt", "content": "written\n"}),
            "Created",
        ),
        "edit_file" => (
            json!({"path": "a.txt", "old": "alpha", "new": "ALPHA"}),
            "Edited",
        ),
        "list_dir" => (json!({"path": "."}), "a.txt"),
        "glob" => (json!({"pattern": "*.txt"}), "a.txt"),
        "grep" => (json!({"pattern": "needle"}), "b.txt:1:needle"),
        "shell" => (json!({"command": "cat b.txt; pwd"}), "needle"),
        other => panic!("built-in tool `{other}` has no backend case: add one"),
    }
}

fn seed(dir: &Path) {
    std::fs::write(dir.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(dir.join("b.txt"), "needle\n").unwrap();
}

#[tokio::test]
async fn every_builtin_tool_goes_through_the_backend() {
    let tmp = tempfile::tempdir().unwrap();
    seed(tmp.path());
    let mapped = Mapped::new(tmp.path());
    for tool in tools::builtin("") {
        let (args, expect) = case(tool.name());
        let (mut ctx, _rx) = test_context(Path::new(VIRTUAL), 64 * 1024);
        ctx.workdir = VIRTUAL.into();
        ctx.backend = mapped.clone();
        tool.plan(&args, &ctx.workdir)
            .unwrap_or_else(|e| panic!("{}: {e}", tool.name()));
        let out = within(LONG, tool.name(), tool.run(args, ctx)).await;
        assert!(out.ok, "{}: {}", tool.name(), out.content);
        assert!(
            out.content.contains(expect),
            "{}: {}",
            tool.name(),
            out.content
        );
        assert!(
            !mapped.ops().is_empty(),
            "{} did not use the backend",
            tool.name()
        );
    }
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("sub/new.txt")).unwrap(),
        "written\n"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("a.txt")).unwrap(),
        "ALPHA\n"
    );
}

#[tokio::test]
async fn local_timeout_exits_124() {
    let tmp = tempfile::tempdir().unwrap();
    let (ctx, _rx) = test_context(tmp.path(), 4096);
    let shell = tools::shell::Shell::default();
    use crate::tools::Tool;
    let out = within(
        LONG,
        "shell",
        shell.run(json!({"command": "sleep 30", "timeout": 0.3}), ctx),
    )
    .await;
    assert!(!out.ok);
    assert_eq!(out.meta["exitCode"], json!(124), "{}", out.meta);
    assert_eq!(out.meta["timedOut"], json!(true));
}

#[test]
fn every_refusal_names_its_field() {
    let cases = [
        ("nope", json!({}), "params.kind"),
        ("local", json!({"workdir": "rel"}), "params.config.workdir"),
        (
            "local",
            json!({"workdir": "/definitely/not/here"}),
            "params.config.workdir",
        ),
        ("local", json!({"color": 1}), "params.config.color"),
        ("ssh", json!({}), "params.config.host"),
        (
            "ssh",
            json!({"host": "-oProxyCommand=x"}),
            "params.config.host",
        ),
        ("ssh", json!({"host": "h", "port": 0}), "params.config.port"),
        (
            "ssh",
            json!({"host": "h", "port": "22"}),
            "params.config.port",
        ),
        (
            "ssh",
            json!({"host": "h", "user": "a b"}),
            "params.config.user",
        ),
        (
            "ssh",
            json!({"host": "h", "key": "/no/such/key"}),
            "params.config.key",
        ),
        (
            "ssh",
            json!({"host": "h", "password": 5}),
            "params.config.password",
        ),
        (
            "ssh",
            json!({"host": "h", "cwd": "relative"}),
            "params.config.cwd",
        ),
        (
            "ssh",
            json!({"host": "h", "knownHosts": "/no/file"}),
            "params.config.knownHosts",
        ),
        ("docker", json!({"image": 3}), "params.config.image"),
        ("docker", json!({"image": "-v"}), "params.config.image"),
        ("local", json!([1]), "params.config"),
    ];
    for (kind, cfg, field) in cases {
        let err = config::parse(kind, &cfg).expect_err(field);
        assert!(err.to_string().starts_with(field), "{kind} {cfg}: {err}");
    }
    let ok = config::parse("ssh", &json!({"host": "h", "knownHosts": null})).unwrap();
    match ok {
        BackendConfig::Ssh(c) => {
            assert_eq!(c.known_hosts, KnownHosts::Disabled);
            assert_eq!(c.port, 22);
        }
        other => panic!("{other:?}"),
    }
    let secret = config::parse("ssh", &json!({"host": "h", "password": "hunter2-secret"})).unwrap();
    assert!(!format!("{secret:?}").contains("hunter2-secret"));
    match config::parse("docker", &json!({})).unwrap() {
        BackendConfig::Docker(d) => assert_eq!(d.image, config::DEFAULT_DOCKER_IMAGE),
        other => panic!("{other:?}"),
    }
}

fn ssh_backend(sshd: &Sshd, cwd: &Path, known: Value) -> Arc<dyn Backend> {
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let cfg = json!({
        "host": "127.0.0.1",
        "port": sshd.port,
        "user": user,
        "key": sshd.user_key(),
        "cwd": cwd,
        "knownHosts": known,
    });
    match config::parse("ssh", &cfg).unwrap() {
        BackendConfig::Ssh(c) => Arc::new(ssh::Ssh::new(c, None).unwrap()),
        other => panic!("{other:?}"),
    }
}

async fn run(backend: &Arc<dyn Backend>, name: &str, args: Value) -> ToolOutput {
    let tool = tools::builtin("")
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap();
    let (mut ctx, _rx) = test_context(Path::new("/"), 64 * 1024);
    ctx.workdir = backend.workdir().unwrap();
    ctx.backend = backend.clone();
    within(LONG, name, tool.run(args, ctx)).await
}

#[tokio::test]
async fn ssh_runs_every_builtin_tool_refuses_unknown_keys_and_reconnects() {
    let Some(mut sshd) = Sshd::start() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    seed(tmp.path());
    let cwd = std::fs::canonicalize(tmp.path()).unwrap();
    let backend = ssh_backend(&sshd, &cwd, json!(sshd.known_hosts()));
    for tool in tools::builtin("") {
        let (args, expect) = case(tool.name());
        let out = run(&backend, tool.name(), args).await;
        assert!(out.ok, "{}: {}", tool.name(), out.content);
        assert!(
            out.content.contains(expect),
            "{}: {}",
            tool.name(),
            out.content
        );
    }
    // The command really ran over ssh.
    let out = run(
        &backend,
        "shell",
        json!({"command": "echo \"via:$SSH_CONNECTION\""}),
    )
    .await;
    assert!(out.content.contains("via:127.0.0.1"), "{}", out.content);
    // A remote timeout exits 124.
    let out = run(
        &backend,
        "shell",
        json!({"command": "sleep 30", "timeout": 0.5}),
    )
    .await;
    assert_eq!(out.meta["exitCode"], json!(124), "{}", out.content);

    // The connection dies mid-command: that call fails clearly, the next reconnects.
    let call = {
        let backend = backend.clone();
        tokio::spawn(async move {
            run(
                &backend,
                "shell",
                json!({"command": "touch started.flag; sleep 60"}),
            )
            .await
        })
    };
    let flag = cwd.join("started.flag");
    snowpea_testkit::assert_eventually!(flag.exists());
    sshd.kill();
    let out = within(LONG, "the broken call", call).await.unwrap();
    assert!(!out.ok);
    assert!(
        out.content.contains("connection") && out.content.contains("lost"),
        "{}",
        out.content
    );
    sshd.restart();
    let out = run(&backend, "read_file", json!({"path": "b.txt"})).await;
    assert!(out.ok, "{}", out.content);
    let out = run(&backend, "shell", json!({"command": "echo again"})).await;
    assert!(out.ok && out.content.contains("again"), "{}", out.content);
    backend.close().await;

    // A host key that is not the known one is refused.
    let wrong = ssh_backend(&sshd, &cwd, json!(sshd.wrong_known_hosts()));
    let out = run(&wrong, "shell", json!({"command": "echo no"})).await;
    assert!(!out.ok);
    assert!(out.content.contains("knownHosts"), "{}", out.content);
    let out = run(&wrong, "read_file", json!({"path": "b.txt"})).await;
    assert!(!out.ok, "{}", out.content);
    wrong.close().await;
    // knownHosts: null, set explicitly, skips the check.
    let unchecked = ssh_backend(&sshd, &cwd, Value::Null);
    let out = run(&unchecked, "shell", json!({"command": "echo yes"})).await;
    assert!(out.ok, "{}", out.content);
    unchecked.close().await;
}

/// The test image (`.ci/run` imports it from a local busybox root file system: no registry
/// is reachable) and whether an engine answers; `None` after a `SKIP:` line.
async fn docker_image() -> Option<String> {
    let image = std::env::var("SNOWPEA_TEST_DOCKER_IMAGE")
        .unwrap_or_else(|_| "snowpea-test:busybox".into());
    let ok = match bollard::Docker::connect_with_defaults() {
        Ok(d) => matches!(
            tokio::time::timeout(Duration::from_secs(5), d.inspect_image(&image)).await,
            Ok(Ok(_))
        ),
        Err(_) => false,
    };
    if !ok {
        snowpea_common::test_deps::missing_docker(
            "apt-get install docker.io; dockerd; docker import of a busybox rootfs (.ci/run does it)",
        );
        return None;
    }
    Some(image)
}

#[tokio::test]
async fn docker_runs_every_builtin_tool_in_the_session_container() {
    let Some(image) = docker_image().await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    seed(tmp.path());
    let wd = std::fs::canonicalize(tmp.path()).unwrap();
    let sid = format!("s_{}", uuid::Uuid::new_v4().simple());
    let name = docker::container_name(&sid);
    let cfg = match config::parse("docker", &json!({"image": image})).unwrap() {
        BackendConfig::Docker(c) => c,
        other => panic!("{other:?}"),
    };
    let backend = docker::Docker::create(cfg, &sid, wd.clone(), Some("snowpea-test".into()));
    for tool in tools::builtin("") {
        let (args, expect) = case(tool.name());
        let out = run(&backend, tool.name(), args).await;
        assert!(out.ok, "{}: {}", tool.name(), out.content);
        assert!(
            out.content.contains(expect),
            "{}: {}",
            tool.name(),
            out.content
        );
    }
    assert_eq!(
        std::fs::read_to_string(wd.join("sub/new.txt")).unwrap(),
        "written\n"
    );
    // The command ran in the container named after the session.
    let out = run(
        &backend,
        "shell",
        json!({"command": "hostname; cat /proc/1/cmdline | tr '\\0' ' '"}),
    )
    .await;
    assert!(out.content.contains("sleep infinity"), "{}", out.content);
    let out = run(
        &backend,
        "shell",
        json!({"command": "sleep 30", "timeout": 0.5}),
    )
    .await;
    assert_eq!(out.meta["exitCode"], json!(124), "{}", out.content);
    let out = run(&backend, "shell", json!({"command": "exit 3"})).await;
    assert_eq!(out.meta["exitCode"], json!(3), "{}", out.content);
    let engine = bollard::Docker::connect_with_defaults().unwrap();
    assert!(engine
        .inspect_container(
            &name,
            None::<bollard::query_parameters::InspectContainerOptions>
        )
        .await
        .is_ok());
    backend.close().await;
    assert!(
        engine
            .inspect_container(
                &name,
                None::<bollard::query_parameters::InspectContainerOptions>
            )
            .await
            .is_err(),
        "removed on close"
    );

    // No fallback to local: a missing image fails the call with the reason.
    let cfg = match config::parse("docker", &json!({"image": "snowpea-no-such-image:1"})).unwrap() {
        BackendConfig::Docker(c) => c,
        other => panic!("{other:?}"),
    };
    let missing = docker::Docker::create(cfg, &sid, wd.clone(), None);
    let out = run(&missing, "shell", json!({"command": "echo local"})).await;
    assert!(!out.ok);
    assert!(
        out.content.contains("snowpea-no-such-image"),
        "{}",
        out.content
    );
}

/// Issue 32 item 9: `config.container` attaches to an existing, running container: the
/// probe checks it (a missing or stopped one is `invalid_params` on
/// `params.config.container`, a missing image on `params.config.image`), tools run in it,
/// and closing the session leaves it running.
#[tokio::test]
async fn docker_attaches_to_an_existing_container_and_leaves_it_running() {
    let Some(image) = docker_image().await else {
        return;
    };
    let h = crate::testkit::Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let wd = h.workdir.clone();
    let engine = bollard::Docker::connect_with_defaults().unwrap();
    let name = format!(
        "snowpea-attach-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    );
    let stopped = format!("{name}-stopped");
    for (n, start) in [(&name, true), (&stopped, false)] {
        let w = wd.display().to_string();
        engine
            .create_container(
                Some(bollard::query_parameters::CreateContainerOptions {
                    name: Some(n.clone()),
                    ..Default::default()
                }),
                bollard::models::ContainerCreateBody {
                    image: Some(image.clone()),
                    cmd: Some(vec!["sleep".into(), "3600".into()]),
                    host_config: Some(bollard::models::HostConfig {
                        binds: Some(vec![format!("{w}:{w}")]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        if start {
            engine
                .start_container(n, None::<bollard::query_parameters::StartContainerOptions>)
                .await
                .unwrap();
        }
    }
    let backends = super::component::Backends::new(
        h.app.sessions.registry().clone(),
        h.app.events.clone(),
        "snowpea-test".into(),
        None,
    );
    let set = |config: Value| {
        backends.set(snowpea_proto::session::v1::BackendSetParams {
            session_id: sid.clone(),
            kind: "docker".into(),
            config: Some(snowpea_proto::wkt::to_struct(&config)),
        })
    };
    for (config, field) in [
        (
            json!({"container": "snowpea-no-such-container"}),
            "params.config.container",
        ),
        (json!({"container": stopped}), "params.config.container"),
        (
            json!({"image": "snowpea-no-such-image:1"}),
            "params.config.image",
        ),
    ] {
        match within(LONG, "backend.set", set(config.clone())).await {
            Err(snowpea_session_error::Error::InvalidParams { field: f, message }) => {
                assert_eq!(f, field, "{config}: {message}")
            }
            other => panic!("{config}: expected invalid_params, got {other:?}"),
        }
    }
    within(LONG, "backend.set", set(json!({"container": name})))
        .await
        .unwrap();
    let backend = h.app.sessions.get(&sid).unwrap().backend();
    assert_eq!(backend.kind(), BackendKind::Docker);
    let out = run(
        &backend,
        "shell",
        json!({"command": "cat /proc/1/cmdline | tr '\\0' ' '; echo from-box > made.txt"}),
    )
    .await;
    assert!(out.ok, "{}", out.content);
    assert!(out.content.contains("sleep 3600"), "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(wd.join("made.txt")).unwrap(),
        "from-box\n"
    );
    backend.close().await;
    let running = engine
        .inspect_container(
            &name,
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
        .unwrap()
        .state
        .and_then(|s| s.running);
    assert_eq!(running, Some(true), "an attached container is left running");
    for n in [&name, &stopped] {
        let _ = engine
            .remove_container(
                n,
                Some(bollard::query_parameters::RemoveContainerOptions {
                    force: true,
                    ..Default::default()
                }),
            )
            .await;
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// docs/PERFORMANCE.md "Execution backends": per-call time of `read_file` and
/// `shell echo` on each backend. Run with
/// `cargo test -p snowpea-svc-session --lib bench_backend_overhead -- --ignored --nocapture`
/// (needs sshd, and a Docker Engine with the test image for the docker row).
#[tokio::test]
#[ignore = "benchmark: prints figures, asserts nothing about time"]
async fn bench_backend_overhead() {
    let tmp = tempfile::tempdir().unwrap();
    seed(tmp.path());
    let wd = std::fs::canonicalize(tmp.path()).unwrap();
    let sshd = Sshd::start();
    let mut backends: Vec<(&str, Arc<dyn Backend>)> =
        vec![("local", Arc::new(local::Local::new(Some(wd.clone()))))];
    if let Some(sshd) = &sshd {
        backends.push(("ssh", ssh_backend(sshd, &wd, json!(sshd.known_hosts()))));
    }
    if let Some(image) = docker_image().await {
        let cfg = match config::parse("docker", &json!({"image": image})).unwrap() {
            BackendConfig::Docker(c) => c,
            other => panic!("{other:?}"),
        };
        backends.push((
            "docker",
            docker::Docker::create(cfg, "s_benchmark0", wd.clone(), None),
        ));
    }
    const N: usize = 40;
    for (name, backend) in &backends {
        for (tool, args) in [
            ("read_file", json!({"path": "a.txt"})),
            ("shell", json!({"command": "echo hi"})),
        ] {
            for _ in 0..3 {
                assert!(run(backend, tool, args.clone()).await.ok);
            }
            let mut ms = Vec::new();
            for _ in 0..N {
                let t = std::time::Instant::now();
                let out = run(backend, tool, args.clone()).await;
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
                assert!(out.ok, "{}", out.content);
            }
            ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!(
                "BENCH {name:6} {tool:9} p50 {:7.2} ms  p90 {:7.2} ms  (n={N})",
                percentile(&ms, 0.5),
                percentile(&ms, 0.9)
            );
        }
        backend.close().await;
    }
}

/// `backend.set{kind: ssh}` probes the host (QA): a refused port, a host that accepts TCP but
/// never speaks SSH (bounded by the probe's timeout), an unknown host key and a refused login
/// are `invalid_params` on `params.config.host` with the reason, and the session keeps its
/// backend; a reachable host with a known key switches.
#[tokio::test]
async fn backend_set_probes_an_ssh_host_and_keeps_the_backend_when_it_fails() {
    let h = crate::testkit::Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("auto").await;
    let set = |config: Value| snowpea_proto::session::v1::BackendSetParams {
        session_id: sid.clone(),
        kind: "ssh".into(),
        config: Some(snowpea_proto::wkt::to_struct(&config)),
    };
    let refused_on_host = |e: snowpea_session_error::Error| match e {
        snowpea_session_error::Error::InvalidParams { field, message } => {
            assert_eq!(field, "params.config.host", "{message}");
            message
        }
        other => panic!("expected invalid_params, got {other:?}"),
    };
    // Nothing listens on the port.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = within(
        LONG,
        "backend.set",
        h.app.backends.set(set(
            json!({"host": "127.0.0.1", "port": closed, "knownHosts": null}),
        )),
    )
    .await
    .unwrap_err();
    let why = refused_on_host(e);
    assert!(why.contains(&format!("127.0.0.1:{closed}")), "{why}");
    // Accepts TCP, never says a word: the probe gives up on its own.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let _held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            open.push(s);
        }
    });
    let e = within(
        LONG,
        "backend.set",
        h.app.backends.set(set(
            json!({"host": "127.0.0.1", "port": silent_port, "knownHosts": null}),
        )),
    )
    .await
    .unwrap_err();
    refused_on_host(e);
    let session = h.app.sessions.get(&sid).unwrap();
    assert_eq!(session.backend().kind(), BackendKind::Local, "unchanged");

    let Some(sshd) = Sshd::start() else {
        return;
    };
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let cfg = |known: Value| json!({"host": "127.0.0.1", "port": sshd.port, "user": user, "key": sshd.user_key(), "knownHosts": known});
    let e = within(
        LONG,
        "backend.set",
        h.app
            .backends
            .set(set(cfg(json!(sshd.wrong_known_hosts())))),
    )
    .await
    .unwrap_err();
    assert!(refused_on_host(e).contains("knownHosts"));
    let mut no_login = cfg(json!(sshd.known_hosts()));
    no_login["user"] = json!("snowpea-no-such-user");
    let e = within(LONG, "backend.set", h.app.backends.set(set(no_login)))
        .await
        .unwrap_err();
    refused_on_host(e);
    assert_eq!(session.backend().kind(), BackendKind::Local, "unchanged");
    within(
        LONG,
        "backend.set",
        h.app.backends.set(set(cfg(json!(sshd.known_hosts())))),
    )
    .await
    .unwrap();
    assert_eq!(session.backend().kind(), BackendKind::Ssh);
    session.backend().close().await;
}

/// Issue 32 item 9: `backend.set{kind:"docker"}` probes the engine first, as ssh probes its
/// host: an engine that cannot be reached is `invalid_params` on `params.kind` and the
/// session keeps its backend (before, it answered ok and every tool call then failed).
#[tokio::test]
async fn docker_backend_set_refuses_an_unreachable_engine() {
    let h = crate::testkit::Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let gone = h._tmp.path().join("no-engine.sock");
    let backends = super::component::Backends::new(
        h.app.sessions.registry().clone(),
        h.app.events.clone(),
        "snowpea-test".into(),
        Some(format!("unix://{}", gone.display())),
    );
    for config in [json!({}), json!({"container": "my-dev-box"})] {
        let e = within(
            LONG,
            "backend.set",
            backends.set(snowpea_proto::session::v1::BackendSetParams {
                session_id: sid.clone(),
                kind: "docker".into(),
                config: Some(snowpea_proto::wkt::to_struct(&config)),
            }),
        )
        .await
        .unwrap_err();
        match e {
            snowpea_session_error::Error::InvalidParams { field, message } => {
                assert_eq!(field, "params.kind", "{message}");
                assert!(message.contains("Docker Engine"), "{message}");
            }
            other => panic!("expected invalid_params, got {other:?}"),
        }
        let session = h.app.sessions.get(&sid).unwrap();
        assert_eq!(session.backend().kind(), BackendKind::Local);
    }
}

/// Issue 32 item 9: the docker config accepts `container` (attach to an existing one),
/// checked like a docker name, and not together with `image`.
#[test]
fn docker_config_accepts_container() {
    match config::parse("docker", &json!({"container": "dev_box-1.2"})).unwrap() {
        BackendConfig::Docker(d) => assert_eq!(d.container.as_deref(), Some("dev_box-1.2")),
        other => panic!("{other:?}"),
    }
    for (cfg, field) in [
        (json!({"container": "-v"}), "params.config.container"),
        (json!({"container": "a b"}), "params.config.container"),
        (json!({"container": 7}), "params.config.container"),
        (
            json!({"container": "x".repeat(200)}),
            "params.config.container",
        ),
        (
            json!({"container": "box", "image": "busybox"}),
            "params.config.image",
        ),
    ] {
        let err = config::parse("docker", &cfg).expect_err(field);
        assert!(err.to_string().starts_with(field), "{cfg}: {err}");
    }
}

/// Issue 32 item 9: the ssh master was started with `-M` on top of `ControlMaster=yes`,
/// which makes it `ask` and refuse every command's mux session: each `shell` call printed
/// "Master refused session request: Permission denied" and logged in again on a connection
/// of its own (the extra wait the issue saw). Commands now run over the master.
#[tokio::test]
async fn ssh_commands_run_over_the_master_connection() {
    let Some(sshd) = Sshd::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let b = ssh_backend(&sshd, dir.path(), json!(sshd.known_hosts()));
    for i in 0..3 {
        let out = run(&b, "shell", json!({"command": format!("echo run {i}")})).await;
        assert!(out.ok, "{out:?}");
        assert_eq!(out.content.trim_end(), format!("run {i}"), "{out:?}");
    }
    b.close().await;
}
