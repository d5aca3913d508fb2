//! How the services learn of a change of `$SNOWPEA_HOME/settings.json`: the owner calls
//! `ServiceBus.SettingsChanged{scope, keys}` on every other service's socket at once (each
//! waits at most [`CALL_TIMEOUT`]); each service re-reads the file and applies the keys it
//! uses. A service that is down is skipped: it reads the file when it starts.

use std::time::Duration;

use snowpea_common::home::Home;
use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;
use snowpea_proto::rpc::v1::SettingsChange;

/// The services told of a change besides svc-session itself.
pub const SERVICES: &[&str] = &["memory", "scheduler", "mcp", "audio", "chat"];

/// Deadline of one `SettingsChanged` call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Tells every service in [`SERVICES`] whose socket exists; returns the names that
/// acknowledged. Failures are logged, never returned: the write already happened.
pub async fn tell_services(home: &Home, change: &SettingsChange) -> Vec<&'static str> {
    let calls = SERVICES.iter().filter_map(|name| {
        let socket = home.socket(name);
        if !socket.exists() {
            return None;
        }
        let change = change.clone();
        Some(async move {
            let mut client = ServiceBusClient::new(snowpea_common::client::unix_channel(socket));
            match tokio::time::timeout(CALL_TIMEOUT, client.settings_changed(change)).await {
                Ok(Ok(_)) => Some(*name),
                Ok(Err(status)) => {
                    tracing::warn!(service = name, error = %status.message(), "a service was not told of the settings change; it applies it when it restarts");
                    None
                }
                Err(_) => {
                    tracing::warn!(service = name, "a service did not acknowledge the settings change within {CALL_TIMEOUT:?}");
                    None
                }
            }
        })
    });
    futures::future::join_all(calls)
        .await
        .into_iter()
        .flatten()
        .collect()
}
