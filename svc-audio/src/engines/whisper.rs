//! `local-whisper`: a whisper CLI found on PATH or in the runtime venv (`faster-whisper`,
//! `whisper-ctranslate2` or openai `whisper`, which share the command line
//! `<cli> FILE --model M --output_format txt --output_dir DIR [--language L]`). The model
//! is `base` (the CLIs download it on first use into their own cache).

use std::path::Path;
use std::time::Duration;

use crate::child::{run, ChildSpec};
use crate::engines::Paths;
use crate::error::{Error, Result};

/// Transcribes `wav`; the transcript is read from `<dir>/<stem>.txt`, falling back to
/// what the CLI printed.
pub async fn transcribe(
    bin: &Path,
    wav: &Path,
    language: Option<&str>,
    paths: &Paths,
    timeout: Duration,
) -> Result<String> {
    let dir = paths.tmp().join(snowpea_common::ids::new_id("whisper"));
    std::fs::create_dir_all(&dir)?;
    let mut args: Vec<std::ffi::OsString> = vec![
        wav.into(),
        "--model".into(),
        "base".into(),
        "--output_format".into(),
        "txt".into(),
        "--output_dir".into(),
        dir.clone().into(),
    ];
    if let Some(l) = language {
        args.push("--language".into());
        args.push(l.split(['-', '_']).next().unwrap_or(l).into());
    }
    let spec = ChildSpec::new(super::WHISPER, bin, args, timeout);
    let result = run(&spec, None).await;
    let stem = wav.file_stem().and_then(|s| s.to_str()).unwrap_or("audio");
    let txt = std::fs::read_to_string(dir.join(format!("{stem}.txt")));
    let _ = std::fs::remove_dir_all(&dir);
    let out = result.map_err(Error::from)?;
    Ok(txt.unwrap_or_else(|_| String::from_utf8_lossy(&out.stdout).into_owned()))
}
