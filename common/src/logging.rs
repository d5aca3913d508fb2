//! Tracing setup for every Snowpea process (DESIGN.md §5 "Logs"). Processes log to
//! stderr, which the supervisor appends to `$SNOWPEA_HOME/logs/<process>.log`.
//! Filter: `SNOWPEA_LOG` (EnvFilter syntax, default `info`); `SNOWPEA_LOG_FORMAT=json`
//! switches to JSON lines. Secrets (token, API keys) are never passed to tracing.

use tracing_subscriber::{fmt, EnvFilter};

/// The WebSocket library's frame module: at trace it logs every frame and message it
/// reads or writes, which carry the connection token (`system.hello`) and API keys
/// (`provider.configure`). Always off, whatever `SNOWPEA_LOG` says.
const SILENCED: &str = "tungstenite::protocol=off";

/// The filter of `spec` (`SNOWPEA_LOG`, EnvFilter syntax; absent or invalid = `info`) with
/// [`SILENCED`] added.
pub fn filter(spec: Option<&str>) -> EnvFilter {
    spec.and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| EnvFilter::new("info"))
        .add_directive(SILENCED.parse().expect("a valid directive"))
}

/// Installs the global subscriber. Safe to call once per process.
pub fn init(process: &str) {
    init_with(process, None);
}

/// [`init`], also appending every line to `also` (the foreground supervisor writes
/// `logs/supervisor.log` as well as its terminal).
pub fn init_with(process: &str, also: Option<std::fs::File>) {
    use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriterExt};
    let filter = filter(std::env::var("SNOWPEA_LOG").ok().as_deref());
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn trace_logging_never_writes_websocket_frames() {
        let out = Capture::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(super::filter(Some("trace")))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::trace!(target: "tungstenite::protocol", "Received message {{\"token\": \"t-SECRET\"}}");
            tracing::trace!(target: "snowpea_gateway", "kept");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("t-SECRET"), "{text}");
        assert!(text.contains("kept"), "{text}");
    }
}
