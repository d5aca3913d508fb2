//! The audio devices: recording per session (`audio.record.start/stop`) with the detected
//! recorder or `audio.recorder`, and playback (`audio.speak{play:true}`) with the detected
//! player or `audio.player`. Both run as watched children ([`crate::child`]); a recording
//! is stopped with SIGINT (so the recorder finishes its wav), then SIGTERM, then SIGKILL,
//! and a header a killed recorder left unfinished is repaired.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::AsyncReadExt;

use crate::child::{command, run, ChildSpec, GroupGuard};
use crate::engines::command as template;
use crate::error::{Error, Result};

/// A recording stops by itself after this long.
pub const MAX_RECORDING: Duration = Duration::from_secs(10 * 60);
/// How long a just-started recorder must stay up to count as recording.
const STARTUP_GRACE: Duration = Duration::from_millis(500);

/// argv of a recorder writing 16 kHz mono 16-bit wav to `out`: a template with `{out}`,
/// else the built-in line of a known recorder, else `<program> <out>`.
pub fn recorder_argv(recorder: &str, out: &Path) -> Result<Vec<String>> {
    let out_s = out.to_string_lossy();
    let t = if template::mentions(recorder, "out") {
        recorder.to_owned()
    } else {
        match Path::new(recorder)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(recorder)
        {
            "arecord" => format!("{recorder} -q -f S16_LE -r 16000 -c 1 -t wav {{out}}"),
            "rec" => format!("{recorder} -q -r 16000 -c 1 -b 16 {{out}}"),
            "ffmpeg" => {
                format!("{recorder} -loglevel error -f alsa -i default -ac 1 -ar 16000 -y {{out}}")
            }
            _ => format!("{recorder} {{out}}"),
        }
    };
    template::expand(&t, &[("out", &out_s)]).map_err(|e| Error::Off {
        message: format!("audio.recorder: {e}"),
        reason: "no_recorder",
    })
}

/// argv of a player playing `path`.
pub fn player_argv(player: &str, path: &Path) -> Result<Vec<String>> {
    let path_s = path.to_string_lossy();
    let t = if template::mentions(player, "path") {
        player.to_owned()
    } else {
        match Path::new(player)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(player)
        {
            "aplay" | "play" => format!("{player} -q {{path}}"),
            "ffplay" => format!("{player} -nodisp -autoexit -loglevel quiet {{path}}"),
            _ => format!("{player} {{path}}"),
        }
    };
    template::expand(&t, &[("path", &path_s)]).map_err(|e| Error::Off {
        message: format!("audio.player: {e}"),
        reason: "no_device",
    })
}

/// Plays `path` with `player` (argv, watched, deadline = its length + 15 s).
pub async fn play(player: &str, path: &Path, length: Duration) -> Result<()> {
    let argv = player_argv(player, path)?;
    let mut it = argv.into_iter();
    let program = it.next().unwrap_or_default();
    let spec = ChildSpec::new(
        "player",
        program,
        it.map(Into::into).collect(),
        length + Duration::from_secs(15),
    );
    run(&spec, None).await?;
    Ok(())
}

struct Recording {
    path: PathBuf,
    child: tokio::process::Child,
    guard: GroupGuard,
    stderr: Arc<Mutex<String>>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    watchdog: tokio::task::JoinHandle<()>,
}

/// The running recordings, one per session (`""` = no session).
#[derive(Default)]
pub struct Recordings {
    map: tokio::sync::Mutex<HashMap<String, Recording>>,
}

impl std::fmt::Debug for Recordings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recordings").finish_non_exhaustive()
    }
}

impl Recordings {
    /// Starts recording for `key` into `out`. A session already recording gets its
    /// running recording back (`false` = it was already running).
    pub async fn start(&self, key: &str, recorder: &str, out: PathBuf) -> Result<(PathBuf, bool)> {
        let mut map = self.map.lock().await;
        if let Some(r) = map.get_mut(key) {
            if matches!(r.child.try_wait(), Ok(None)) {
                return Ok((r.path.clone(), false));
            }
            map.remove(key);
        }
        let argv = recorder_argv(recorder, &out)?;
        let mut it = argv.into_iter();
        let program = it.next().unwrap_or_default();
        let spec = ChildSpec::new(
            "recorder",
            &program,
            it.map(Into::into).collect(),
            MAX_RECORDING,
        );
        let mut child = command(&spec).spawn().map_err(|e| Error::Off {
            message: format!("cannot start the recorder {program}: {e}"),
            reason: "no_recorder",
        })?;
        let pid = child.id().unwrap_or(0);
        let guard = GroupGuard::new(pid);
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut stderr_task = None;
        if let Some(mut pipe) = child.stderr.take() {
            let stderr = stderr.clone();
            stderr_task = Some(tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut s = stderr.lock().expect("stderr lock");
                    if s.len() < 4096 {
                        s.push_str(&String::from_utf8_lossy(&buf[..n]));
                    }
                }
            }));
        }
        if let Some(mut pipe) = child.stdout.take() {
            tokio::spawn(async move {
                let mut sink = tokio::io::sink();
                let _ = tokio::io::copy(&mut pipe, &mut sink).await;
            });
        }
        // A recorder with no device exits at once: answer that, not "recording".
        if let Ok(Ok(status)) = tokio::time::timeout(STARTUP_GRACE, child.wait()).await {
            // Let the reader take in what the recorder said before it died.
            if let Some(t) = stderr_task.take() {
                let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
            }
            let tail = stderr.lock().expect("stderr lock").trim().to_owned();
            return Err(Error::Off {
                message: format!("the recorder {program} stopped at once ({status}): {tail}"),
                reason: "no_device",
            });
        }
        let watchdog = tokio::spawn(async move {
            tokio::time::sleep(MAX_RECORDING).await;
            let _ =
                nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGINT);
        });
        tracing::info!(session = key, pid, path = %out.display(), "recording started");
        map.insert(
            key.to_owned(),
            Recording {
                path: out.clone(),
                child,
                guard,
                stderr,
                stderr_task,
                watchdog,
            },
        );
        Ok((out, true))
    }

    /// Stops the recording of `key` and returns its finished wav.
    pub async fn stop(&self, key: &str) -> Result<PathBuf> {
        let mut r = self.map.lock().await.remove(key).ok_or_else(|| {
            Error::NotFound(if key.is_empty() {
                "nothing is recording (without a session)".to_owned()
            } else {
                format!("session {key} is not recording")
            })
        })?;
        r.watchdog.abort();
        for (signal, wait) in [
            (Signal::SIGINT, Duration::from_secs(3)),
            (Signal::SIGTERM, Duration::from_secs(2)),
            (Signal::SIGKILL, Duration::from_secs(2)),
        ] {
            if matches!(r.child.try_wait(), Ok(Some(_))) {
                break;
            }
            r.guard.signal(signal);
            if tokio::time::timeout(wait, r.child.wait()).await.is_ok() {
                break;
            }
        }
        r.guard.signal(Signal::SIGKILL);
        r.guard.disarm();
        if let Some(t) = r.stderr_task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
        }
        let _ = crate::convert::repair_wav_header(&r.path);
        let len = std::fs::metadata(&r.path).map(|m| m.len()).unwrap_or(0);
        if len <= 44 {
            let tail = r.stderr.lock().expect("stderr lock").trim().to_owned();
            return Err(Error::Engine {
                engine: "recorder".into(),
                reason: "failed",
                message: format!(
                    "the recorder wrote no audio{}",
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!(": {tail}")
                    }
                ),
                pid: None,
                stderr: tail,
            });
        }
        tracing::info!(session = key, path = %r.path.display(), bytes = len, "recording stopped");
        Ok(r.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_recorders_get_their_built_in_lines() {
        let out = Path::new("/tmp/a b.wav");
        assert_eq!(
            recorder_argv("arecord", out).unwrap(),
            [
                "arecord",
                "-q",
                "-f",
                "S16_LE",
                "-r",
                "16000",
                "-c",
                "1",
                "-t",
                "wav",
                "/tmp/a b.wav"
            ]
        );
        assert_eq!(
            recorder_argv("my-rec --to={out}", out).unwrap(),
            ["my-rec", "--to=/tmp/a b.wav"]
        );
        assert_eq!(
            player_argv("paplay", out).unwrap(),
            ["paplay", "/tmp/a b.wav"]
        );
    }
}
