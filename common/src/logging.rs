//! Tracing setup for every Snowpea process (DESIGN.md §5 "Logs"). Processes log to
//! stderr, which the supervisor appends to `$SNOWPEA_HOME/logs/<process>.log`.
//! Filter: `SNOWPEA_LOG` (EnvFilter syntax, default `info`); `SNOWPEA_LOG_FORMAT=json`
//! switches to JSON lines. Secrets (token, API keys) are never passed to tracing.

use tracing_subscriber::{fmt, EnvFilter};

/// Installs the global subscriber. Safe to call once per process.
pub fn init(process: &str) {
    init_with(process, None);
}

/// [`init`], also appending every line to `also` (the foreground supervisor writes
/// `logs/supervisor.log` as well as its terminal).
pub fn init_with(process: &str, also: Option<std::fs::File>) {
    use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriterExt};
    let filter = EnvFilter::try_from_env("SNOWPEA_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("SNOWPEA_LOG_FORMAT").is_ok_and(|v| v == "json");
    let writer = match also {
        Some(file) => BoxMakeWriter::new(std::io::stderr.and(std::sync::Mutex::new(file))),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(false);
    let result = if json {
        builder.json().try_init()
    } else {
        builder.with_ansi(false).try_init()
    };
    if result.is_ok() {
        tracing::debug!(process, "tracing initialised");
    }
}
