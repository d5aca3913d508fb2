//! The one test kit of the workspace (issue 13 §6; `docs/ARCHITECTURE.md` "Tests"). Every
//! crate's integration tests use it as a dev-dependency:
//! * [`assert_eventually!`], [`eventually`], [`eventually_blocking`] and [`within`]: bounded
//!   waits for state that settles eventually and for every await on another process;
//! * [`ServiceProcess`]: starts a service binary on a temp home, waits until it is SERVING and
//!   hands out channels; SIGKILLs it on drop and prints its log when the test failed;
//! * [`CheckedTask`]: a background task (a stream reader, a callback) whose panic fails the
//!   test instead of vanishing with the task;
//! * [`fake_lsp`]: a fake stdio language server (crash, never answering, diagnostics);
//! * [`sshd::Sshd`]: a real OpenSSH server on loopback with temp keys (execution backends);
//! * [`suite`]: the whole suite (`snowpea supervisor start`) on a temp home with connected
//!   clients, for `snowpea-e2e`;
//! * [`fake_chat`]: fake Telegram, Discord and Slack servers on 127.0.0.1 for svc-chat;
//! * [`layers`]: the layer rule (no import cycle among a crate's files) every crate's
//!   `src` is held to (`testkit/tests/layers.rs`).
//!
//! Binaries are never built from inside a test: `scripts/test.sh` builds them first
//! (`cargo build --workspace --bins`), and a service crate's own tests get its binary from
//! Cargo (`env!("CARGO_BIN_EXE_…")`).

mod eventually;
pub mod fake_chat;
pub mod fake_lsp;
pub mod layers;
mod process;
pub mod sshd;
pub mod suite;
mod task;

pub use eventually::{eventually, eventually_blocking, pause, within, POLL, WAIT};
pub use process::ServiceProcess;
pub use task::CheckedTask;
