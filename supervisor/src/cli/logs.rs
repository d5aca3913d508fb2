//! `snowpea supervisor logs [<process>] [--home DIR] [-n N] [--follow]`: prints the end
//! of `logs/<process>.log` (default `supervisor`; `all` = every log, lines prefixed by
//! the process name) and, with `--follow`, what is appended afterwards.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::exit;

/// How often `--follow` looks for appended lines.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// Arguments of `snowpea supervisor logs`.
#[derive(Debug, Clone, Args)]
pub struct LogsArgs {
    /// Process name (supervisor, session, gateway, …) or `all`.
    #[arg(default_value = "supervisor")]
    pub process: String,
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Number of lines to print.
    #[arg(short = 'n', long = "lines", default_value_t = 200)]
    pub lines: usize,
    /// Keep printing appended lines until interrupted.
    #[arg(short, long)]
    pub follow: bool,
}

/// The last `n` lines of `path`.
pub fn tail(path: &Path, n: usize) -> std::io::Result<Vec<String>> {
    let bytes = std::fs::read(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    Ok(lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| (*l).to_owned())
        .collect())
}

/// Runs `snowpea supervisor logs`.
pub async fn logs(args: LogsArgs) -> anyhow::Result<i32> {
    let home = snowpea_common::home::Home::resolve(args.home.as_deref())?;
    let files: Vec<(String, PathBuf)> = if args.process == "all" {
        let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(home.logs_dir())?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .filter_map(|p| Some((p.file_stem()?.to_string_lossy().into_owned(), p)))
            .collect();
        v.sort();
        v
    } else {
        let mut names = crate::services::process_names();
        names.push("supervisor");
        if !names.contains(&args.process.as_str()) {
            names.push("all");
            eprintln!(
                "snowpea: no process named {:?}; valid names: {}",
                args.process,
                names.join(", ")
            );
            return Ok(exit::FAILURE);
        }
        vec![(args.process.clone(), home.log_file(&args.process))]
    };
    let prefix = args.process == "all";
    let mut out = std::io::stdout().lock();
    let mut offsets = Vec::new();
    for (name, path) in &files {
        match tail(path, args.lines) {
            Ok(lines) => {
                for l in lines {
                    print_line(&mut out, prefix.then_some(name.as_str()), &l)?;
                }
            }
            Err(e) if !prefix => {
                eprintln!("snowpea: cannot read {}: {e}", path.display());
                return Ok(exit::FAILURE);
            }
            Err(_) => {}
        }
        offsets.push(std::fs::metadata(path).map(|m| m.len()).unwrap_or(0));
    }
    out.flush()?;
    drop(out);
    if !args.follow {
        return Ok(exit::OK);
    }
    // A bounded poll is fine for a human-facing tail.
    let mut partial = vec![String::new(); files.len()];
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        let mut out = std::io::stdout().lock();
        for (i, (name, path)) in files.iter().enumerate() {
            let Ok(mut f) = std::fs::File::open(path) else {
                continue;
            };
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if len < offsets[i] {
                offsets[i] = 0; // truncated or replaced
            }
            if len == offsets[i] {
                continue;
            }
            f.seek(SeekFrom::Start(offsets[i]))?;
            let mut buf = Vec::new();
            f.read_to_end(&mut buf)?;
            offsets[i] += buf.len() as u64;
            partial[i].push_str(&String::from_utf8_lossy(&buf));
            while let Some(nl) = partial[i].find('\n') {
                let line: String = partial[i].drain(..=nl).collect();
                print_line(
                    &mut out,
                    prefix.then_some(name.as_str()),
                    line.trim_end_matches('\n'),
                )?;
            }
        }
        out.flush()?;
    }
}

fn print_line(out: &mut impl Write, prefix: Option<&str>, line: &str) -> std::io::Result<()> {
    match prefix {
        Some(name) => writeln!(out, "{name:<10} | {line}"),
        None => writeln!(out, "{line}"),
    }
}
