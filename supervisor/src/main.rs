//! `snowpea`: see the library docs and `snowpea --help`. Exit codes: 0 ok, 1 failure,
//! 2 usage, 3 not running, 4 a process failed (`supervisor status`); `snowpea run` has its own.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = snowpea::cli::Cli::parse();
    // Only the supervisor itself logs (SNOWPEA_LOG); the client commands (a detaching
    // `start`, status, run, …) print their own messages and never echo tracing lines.
    if let Some(home) = snowpea::cli::foreground_home(&cli) {
        snowpea_common::logging::init_with("supervisor", snowpea::cli::start::log_tee(&home));
    }
    // Current-thread on purpose: children are spawned from this (the main) thread, and
    // PR_SET_PDEATHSIG fires when the spawning *thread* exits (see `snowpea::spawn`).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("snowpea: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(snowpea::cli::dispatch(cli));
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
