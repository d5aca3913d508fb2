//! pocketsphinx (PyPI `pocketsphinx`, which bundles an English model and works offline):
//! svc-audio ships a small Python helper (written to `audio-runtime/helpers/` on use) and
//! runs it with the Python that has the package — the runtime venv's, else the system's.

use std::path::Path;
use std::time::Duration;

use crate::child::{run, ChildSpec};
use crate::engines::Paths;
use crate::error::{Error, Result};

/// The helper script.
pub const HELPER: &str = include_str!("../helpers/pocketsphinx_stt.py");
/// Its file name under `audio-runtime/helpers/`.
pub const HELPER_NAME: &str = "pocketsphinx_stt.py";

/// Writes the helper when it is missing or differs from this build's.
pub fn ensure_helper(paths: &Paths) -> Result<std::path::PathBuf> {
    let dir = paths.helpers();
    let path = dir.join(HELPER_NAME);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(HELPER) {
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(format!(
            ".{HELPER_NAME}.{}",
            snowpea_common::ids::new_id("t")
        ));
        std::fs::write(&tmp, HELPER)?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(path)
}

/// Transcribes the 16 kHz mono wav `wav`.
pub async fn transcribe(
    python: &Path,
    paths: &Paths,
    wav: &Path,
    timeout: Duration,
) -> Result<String> {
    let helper = ensure_helper(paths)?;
    let spec = ChildSpec::new(
        super::POCKETSPHINX,
        python,
        vec![helper.into(), wav.into()],
        timeout,
    );
    let out = run(&spec, None).await?;
    String::from_utf8(out.stdout).map_err(|_| Error::Engine {
        engine: super::POCKETSPHINX.into(),
        reason: "failed",
        message: "pocketsphinx printed text that is not UTF-8".into(),
        pid: Some(out.pid),
        stderr: out.stderr,
    })
}
