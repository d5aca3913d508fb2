//! Shared building blocks of the Snowpea suite (DESIGN.md §2 `common/`): the home layout,
//! settings, service bootstrap (unix socket, health, reflection, SIGTERM), the internal
//! bus every service serves to the gateway, connection context, tracing, SQLite, ids and
//! time.

pub mod bus;
pub mod calls;
pub mod client;
pub mod context;
pub mod db;
pub mod descriptors;
pub mod fairness;
pub mod heap;
pub mod home;
pub mod ids;
pub mod logging;
pub mod orphans;
pub mod service;
pub mod session_lookup;
pub mod settings;
pub mod test_deps;
pub mod time;

/// Version of every Snowpea binary (the workspace version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
