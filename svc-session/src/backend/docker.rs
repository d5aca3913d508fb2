//! The `docker` backend: the Docker Engine API through `bollard` (`DOCKER_HOST`, else the
//! local socket). The session's container `snowpea-<first 8 chars of the session id>` runs
//! `config.image` (default `python:3.11-slim`) with `sleep infinity`, the workdir
//! bind-mounted at the same absolute path; it is created on the first tool call, removed
//! when the session closes or its backend changes, and containers a stopped daemon left
//! (label `snowpea.owner` = svc-session's orphan mark) are removed at start
//! ([`remove_leftovers`]). With `config.container` the backend attaches to that existing,
//! running container instead: nothing is created, and it is left running when the session
//! closes (issue 32 item 9). `backend.set` probes first ([`probe`]: the engine, the
//! container or the image), refusing with the field; there is no fallback to `local`: an
//! engine that goes away later fails the tool call with the reason.
//!
//! Every operation is an exec with an argv (the paths are arguments of fixed `sh`
//! scripts, never spliced into them): `stat`, `cat`, `readlink`, `mkdir -p`, writes through
//! the exec's stdin. A command that outlives its timeout is killed (its pid is kept in a
//! file in the container) and reports exit code 124.

use std::collections::HashMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, RemoveContainerOptions,
};
use futures::future::BoxFuture;
use futures::StreamExt;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::runtime::Handle;

use super::config::DockerConfig;
use super::{Backend, BackendKind, DirEntry, ExecRequest, Meta};
use crate::tools::shell::{finish_output, Capture, Utf8Stream, TIMEOUT_EXIT_CODE};
use crate::tools::{ToolContext, ToolOutput};

/// Longest wait for one engine call that is not a tool's command.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Label naming the svc-session that owns a container.
const OWNER_LABEL: &str = "snowpea.owner";

/// A session's container.
#[derive(Clone)]
pub struct Docker {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: DockerConfig,
    name: String,
    workdir: PathBuf,
    mark: Option<String>,
    rt: Handle,
    /// The engine client and whether the container exists, once made.
    state: tokio::sync::Mutex<Option<bollard::Docker>>,
}

impl std::fmt::Debug for Docker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Docker")
            .field("name", &self.inner.name)
            .field("image", &self.inner.cfg.image)
            .finish_non_exhaustive()
    }
}

/// The container name of session `session_id`.
pub fn container_name(session_id: &str) -> String {
    let id: String = session_id
        .trim_start_matches("s_")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(8)
        .collect();
    format!("snowpea-{id}")
}

fn engine_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("docker backend: {e}"))
}

/// Seconds bollard waits for one engine request.
const ENGINE_TIMEOUT_SECS: u64 = 120;
/// Longest [`probe`] waits for the engine.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A client of the engine at `host` (`unix://…`, `tcp://…`/`http://…`), else at bollard's
/// defaults (`DOCKER_HOST`, else the local socket).
fn engine_at(host: Option<&str>) -> Result<bollard::Docker, bollard::errors::Error> {
    match host {
        Some(h) if h.starts_with("unix://") => {
            bollard::Docker::connect_with_unix(h, ENGINE_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
        }
        Some(h) if h.starts_with("tcp://") || h.starts_with("http://") => {
            bollard::Docker::connect_with_http(h, ENGINE_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
        }
        _ => bollard::Docker::connect_with_defaults(),
    }
}

fn engine(host: Option<&str>) -> io::Result<bollard::Docker> {
    engine_at(host).map_err(|e| engine_error(format!("cannot reach the Docker Engine: {e}")))
}

/// Whether `backend.set{kind:"docker"}` can work (issue 32 item 9), at most
/// [`PROBE_TIMEOUT`]: the engine answers a ping (else the field `params.kind`), the
/// container to attach to exists and runs (`params.config.container`), or the image of
/// the session's own container is present (`params.config.image`). `Err((field, why))`.
pub async fn probe(cfg: &DockerConfig) -> Result<(), (&'static str, String)> {
    let check = async {
        let where_ = cfg.engine.as_deref().unwrap_or("its default address");
        let docker = engine_at(cfg.engine.as_deref()).map_err(|e| {
            (
                "params.kind",
                format!("cannot reach the Docker Engine at {where_}: {e}"),
            )
        })?;
        docker.ping().await.map_err(|e| {
            (
                "params.kind",
                format!("the Docker Engine at {where_} does not answer: {e}"),
            )
        })?;
        match &cfg.container {
            Some(c) => {
                let info = docker
                    .inspect_container(
                        c,
                        None::<bollard::query_parameters::InspectContainerOptions>,
                    )
                    .await
                    .map_err(|e| {
                        (
                            "params.config.container",
                            format!("no container {c:?}: {e}"),
                        )
                    })?;
                let running = info.state.and_then(|s| s.running).unwrap_or(false);
                if !running {
                    return Err((
                        "params.config.container",
                        format!("container {c:?} is not running; start it first"),
                    ));
                }
            }
            None => {
                docker.inspect_image(&cfg.image).await.map_err(|e| {
                    (
                        "params.config.image",
                        format!(
                            "image {:?} is not available to the engine ({e}); load or import it first",
                            cfg.image
                        ),
                    )
                })?;
            }
        }
        Ok(())
    };
    match tokio::time::timeout(PROBE_TIMEOUT, check).await {
        Ok(r) => r,
        Err(_) => Err((
            "params.kind",
            format!("the Docker Engine did not answer within {PROBE_TIMEOUT:?}"),
        )),
    }
}

/// Removes the containers a previous svc-session with orphan `mark` left behind. Errors
/// (no engine) are logged at debug level: most hosts have no engine.
pub async fn remove_leftovers(mark: String) {
    let Ok(docker) = engine(None) else { return };
    let mut filters = HashMap::new();
    filters.insert("label".to_owned(), vec![format!("{OWNER_LABEL}={mark}")]);
    let opts = ListContainersOptions {
        all: true,
        filters: Some(filters),
        ..Default::default()
    };
    match tokio::time::timeout(Duration::from_secs(10), docker.list_containers(Some(opts))).await {
        Ok(Ok(list)) => {
            for c in list {
                if let Some(id) = c.id {
                    let _ = docker
                        .remove_container(
                            &id,
                            Some(RemoveContainerOptions {
                                force: true,
                                ..Default::default()
                            }),
                        )
                        .await;
                    tracing::info!(container = %id, "removed a container a previous svc-session left");
                }
            }
        }
        Ok(Err(e)) => tracing::debug!(error = %e, "no Docker Engine to clean up"),
        Err(_) => tracing::debug!("the Docker Engine did not answer in time"),
    }
}

/// What one exec produced.
struct Done {
    code: Option<i64>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Docker {
    /// The backend of session `session_id` whose workdir is `session_workdir`; the
    /// container is made on first use. Must be called inside the tokio runtime.
    pub fn create(
        cfg: DockerConfig,
        session_id: &str,
        session_workdir: PathBuf,
        mark: Option<String>,
    ) -> Arc<dyn Backend> {
        let workdir = cfg.workdir.clone().unwrap_or(session_workdir);
        Arc::new(Docker {
            inner: Arc::new(Inner {
                name: cfg
                    .container
                    .clone()
                    .unwrap_or_else(|| container_name(session_id)),
                cfg,
                workdir,
                mark,
                rt: Handle::current(),
                state: tokio::sync::Mutex::new(None),
            }),
        })
    }
}

impl Inner {
    /// The engine, with the container created and started.
    async fn ready(&self) -> io::Result<bollard::Docker> {
        let mut state = self.state.lock().await;
        if let Some(d) = state.as_ref() {
            return Ok(d.clone());
        }
        let docker = engine(self.cfg.engine.as_deref())?;
        if self.cfg.container.is_some() {
            // Attached: the container is the user's; it must run, nothing is created.
            let info = tokio::time::timeout(
                CALL_TIMEOUT,
                docker.inspect_container(
                    &self.name,
                    None::<bollard::query_parameters::InspectContainerOptions>,
                ),
            )
            .await
            .map_err(|_| engine_error("the Docker Engine did not answer in time"))?
            .map_err(|e| engine_error(format!("no container `{}`: {e}", self.name)))?;
            if !info.state.and_then(|s| s.running).unwrap_or(false) {
                return Err(engine_error(format!(
                    "container `{}` is not running",
                    self.name
                )));
            }
            *state = Some(docker.clone());
            return Ok(docker);
        }
        let call = async {
            docker.inspect_image(&self.cfg.image).await.map_err(|e| {
                engine_error(format!(
                    "image `{}` is not available to the engine ({e}); load or import it first",
                    self.cfg.image
                ))
            })?;
            // A container of the same name is a leftover of this session id: replace it.
            let _ = docker
                .remove_container(
                    &self.name,
                    Some(RemoveContainerOptions {
                        force: true,
                        ..Default::default()
                    }),
                )
                .await;
            let wd = self.workdir.display().to_string();
            let mut labels = HashMap::new();
            labels.insert(
                OWNER_LABEL.to_owned(),
                self.mark.clone().unwrap_or_default(),
            );
            let body = ContainerCreateBody {
                image: Some(self.cfg.image.clone()),
                cmd: Some(vec!["sleep".into(), "infinity".into()]),
                working_dir: Some(wd.clone()),
                labels: Some(labels),
                host_config: Some(HostConfig {
                    binds: Some(vec![format!("{wd}:{wd}")]),
                    ..Default::default()
                }),
                ..Default::default()
            };
            docker
                .create_container(
                    Some(CreateContainerOptions {
                        name: Some(self.name.clone()),
                        ..Default::default()
                    }),
                    body,
                )
                .await
                .map_err(engine_error)?;
            docker
                .start_container(
                    &self.name,
                    None::<bollard::query_parameters::StartContainerOptions>,
                )
                .await
                .map_err(engine_error)?;
            tracing::info!(container = %self.name, image = %self.cfg.image, "container started");
            Ok::<_, io::Error>(())
        };
        tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .map_err(|_| engine_error("the Docker Engine did not answer in time"))??;
        *state = Some(docker.clone());
        Ok(docker)
    }

    /// Runs `cmd` in the container (stdin from `input` when given) to its end.
    async fn exec(&self, cmd: Vec<String>, input: Option<Vec<u8>>) -> io::Result<Done> {
        let docker = self.ready().await?;
        let run = async {
            let exec = docker
                .create_exec(
                    &self.name,
                    CreateExecOptions {
                        cmd: Some(cmd),
                        attach_stdout: Some(true),
                        attach_stderr: Some(true),
                        attach_stdin: Some(input.is_some()),
                        ..Default::default()
                    },
                )
                .await
                .map_err(engine_error)?;
            let mut done = Done {
                code: None,
                stdout: Vec::new(),
                stderr: Vec::new(),
            };
            if let StartExecResults::Attached {
                mut output,
                input: mut stdin,
            } = docker
                .start_exec(&exec.id, None)
                .await
                .map_err(engine_error)?
            {
                if let Some(bytes) = input {
                    stdin.write_all(&bytes).await?;
                    stdin.shutdown().await?;
                }
                drop(stdin);
                while let Some(item) = output.next().await {
                    match item.map_err(engine_error)? {
                        bollard::container::LogOutput::StdErr { message } => {
                            done.stderr.extend_from_slice(&message)
                        }
                        bollard::container::LogOutput::StdOut { message }
                        | bollard::container::LogOutput::Console { message } => {
                            done.stdout.extend_from_slice(&message)
                        }
                        bollard::container::LogOutput::StdIn { .. } => {}
                    }
                }
            }
            done.code = docker
                .inspect_exec(&exec.id)
                .await
                .map_err(engine_error)?
                .exit_code;
            Ok::<_, io::Error>(done)
        };
        tokio::time::timeout(CALL_TIMEOUT, run)
            .await
            .map_err(|_| engine_error("the command in the container did not finish in time"))?
    }

    /// A file operation: `cmd` must exit 0; its stderr becomes the error.
    fn op(&self, cmd: &[&str], input: Option<Vec<u8>>) -> io::Result<Vec<u8>> {
        let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        let done = self.rt.block_on(self.exec(cmd, input))?;
        if done.code == Some(0) {
            return Ok(done.stdout);
        }
        let msg = String::from_utf8_lossy(&done.stderr).trim().to_owned();
        let kind = if msg.contains("No such file")
            || msg.contains("can't stat")
            || msg.contains("cannot stat")
        {
            io::ErrorKind::NotFound
        } else if msg.contains("Permission denied") {
            io::ErrorKind::PermissionDenied
        } else if msg.contains("Not a directory") {
            io::ErrorKind::NotADirectory
        } else {
            io::ErrorKind::Other
        };
        Err(io::Error::new(kind, msg))
    }

    fn stat(&self, path: &Path, follow: bool) -> io::Result<Meta> {
        let p = path.to_string_lossy();
        let args: Vec<&str> = if follow {
            vec!["stat", "-L", "-c", "%F|%s", "--", &p]
        } else {
            vec!["stat", "-c", "%F|%s", "--", &p]
        };
        let out = self.op(&args, None)?;
        let text = String::from_utf8_lossy(&out);
        let (kind, size) = text.trim().rsplit_once('|').unwrap_or((text.trim(), "0"));
        Ok(Meta {
            is_dir: kind == "directory",
            is_file: kind.contains("regular"),
            is_symlink: kind == "symbolic link",
            len: size.parse().unwrap_or(0),
        })
    }

    async fn run_command(self: Arc<Self>, req: ExecRequest, ctx: ToolContext) -> ToolOutput {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let started = Instant::now();
        let docker = match self.ready().await {
            Ok(d) => d,
            Err(e) => return ToolOutput::error(e.to_string()),
        };
        let pidfile = format!(
            "/tmp/.snowpea-exec-{}-{}.pid",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let cmd = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "echo $$ > \"$0\"; cd \"$1\" || exit 1; exec sh -c \"$2\"".to_owned(),
            pidfile.clone(),
            req.cwd.display().to_string(),
            req.command.clone(),
        ];
        let exec = match docker
            .create_exec(
                &self.name,
                CreateExecOptions {
                    cmd: Some(cmd),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    env: Some(vec!["PAGER=cat".to_owned(), "GIT_PAGER=cat".to_owned()]),
                    ..Default::default()
                },
            )
            .await
        {
            Ok(e) => e,
            Err(e) => return ToolOutput::error(engine_error(e).to_string()),
        };
        let mut output = match docker.start_exec(&exec.id, None).await {
            Ok(StartExecResults::Attached { output, .. }) => output,
            Ok(StartExecResults::Detached) => {
                return ToolOutput::error("docker backend: exec detached")
            }
            Err(e) => return ToolOutput::error(engine_error(e).to_string()),
        };
        let mut capture = Capture::new(ctx.output_cap);
        let mut decoder = Utf8Stream::default();
        let deadline = tokio::time::sleep(req.timeout);
        tokio::pin!(deadline);
        let (mut timed_out, mut interrupted, mut lost) = (false, false, None);
        loop {
            tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => { interrupted = true; break }
                _ = &mut deadline => { timed_out = true; break }
                item = output.next() => match item {
                    Some(Ok(log)) => {
                        let bytes = match log {
                            bollard::container::LogOutput::StdOut { message }
                            | bollard::container::LogOutput::StdErr { message }
                            | bollard::container::LogOutput::Console { message } => message,
                            bollard::container::LogOutput::StdIn { .. } => continue,
                        };
                        capture.push(&bytes);
                        let text = decoder.push(&bytes);
                        if !text.is_empty() {
                            let _ = ctx.progress.send(text);
                        }
                    }
                    Some(Err(e)) => { lost = Some(e.to_string()); break }
                    None => break,
                }
            }
        }
        drop(output);
        if timed_out || interrupted {
            let kill = vec![
                "sh".into(),
                "-c".into(),
                "kill -KILL $(cat \"$0\") 2>/dev/null; true".into(),
                pidfile.clone(),
            ];
            let _ = self.exec(kill, None).await;
        }
        let rest = decoder.finish();
        if !rest.is_empty() {
            let _ = ctx.progress.send(rest);
        }
        let _ = self
            .exec(vec!["rm".into(), "-f".into(), pidfile], None)
            .await;
        if let Some(e) = lost {
            return ToolOutput::error(format!(
                "docker backend: the connection to the engine broke during the command: {e}"
            ));
        }
        let code = if timed_out || interrupted {
            None
        } else {
            docker
                .inspect_exec(&exec.id)
                .await
                .ok()
                .and_then(|i| i.exit_code)
        };
        let status = code.map(|c| {
            use std::os::unix::process::ExitStatusExt;
            std::process::ExitStatus::from_raw(((c as i32) & 0xff) << 8)
        });
        let mut out = finish_output(
            capture.text(),
            capture.truncated(),
            status,
            timed_out,
            interrupted,
            started,
        );
        if timed_out {
            out.ok = false;
            if let serde_json::Value::Object(m) = &mut out.meta {
                m.insert("exitCode".into(), json!(TIMEOUT_EXIT_CODE));
            }
            out.content.push_str(&format!(
                "\n[timed out after {} s; the command was killed]",
                req.timeout.as_secs_f64()
            ));
        }
        out
    }

    async fn remove(&self) {
        let docker = self.state.lock().await.take();
        if self.cfg.container.is_some() {
            // An attached container is the user's: left running.
            return;
        }
        if let Some(docker) = docker {
            let _ = tokio::time::timeout(
                CALL_TIMEOUT,
                docker.remove_container(
                    &self.name,
                    Some(RemoveContainerOptions {
                        force: true,
                        ..Default::default()
                    }),
                ),
            )
            .await;
            tracing::info!(container = %self.name, "container removed");
        }
    }
}

/// A shell script listing a directory's entries as `L <path>` (symlink) or `F <path>`.
const LIST_SCRIPT: &str = "for f in \"$0\"/* \"$0\"/.[!.]* \"$0\"/..?*; do \
     if [ -L \"$f\" ]; then echo \"L $f\"; elif [ -e \"$f\" ]; then echo \"F $f\"; fi; done";

impl Backend for Docker {
    fn kind(&self) -> BackendKind {
        BackendKind::Docker
    }

    fn workdir(&self) -> Option<PathBuf> {
        Some(self.inner.workdir.clone())
    }

    fn metadata(&self, path: &Path) -> io::Result<Meta> {
        self.inner.stat(path, true)
    }

    fn symlink_metadata(&self, path: &Path) -> io::Result<Meta> {
        self.inner.stat(path, false)
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        let bytes = self
            .inner
            .op(&["cat", "--", &path.to_string_lossy()], None)?;
        Ok(Box::new(io::Cursor::new(bytes)))
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        let out = self
            .inner
            .op(&["readlink", "--", &path.to_string_lossy()], None)?;
        Ok(PathBuf::from(
            String::from_utf8_lossy(&out).trim_end_matches('\n'),
        ))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let meta = self.metadata(path)?;
        if !meta.is_dir {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        let out = self
            .inner
            .op(&["sh", "-c", LIST_SCRIPT, &path.to_string_lossy()], None)?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| {
                let (t, p) = l.split_once(' ')?;
                let p = PathBuf::from(p);
                Some(DirEntry {
                    name: p.file_name()?.to_string_lossy().into_owned(),
                    is_symlink: t == "L",
                    path: p,
                })
            })
            .collect())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner
            .op(&["mkdir", "-p", "--", &path.to_string_lossy()], None)
            .map(|_| ())
    }

    /// Written in place through `cat` (keeps the file's mode and owner).
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.inner
            .op(
                &["sh", "-c", "cat > \"$0\"", &path.to_string_lossy()],
                Some(bytes.to_vec()),
            )
            .map(|_| ())
    }

    /// `rm -f` of a file or link (a directory is refused; a missing file is no error).
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        if self.symlink_metadata(path).is_ok_and(|m| m.is_dir) {
            return Err(io::Error::other("a directory is in the way"));
        }
        self.inner
            .op(&["rm", "-f", "--", &path.to_string_lossy()], None)
            .map(|_| ())
    }

    fn exec(&self, req: ExecRequest, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(self.inner.clone().run_command(req, ctx))
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.remove().await })
    }
}
