//! `snowpea run "<prompt>"`: placeholder until the CLI client lands (another engineer
//! replaces this file). It will start the suite with
//! [`crate::cli::start::ensure_started`], open a session and stream the answer.

use std::path::PathBuf;

use clap::Args;

/// Arguments of `snowpea run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Project folder of the session (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Permission mode.
    #[arg(long, value_parser = ["plan", "accept", "auto"])]
    pub mode: Option<String>,
    /// Print events as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// Allow every approval without asking.
    #[arg(long)]
    pub yes: bool,
    /// The prompt.
    pub prompt: String,
}

/// Runs a prompt; returns the exit code.
pub async fn run(args: RunArgs) -> i32 {
    let _ = args;
    eprintln!("snowpea run: not implemented yet");
    2
}
