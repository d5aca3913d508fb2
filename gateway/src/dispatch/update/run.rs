//! `system.update`: run the upgrade for how this copy was installed, detached.
//!
//! The installer argv is, in order: the setting `updates.command` (a list of strings, run
//! as given — never through a shell), else `cargo install snowpea --locked --force` when the
//! running binary sits in cargo's bin directory (`$CARGO_HOME/bin`, default `~/.cargo/bin`).
//! Otherwise nothing starts: `started: false` with the command a person has to run and why.
//!
//! The subprocess gets its own process group (stopping the suite does not stop it), stdin
//! from `/dev/null`, and stdout/stderr appended to `$SNOWPEA_HOME/logs/update.log` (0600).
//! `system.updateProgress{phase: "started"}` goes out when it was spawned, `done` or
//! `failed` (with the exit status) when it ends; after `done`, `system.info` reports
//! `restartRequired: true`. While one runs (in this gateway, or one started by an earlier
//! gateway of the home, found through `run/update.pid`) another call answers
//! `started: false` with an error.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use serde_json::Value;
use snowpea_proto::system::v1::{SystemUpdateProgressNotification, SystemUpdateResult};

use super::Updates;

/// What a person runs to upgrade a cargo install.
pub const CARGO_COMMAND: &[&str] = &["cargo", "install", "snowpea", "--locked", "--force"];

fn pid_path(home: &snowpea_common::home::Home) -> PathBuf {
    home.run_dir().join("update.pid")
}

fn log_path(home: &snowpea_common::home::Home) -> PathBuf {
    home.logs_dir().join("update.log")
}

/// The installer argv from the settings, or why the setting is unusable.
fn configured(settings: &Value) -> Option<Result<Vec<String>, String>> {
    let v = settings.pointer("/updates/command")?;
    if v.is_null() {
        return None;
    }
    let argv: Option<Vec<String>> = v.as_array().and_then(|a| {
        a.iter()
            .map(|s| s.as_str().filter(|s| !s.is_empty()).map(str::to_owned))
            .collect()
    });
    Some(match argv {
        Some(a) if !a.is_empty() => Ok(a),
        _ => Err(
            "settings updates.command must be a non-empty list of strings (the installer's argv)"
                .into(),
        ),
    })
}

/// True when `exe` lives in cargo's bin directory.
fn cargo_installed(exe: &Path) -> bool {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    match (cargo_home, exe.parent()) {
        (Some(c), Some(dir)) => {
            let bin = c.join("bin");
            let bin = std::fs::canonicalize(&bin).unwrap_or(bin);
            dir == bin
        }
        _ => false,
    }
}

fn display(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}

/// True when a process `pid` exists.
fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

impl Updates {
    /// Answers `system.update`.
    pub async fn update(&self) -> SystemUpdateResult {
        let log = log_path(self.home());
        let log_s = log.to_string_lossy().into_owned();
        let settings =
            snowpea_common::settings::load_effective(self.home(), None).unwrap_or(Value::Null);
        let cargo_line = CARGO_COMMAND.join(" ");
        let not_started = |command: String, error: String| SystemUpdateResult {
            command,
            error: Some(error),
            log: log_s.clone(),
            started: false,
        };
        let argv = match configured(&settings) {
            Some(Ok(a)) => a,
            Some(Err(e)) => return not_started(cargo_line, e),
            None => {
                let exe = std::env::current_exe()
                    .and_then(std::fs::canonicalize)
                    .unwrap_or_default();
                if !cargo_installed(&exe) {
                    return not_started(
                        cargo_line,
                        format!(
                            "this copy ({}) was not installed with cargo install: upgrade it the way it was installed, or run the command by hand",
                            exe.display()
                        ),
                    );
                }
                CARGO_COMMAND.iter().map(|s| s.to_string()).collect()
            }
        };
        let command = display(&argv);
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let earlier = std::fs::read_to_string(pid_path(self.home()))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        if let Some(pid) = running.or(earlier).filter(|p| alive(*p)) {
            return not_started(command, format!("an update is already running (pid {pid})"));
        }
        let (out, err) = match open_log(&log, &command) {
            Ok(f) => f,
            Err(e) => return not_started(command, format!("cannot open {}: {e}", log.display())),
        };
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .env_remove(snowpea_common::orphans::MARK_ENV)
            .env("SNOWPEA_HOME", self.home().root())
            .process_group(0)
            .kill_on_drop(false);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return not_started(command, format!("cannot start {}: {e}", argv[0])),
        };
        let pid = child.id().unwrap_or_default();
        *running = Some(pid);
        drop(running);
        if let Err(e) =
            snowpea_common::home::write_private(&pid_path(self.home()), pid.to_string().as_bytes())
        {
            tracing::warn!(error = %e, "cannot write run/update.pid");
        }
        tracing::info!(pid, command = %command, "update started");
        self.broadcast(&SystemUpdateProgressNotification {
            message: format!("running {command}"),
            phase: "started".into(),
        });
        let me = self.clone();
        let log_for_task = log.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            let (phase, message) = match &status {
                Ok(s) if s.success() => (
                    "done",
                    "update finished: restart snowpea to run the new version".to_owned(),
                ),
                Ok(s) => (
                    "failed",
                    format!("update failed ({s}); see {}", log_for_task.display()),
                ),
                Err(e) => ("failed", format!("lost the update process: {e}")),
            };
            if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&log_for_task) {
                let _ = writeln!(
                    f,
                    "# {} {phase}: {message}",
                    snowpea_common::time::now_iso()
                );
            }
            if phase == "done" {
                me.restart_required.store(true, Ordering::SeqCst);
            }
            *me.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
            let _ = std::fs::remove_file(pid_path(me.home()));
            tracing::info!(phase, "update ended");
            me.broadcast(&SystemUpdateProgressNotification {
                message,
                phase: phase.into(),
            });
        });
        SystemUpdateResult {
            command,
            error: None,
            log: log_s,
            started: true,
        }
    }
}

/// Opens the log for appending (0600) with a header line; two handles for stdout/stderr.
fn open_log(path: &Path, command: &str) -> std::io::Result<(std::fs::File, std::fs::File)> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    writeln!(
        f,
        "# {} running: {command}",
        snowpea_common::time::now_iso()
    )?;
    let g = f.try_clone()?;
    Ok((f, g))
}
