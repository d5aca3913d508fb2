//! `gen-protocol`: the published protocol artefacts, rendered from the embedded descriptor
//! (DESIGN.md §3). Nobody edits them by hand; `gen-protocol --check` and the
//! `generated_up_to_date` test fail when one drifts from the proto schema.
//!
//! * [`markdown`] → `docs/protocol.md`, the reference with the spec's sections and tables;
//! * [`json_schema`] → `docs/protocol.json`, also served by the gateway at `GET /protocol.json`
//!   (see [`protocol_json`]);
//! * [`typescript`] → `sdk/src/protocol.ts`, the TypeScript bindings;
//! * [`types`]: the spec's TypeScript-ish type notation and table rows shared by all three.

use std::path::{Path, PathBuf};

use crate::schema::schema;
use crate::{PROTOCOL_VERSION, WS_PATH};

pub mod json_schema;
pub mod markdown;
pub mod types;
pub mod typescript;

/// The command that rewrites every generated file; drift reports name it.
pub const FIX_COMMAND: &str = "cargo run -p snowpea-proto --bin gen-protocol";

/// One surface of the spec's Transport table.
#[derive(Debug, Clone, Copy)]
pub struct TransportSurface {
    /// Surface column: `WebSocket` or `HTTP GET`.
    pub surface: &'static str,
    /// URL scheme: `ws` or `http`.
    pub scheme: &'static str,
    /// Path on the daemon's loopback port.
    pub path: &'static str,
    /// Purpose column.
    pub purpose: &'static str,
}

/// The spec's Transport table (section "Transport"); the WebSocket comes first.
pub const TRANSPORT: [TransportSurface; 4] = [
    TransportSurface {
        surface: "WebSocket",
        scheme: "ws",
        path: WS_PATH,
        purpose: "JSON-RPC 2.0, bidirectional",
    },
    TransportSurface {
        surface: "HTTP GET",
        scheme: "http",
        path: "/health",
        purpose: "liveness probe",
    },
    TransportSurface {
        surface: "HTTP GET",
        scheme: "http",
        path: "/protocol.json",
        purpose: "this schema as JSON",
    },
    TransportSurface {
        surface: "HTTP GET",
        scheme: "http",
        path: "/version",
        purpose: "server and protocol versions",
    },
];

/// Spec text of section "Handshake".
pub const HANDSHAKE_INTRO: &str = "Immediately after connecting, the client calls system.hello \
with the daemon token, its own clientVersion, and the protocolVersion it was built against. Any \
other method before a successful system.hello fails with unauthorized. A mismatched major \
version is rejected with protocol_incompatible.";

/// Spec text opening section "session.event kinds".
pub const EVENT_KINDS_INTRO: &str = "Every session event carries a monotonically increasing \
per-session seq. After a reconnect, session.resume(sessionId, afterSeq) replays anything missed.";

/// The spec's example `system.hello` request (section "Handshake"), in the spec's key order.
pub fn hello_example() -> String {
    format!(
        r#"{{
  "jsonrpc": "2.0",
  "id": 1,
  "method": "system.hello",
  "params": {{
    "token": "<contents of $SNOWPEA_HOME/token>",
    "clientVersion": "0.1.0",
    "protocolVersion": "{PROTOCOL_VERSION}"
  }}
}}"#
    )
}

/// The protocol as JSON (`docs/protocol.json`, served at `GET /protocol.json`).
pub fn protocol_json() -> serde_json::Value {
    json_schema::render(schema())
}

/// A generated file: its path relative to the workspace root and its contents.
#[derive(Debug, Clone)]
pub struct GeneratedFile {
    /// Path relative to the workspace root, e.g. `docs/protocol.md`.
    pub path: &'static str,
    /// Full contents, ending with a newline.
    pub contents: String,
}

/// Renders every generated file in memory.
pub fn generate() -> Vec<GeneratedFile> {
    let s = schema();
    let json = serde_json::to_string_pretty(&json_schema::render(s))
        .expect("a serde_json::Value always serialises");
    vec![
        GeneratedFile {
            path: "docs/protocol.md",
            contents: with_newline(markdown::render(s)),
        },
        GeneratedFile {
            path: "docs/protocol.json",
            contents: with_newline(json),
        },
        GeneratedFile {
            path: "sdk/src/protocol.ts",
            contents: with_newline(typescript::render(s)),
        },
    ]
}

fn with_newline(mut s: String) -> String {
    while s.ends_with('\n') {
        s.pop();
    }
    s.push('\n');
    s
}

/// The workspace root this crate was built in (`CARGO_MANIFEST_DIR/..`).
pub fn default_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the proto crate lives inside the workspace")
        .to_path_buf()
}

/// Writes every generated file under `root`, creating directories; returns the paths written.
pub fn write_all(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for file in generate() {
        let path = root.join(file.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, file.contents)?;
        written.push(path);
    }
    Ok(written)
}

/// The generated files whose copy under `root` is missing or differs from a fresh rendering.
pub fn drifted(root: &Path) -> Vec<&'static str> {
    generate()
        .into_iter()
        .filter(|f| std::fs::read_to_string(root.join(f.path)).ok().as_deref() != Some(&f.contents))
        .map(|f| f.path)
        .collect()
}
