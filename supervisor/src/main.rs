//! `snowpea`: see the library docs and `snowpea --help`. Exit codes: 0 ok, 1 failure,
//! 2 usage, 3 not running.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = snowpea::cli::Cli::parse();
    snowpea_common::logging::init("supervisor");
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
