//! `snowpea-svc-audio` (issue 7, DESIGN.md §1): voice input and output (`audio.*`) in a
//! process of its own, so a crashing or hanging speech engine — or a crash of this
//! service — never takes down a session. Every engine runs as a watched child process
//! ([`child`]); detection ([`detect`]) is cached in [`App`] until the settings file
//! changes or an install ([`install`]) finishes. [`api`] holds the `audio.*` logic; [`rpc`]
//! only implements the generated trait over it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;

pub mod api;
pub mod child;
pub mod config;
pub mod convert;
pub mod detect;
pub mod engines;
pub mod error;
pub mod install;
pub mod record;
pub mod rpc;

use config::AudioSettings;
use detect::Detection;
use engines::Paths;
use error::{Error, Result};

/// system.hello capabilities this service declares, from start, whatever is installed:
/// every `audio.*` method answers without a speech engine too (`audio.capabilities` says
/// what works here and why the rest is off), so the capability never disappears (issue 32
/// item 8).
pub const CAPABILITIES: &[&str] = &["audio"];

/// What detection was computed from: the settings file version and the install count.
type Stamp = (Option<(SystemTime, u64)>, u64);

/// State shared by the handlers.
#[derive(Debug)]
pub struct App {
    /// The Snowpea home.
    pub home: Home,
    /// `audio-runtime/` paths.
    pub paths: Paths,
    /// Outbound notifications (`audio.install.progress`).
    pub hub: Arc<BusHub>,
    /// Running recordings.
    pub recordings: record::Recordings,
    /// Serialises installs.
    pub install_lock: tokio::sync::Mutex<()>,
    cache: tokio::sync::Mutex<Option<(Stamp, AudioSettings, Arc<Detection>)>>,
    generation: AtomicU64,
    espeak_voices:
        tokio::sync::Mutex<Option<Vec<snowpea_proto::audio::v1::audio_voices_result::Voice>>>,
}

impl App {
    /// The shared state for `home`.
    pub fn new(home: Home, hub: Arc<BusHub>) -> Arc<App> {
        Arc::new(App {
            paths: Paths::new(&home),
            home,
            hub,
            recordings: record::Recordings::default(),
            install_lock: tokio::sync::Mutex::new(()),
            cache: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
            espeak_voices: tokio::sync::Mutex::new(None),
        })
    }

    /// Settings and detection, detecting again only when the settings file changed or an
    /// install finished since the last time.
    pub async fn state(&self) -> (AudioSettings, Arc<Detection>) {
        let stamp = (
            config::settings_stamp(&self.home.settings_path()),
            self.generation.load(Ordering::SeqCst),
        );
        let mut cache = self.cache.lock().await;
        if let Some((s, settings, det)) = cache.as_ref() {
            if *s == stamp {
                return (settings.clone(), det.clone());
            }
        }
        let settings = AudioSettings::load(&self.home);
        let det = Arc::new(detect::detect(&self.paths).await);
        tracing::debug!(?det, "detection ran");
        *cache = Some((stamp, settings.clone(), det.clone()));
        (settings, det)
    }

    /// Applies a change of the `audio` settings the settings owner announces
    /// (`ServiceBus.SettingsChanged`) without a restart: the cached settings and detection
    /// are dropped and read again at once.
    pub fn follow_settings(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        use tokio::sync::broadcast::error::RecvError;
        let mut changes = self.hub.settings_changes();
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                match changes.recv().await {
                    Ok(c) if !c.keys.iter().any(|k| k == "audio") => continue,
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                }
                me.invalidate();
                let (settings, _) = me.state().await;
                tracing::info!(
                    tts = ?settings.tts_provider,
                    stt = ?settings.stt_provider,
                    "audio settings applied"
                );
            }
        })
    }

    /// Forgets the detection (after an install).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// espeak-ng's voice list, asked once per process.
    pub async fn espeak_voices(
        &self,
        bin: &std::path::Path,
        timeout: std::time::Duration,
    ) -> Result<Vec<snowpea_proto::audio::v1::audio_voices_result::Voice>> {
        let mut cache = self.espeak_voices.lock().await;
        if let Some(v) = cache.as_ref() {
            return Ok(v.clone());
        }
        let v = engines::espeak::voices(bin, timeout).await?;
        *cache = Some(v.clone());
        Ok(v)
    }

    /// Where audio of `session_id` is written: `<session workspace>/audio/` when the
    /// session has a workspace under `$SNOWPEA_HOME/sessions/`, else
    /// `$SNOWPEA_HOME/audio/`. Created (0700) on demand.
    pub fn out_dir(&self, session_id: Option<&str>) -> Result<PathBuf> {
        let mut dir = self.home.root().join("audio");
        if let Some(sid) = session_id.filter(|s| !s.is_empty()) {
            if !sid
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(Error::invalid("params.sessionId", "not a session id"));
            }
            let suffix = format!("_{sid}");
            if let Ok(entries) = std::fs::read_dir(self.home.sessions_dir()) {
                if let Some(ws) = entries.flatten().find(|e| {
                    e.file_name().to_string_lossy().ends_with(&suffix) && e.path().is_dir()
                }) {
                    dir = ws.path().join("audio");
                }
            }
        }
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        Ok(dir)
    }
}
