//! `audio.install` (issue 7): installs a local engine or one of its voices in child
//! processes, streaming `audio.install.progress` with `stage` (resolve, download, install,
//! verify, check), `step`/`steps`, `percent` and bytes where known, and every installer
//! line. Python engines go into the venv `$SNOWPEA_HOME/audio-runtime/venv` with pip
//! (which honours `PIP_INDEX_URL`, `PIP_FIND_LINKS`, `PIP_NO_INDEX` from the service's
//! environment, e.g. a local wheel directory); piper voices are fetched by a small Python
//! helper. System packages (espeak-ng, sox) are not installed: the answer is `ok:false`
//! with the platform's install command as `hint`. Installing never selects the engine
//! (settings are not touched); detection is re-run afterwards.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use snowpea_proto::audio::v1::{
    AudioInstallParams, AudioInstallProgressNotification, AudioInstallResult,
};
use tokio::sync::mpsc;

use crate::child::{run, ChildSpec};
use crate::engines::{self, piper};
use crate::error::{Error, Result};
use crate::App;

/// Lines of installer output kept for `log`.
const LOG_LINES: usize = 40;
/// Deadline of one installer step (venv creation, pip install, a voice download).
const STEP_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Where piper voices come from unless `SNOWPEA_AUDIO_PIPER_VOICES_URL` says otherwise.
pub const PIPER_VOICES_URL: &str = "https://huggingface.co/rhasspy/piper-voices/resolve/main";
/// The voice download helper.
const FETCH_HELPER: &str = include_str!("helpers/fetch.py");

/// What `audio.install{engine}` means after id normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A PyPI package installed into the runtime venv.
    Pip {
        /// Bare engine id reported back.
        engine: &'static str,
        /// The PyPI package.
        package: &'static str,
    },
    /// A package of the operating system (not installed by the daemon).
    System {
        /// Bare engine id.
        engine: &'static str,
        /// Package name for the platform's package manager.
        package: &'static str,
    },
    /// A known engine this daemon does not run.
    Unsupported {
        /// Bare engine id.
        engine: &'static str,
        /// Why.
        why: &'static str,
    },
}

impl Target {
    /// The bare engine id.
    pub fn engine(&self) -> &'static str {
        match self {
            Target::Pip { engine, .. }
            | Target::System { engine, .. }
            | Target::Unsupported { engine, .. } => engine,
        }
    }
}

/// Normalises an install id.
pub fn target(id: &str) -> Option<Target> {
    Some(match id.trim().to_ascii_lowercase().as_str() {
        "faster-whisper" | "local-whisper" | "whisper" | "whisper-ctranslate2" => Target::Pip {
            engine: "faster-whisper",
            package: "whisper-ctranslate2",
        },
        "piper" | "piper-tts" => Target::Pip {
            engine: engines::PIPER,
            package: "piper-tts",
        },
        "pocketsphinx" => Target::Pip {
            engine: engines::POCKETSPHINX,
            package: "pocketsphinx",
        },
        "espeak-ng" | "espeak" => Target::System {
            engine: engines::ESPEAK,
            package: "espeak-ng",
        },
        "sox" => Target::System {
            engine: "sox",
            package: "sox",
        },
        "say" => Target::Unsupported {
            engine: "say",
            why: "`say` is part of macOS; this machine is not a Mac",
        },
        "powershell" => Target::Unsupported {
            engine: "powershell",
            why: "PowerShell speech is part of Windows; this machine is not Windows",
        },
        "edge-tts" => Target::Unsupported {
            engine: "edge-tts",
            why: "edge-tts is a cloud service; this daemon runs local engines only (espeak-ng, piper)",
        },
        "supertonic" => Target::Unsupported {
            engine: "supertonic",
            why: "supertonic is not supported by this daemon; use piper or espeak-ng",
        },
        _ => return None,
    })
}

/// The platform's own command to install a system package.
pub fn system_install_hint(package: &str) -> String {
    if cfg!(target_os = "macos") {
        return format!("brew install {package}");
    }
    let os = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let field = |k: &str| {
        os.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .map(|v| v.trim_matches('"').to_ascii_lowercase())
            .unwrap_or_default()
    };
    let ids = format!("{} {}", field("ID"), field("ID_LIKE"));
    let has = |s: &str| ids.split_whitespace().any(|w| w == s);
    if has("debian") || has("ubuntu") {
        format!("sudo apt-get install -y {package}")
    } else if has("fedora") || has("rhel") || has("centos") {
        format!("sudo dnf install -y {package}")
    } else if has("arch") {
        format!("sudo pacman -S {package}")
    } else if has("alpine") {
        format!("sudo apk add {package}")
    } else if has("suse") || has("opensuse") {
        format!("sudo zypper install {package}")
    } else {
        format!("install the {package} package with your system's package manager")
    }
}

/// Publishes progress events of one install and keeps the log tail.
struct Progress<'a> {
    app: &'a App,
    engine: &'static str,
    voice: String,
    steps: i64,
    stages: &'static [&'static str],
    log: VecDeque<String>,
}

impl Progress<'_> {
    fn step_of(&self, stage: &str) -> i64 {
        self.stages
            .iter()
            .position(|s| *s == stage)
            .map(|i| i as i64 + 1)
            .unwrap_or(0)
    }

    fn emit(
        &mut self,
        stage: &str,
        percent: Option<f64>,
        line: &str,
        bytes: Option<(u64, Option<u64>)>,
    ) {
        if !line.is_empty() {
            self.log.push_back(line.to_owned());
            while self.log.len() > LOG_LINES {
                self.log.pop_front();
            }
        }
        let p = AudioInstallProgressNotification {
            engine: self.engine.to_owned(),
            voice: self.voice.clone(),
            stage: stage.to_owned(),
            step: self.step_of(stage),
            steps: self.steps,
            line: line.to_owned(),
            percent,
            bytes_done: bytes.map(|(done, _)| done as i64),
            bytes_total: bytes.and_then(|(_, total)| total).map(|t| t as i64),
        };
        self.app.hub.publish(&p, Vec::new());
    }

    fn log(&self) -> String {
        self.log.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Runs `spec`, publishing each output line under the stage `classify` picks (it may
/// move the stage forward; the previous stage is closed at 100%).
async fn run_staged(
    p: &mut Progress<'_>,
    spec: &ChildSpec,
    stage: &mut &'static str,
    classify: impl Fn(&str) -> Option<&'static str>,
    on_line: impl Fn(&str) -> Option<(u64, Option<u64>, f64)>,
) -> std::result::Result<(), crate::child::ChildError> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let fut = run(spec, Some(tx));
    tokio::pin!(fut);
    let result = loop {
        tokio::select! {
            r = &mut fut => break r,
            Some(line) = rx.recv() => handle_line(p, stage, &classify, &on_line, &line),
        }
    };
    while let Ok(line) = rx.try_recv() {
        handle_line(p, stage, &classify, &on_line, &line);
    }
    result.map(|_| ())
}

fn handle_line(
    p: &mut Progress<'_>,
    stage: &mut &'static str,
    classify: &impl Fn(&str) -> Option<&'static str>,
    on_line: &impl Fn(&str) -> Option<(u64, Option<u64>, f64)>,
    line: &str,
) {
    if let Some(next) = classify(line) {
        if p.step_of(next) > p.step_of(stage) {
            p.emit(stage, Some(100.0), "", None);
            *stage = next;
            p.emit(stage, Some(0.0), "", None);
        }
    }
    match on_line(line) {
        Some((done, total, percent)) => p.emit(stage, Some(percent), "", Some((done, total))),
        None => p.emit(stage, None, line, None),
    }
}

/// Where pip output says it is.
fn pip_stage(line: &str) -> Option<&'static str> {
    let l = line.trim_start();
    if l.starts_with("Collecting")
        || l.starts_with("Looking in")
        || l.starts_with("Requirement already")
    {
        Some("resolve")
    } else if l.starts_with("Downloading")
        || l.starts_with("Processing")
        || l.starts_with("Using cached")
        || l.starts_with("Obtaining")
    {
        Some("download")
    } else if l.starts_with("Installing collected packages")
        || l.starts_with("Building wheel")
        || l.starts_with("Successfully installed")
    {
        Some("install")
    } else {
        None
    }
}

/// Runs `audio.install`.
pub async fn install(app: &App, params: AudioInstallParams) -> Result<AudioInstallResult> {
    let target = target(&params.engine).ok_or_else(|| {
        Error::invalid(
            "params.engine",
            format!(
                "unknown engine {:?} (installable: faster-whisper, piper, pocketsphinx; system packages: espeak-ng, sox)",
                params.engine
            ),
        )
    })?;
    let voice = params.voice.clone().filter(|v| !v.trim().is_empty());
    let answer = |ok: bool, hint: Option<String>, log: String| AudioInstallResult {
        engine: target.engine().to_owned(),
        hint,
        log,
        ok,
        voice: voice.clone(),
    };
    match &target {
        Target::System { package, .. } => {
            return Ok(answer(
                false,
                Some(format!(
                    "{} is a system package: {}",
                    package,
                    system_install_hint(package)
                )),
                String::new(),
            ))
        }
        Target::Unsupported { why, .. } => {
            return Ok(answer(false, Some(why.to_string()), String::new()))
        }
        Target::Pip { .. } => {}
    }
    if voice.is_some() && target.engine() != engines::PIPER {
        return Err(Error::invalid(
            "params.voice",
            format!("{} has no installable voices", target.engine()),
        ));
    }
    // One install at a time: two pips in one venv corrupt it.
    let _guard = app.install_lock.lock().await;
    let outcome = match (&target, &voice) {
        (_, Some(v)) => install_piper_voice(app, v).await,
        (Target::Pip { engine, package }, None) if params.warmup => {
            warmup(app, engine, package).await
        }
        (Target::Pip { engine, package }, None) => install_pip(app, engine, package).await,
        _ => unreachable!("system and unsupported targets answered above"),
    };
    app.invalidate();
    let (_, det) = app.state().await;
    let detected = match target.engine() {
        engines::PIPER => match &voice {
            Some(v) => det.piper_voices.iter().any(|iv| &iv.id == v),
            None => det.piper.is_some(),
        },
        engines::POCKETSPHINX => det.pocketsphinx_python.is_some(),
        _ => det.whisper.is_some(),
    };
    let (mut p, failure) = outcome?;
    p.emit(
        "check",
        Some(100.0),
        if detected {
            "detected"
        } else {
            "not detected after install"
        },
        None,
    );
    let hint = match (&failure, detected) {
        (Some(f), _) => Some(f.clone()),
        (None, false) => Some(format!(
            "{} installed but is not detected; see log",
            target.engine()
        )),
        (None, true) => None,
    };
    Ok(answer(detected && failure.is_none(), hint, p.log()))
}

type Outcome<'a> = Result<(Progress<'a>, Option<String>)>;

async fn ensure_venv<'a>(
    app: &'a App,
    p: &mut Progress<'a>,
    stage: &mut &'static str,
) -> std::result::Result<PathBuf, String> {
    let python = app.paths.venv_bin("python");
    if python.exists() {
        p.emit(
            stage,
            Some(0.0),
            &format!("using {}", app.paths.venv().display()),
            None,
        );
        return Ok(python);
    }
    let (_, det) = app.state().await;
    let Some(system) = det.python.clone() else {
        return Err(format!(
            "python3 is not installed: {}",
            system_install_hint("python3-venv")
        ));
    };
    std::fs::create_dir_all(app.paths.root()).map_err(|e| e.to_string())?;
    p.emit(
        stage,
        Some(0.0),
        &format!("creating {}", app.paths.venv().display()),
        None,
    );
    let spec = ChildSpec::new(
        "python3 -m venv",
        system,
        vec!["-m".into(), "venv".into(), app.paths.venv().into()],
        STEP_TIMEOUT,
    );
    run_staged(p, &spec, stage, |_| None, |_| None)
        .await
        .map_err(|e| {
            format!(
                "creating the venv failed ({e}); on Debian: {}",
                system_install_hint("python3-venv")
            )
        })?;
    Ok(python)
}

async fn install_pip<'a>(app: &'a App, engine: &'static str, package: &str) -> Outcome<'a> {
    let mut p = Progress {
        app,
        engine,
        voice: String::new(),
        steps: 4,
        stages: &["resolve", "download", "install", "check"],
        log: VecDeque::new(),
    };
    let mut stage: &'static str = "resolve";
    let python = match ensure_venv(app, &mut p, &mut stage).await {
        Ok(py) => py,
        Err(why) => return Ok((p, Some(why))),
    };
    let spec = ChildSpec::new(
        "pip",
        python,
        vec![
            "-m".into(),
            "pip".into(),
            "install".into(),
            "--disable-pip-version-check".into(),
            "--progress-bar".into(),
            "off".into(),
            package.into(),
        ],
        STEP_TIMEOUT,
    );
    let failure = run_staged(&mut p, &spec, &mut stage, pip_stage, |_| None)
        .await
        .err()
        .map(|e| format!("pip install {package} failed: {e}"));
    if failure.is_none() {
        p.emit(stage, Some(100.0), "", None);
    }
    Ok((p, failure))
}

async fn warmup<'a>(app: &'a App, engine: &'static str, _package: &str) -> Outcome<'a> {
    let mut p = Progress {
        app,
        engine,
        voice: String::new(),
        steps: 1,
        stages: &["check"],
        log: VecDeque::new(),
    };
    p.emit(
        "check",
        Some(0.0),
        &format!("{engine} has no first-run assets to download"),
        None,
    );
    Ok((p, None))
}

/// Parses the fetch helper's `PROGRESS done total` lines.
fn fetch_progress(line: &str) -> Option<(u64, Option<u64>, f64)> {
    let rest = line.strip_prefix("PROGRESS ")?;
    let mut it = rest.split_whitespace();
    let done: u64 = it.next()?.parse().ok()?;
    let total: Option<u64> = it.next().and_then(|t| t.parse().ok()).filter(|t| *t > 0);
    let percent = total
        .map(|t| (done as f64 * 100.0 / t as f64).min(100.0))
        .unwrap_or(0.0);
    Some((done, total, percent))
}

async fn install_piper_voice<'a>(app: &'a App, voice: &str) -> Outcome<'a> {
    let mut p = Progress {
        app,
        engine: engines::PIPER,
        voice: voice.to_owned(),
        steps: 4,
        stages: &["resolve", "download", "verify", "check"],
        log: VecDeque::new(),
    };
    let base = std::env::var("SNOWPEA_AUDIO_PIPER_VOICES_URL")
        .unwrap_or_else(|_| PIPER_VOICES_URL.to_owned());
    let Some((model_url, config_url)) = piper::voice_urls(base.trim_end_matches('/'), voice) else {
        return Err(Error::invalid(
            "params.voice",
            format!(
                "{voice:?} is not a piper voice id (like {})",
                piper::DEFAULT_VOICE
            ),
        ));
    };
    p.emit("resolve", Some(100.0), &model_url, None);
    let (_, det) = app.state().await;
    let Some(python) = det.python.clone() else {
        return Ok((
            p,
            Some(format!(
                "python3 is needed to download voices: {}",
                system_install_hint("python3")
            )),
        ));
    };
    let dir = app.paths.piper_voices();
    std::fs::create_dir_all(&dir)?;
    let helper = app.paths.helpers().join("fetch.py");
    std::fs::create_dir_all(app.paths.helpers())?;
    std::fs::write(&helper, FETCH_HELPER)?;
    let mut stage: &'static str = "download";
    p.emit(stage, Some(0.0), "", None);
    for (url, dest) in [
        (config_url, dir.join(format!("{voice}.onnx.json"))),
        (model_url, dir.join(format!("{voice}.onnx"))),
    ] {
        let spec = ChildSpec::new(
            "fetch",
            &python,
            vec![helper.clone().into(), url.into(), dest.into()],
            STEP_TIMEOUT,
        );
        if let Err(e) = run_staged(&mut p, &spec, &mut stage, |_| None, fetch_progress).await {
            return Ok((p, Some(format!("downloading the voice failed: {e}"))));
        }
    }
    p.emit("verify", Some(0.0), "", None);
    let failure = verify_voice(&dir, voice).err();
    p.emit(
        "verify",
        Some(100.0),
        failure.as_deref().unwrap_or("voice files look right"),
        None,
    );
    Ok((p, failure))
}

fn verify_voice(dir: &Path, voice: &str) -> std::result::Result<(), String> {
    let config =
        std::fs::read(dir.join(format!("{voice}.onnx.json"))).map_err(|e| e.to_string())?;
    serde_json::from_slice::<Value>(&config)
        .map_err(|e| format!("the voice config is not JSON: {e}"))?;
    let size = std::fs::metadata(dir.join(format!("{voice}.onnx")))
        .map(|m| m.len())
        .unwrap_or(0);
    if size == 0 {
        let _ = std::fs::remove_file(dir.join(format!("{voice}.onnx.json")));
        return Err("the voice model is empty".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_normalise() {
        assert_eq!(target("local-whisper").unwrap().engine(), "faster-whisper");
        assert!(matches!(target("espeak-ng"), Some(Target::System { .. })));
        assert!(target("nope").is_none());
    }

    #[test]
    fn pip_lines_map_to_stages() {
        assert_eq!(pip_stage("Looking in links: /tmp/w"), Some("resolve"));
        assert_eq!(pip_stage("Processing /tmp/w/x.whl"), Some("download"));
        assert_eq!(pip_stage("  Downloading x.whl (3 MB)"), Some("download"));
        assert_eq!(
            pip_stage("Installing collected packages: x"),
            Some("install")
        );
        assert_eq!(pip_stage("random"), None);
    }

    #[test]
    fn fetch_progress_parses() {
        assert_eq!(
            fetch_progress("PROGRESS 50 200"),
            Some((50, Some(200), 25.0))
        );
        assert_eq!(fetch_progress("PROGRESS 50 0"), Some((50, None, 0.0)));
        assert_eq!(fetch_progress("hello"), None);
    }

    #[test]
    fn hint_is_a_package_manager_command() {
        assert!(system_install_hint("espeak-ng").contains("espeak-ng"));
    }
}
