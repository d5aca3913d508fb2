//! Rust client for the Snowpea daemon (protocol 1.25.0), used by the `snowpea` CLI and the
//! suite-level tests. It speaks plain JSON-RPC 2.0 over the gateway's WebSocket with
//! `serde_json::Value` params and results; it does not depend on the proto crate.
//!
//! * [`Client::connect`] opens `ws://127.0.0.1:<port>/ws` and performs `system.hello`
//!   ([`ConnectOptions::from_home`] reads `$SNOWPEA_HOME/daemon.json`).
//! * [`Client::call`] runs concurrent calls with a timeout each; [`Client::notify`] sends
//!   client notifications.
//! * [`Client::subscribe`] / [`Client::events`] deliver notifications; `session.event`s arrive
//!   once each, in seq order per session, across reconnects.
//! * [`Client::on_request`] answers server→client requests (`approval.request`, …); requests
//!   without a handler are answered `method_not_found`.
//! * [`Client::register_tools`] lends the agent host tools: it answers `tool.invoke`, sends
//!   `tool.progress` and honours `tool.cancel` ([`HostTool`], [`ToolResult`]).
//! * With [`ConnectOptions::reconnect`], a dropped connection is re-opened with jittered backoff,
//!   `system.hello` is repeated and every tracked session is resumed with `session.resume`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), snowpea_sdk::Error> {
//! use std::time::Duration;
//! use snowpea_sdk::{Client, ConnectOptions, ReconnectPolicy};
//!
//! let opts = ConnectOptions::from_home("/home/me/.snowpea".as_ref())?
//!     .with_reconnect(ReconnectPolicy::default());
//! let client = Client::connect(opts).await?;
//! client.on_request("approval.request", |_params| async {
//!     Ok(serde_json::json!({ "decision": "allow", "scope": "once" }))
//! });
//! let session = client.create_session("/tmp/project".as_ref(), Some("accept")).await?;
//! let turn = client.prompt_and_collect(&session, "hello", Duration::from_secs(60)).await?;
//! println!("{} ({:?})", turn.text(), turn.reason);
//! client.close().await;
//! # Ok(()) }
//! ```

mod client;
mod connection;
mod error;
mod events;
mod host_tools;
mod options;
mod sequencer;

pub use client::{Client, ConnectionState, RequestHandler};
pub use error::{Error, RpcError, INTERNAL, INVALID_PARAMS, METHOD_NOT_FOUND, SERVER_ERROR};
pub use events::{Notification, SessionEvent, SessionEvents, TurnOutcome};
pub use host_tools::{ContentBlock, HostTool, ToolInvocation, ToolResult};
pub use options::{ConnectOptions, DaemonInfo, ReconnectPolicy, PROTOCOL_VERSION, WS_PATH};
