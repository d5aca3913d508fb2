//! The `snowpea` command (DESIGN.md §2, §5): the user's CLI and the supervisor that
//! starts, watches and restarts the suite — the services of [`services::SERVICES`] and
//! the gateway.
//!
//! * [`cli`]: one module per subcommand; [`cli::start::ensure_started`] is the entry point
//!   `snowpea run` uses to start the suite when it is not running.
//! * [`supervise`]: the event loop; [`policy`]: the pure restart policy it consults.
//! * [`spawn`], [`ready`], [`bins`]: launching children and knowing when they are ready.
//! * [`control`]: the control socket `run/supervisor.sock`.
//! * [`daemonize`]: `start` without `--foreground`.
//! * [`model_env`]: the model settings a suite was started with, against the caller's;
//!   [`model_check`]: what start, run and chat say about them.

pub mod bins;
pub mod chat;
pub mod cli;
pub mod cmd;
pub mod control;
pub mod daemonize;
pub mod gateway_cmd;
pub mod model_check;
pub mod model_env;
pub mod policy;
pub mod ready;
pub mod run;
pub mod services;
pub mod spawn;
pub mod supervise;
