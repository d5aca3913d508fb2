//! `system.info` (spec "system.info"): what the daemon is — its pid and start time are the
//! supervisor's (from `daemon.json`, when it describes this gateway's port), else this
//! process's own — and its `counters`: the gateway's own (connections, requests, …) plus
//! every running service's per-method call counters from `ServiceBus.CallStats`, as
//! `calls.<service>.<method>.count`, `.errors`, `.error.<code>`, `.p50Us` and `.p99Us`.
//! A service that is down, slow or without CallStats is left out.
//!
//! It also names the supervised processes that are restarting or gave up (issue 24 §5),
//! from the supervisor's `Status` (same deadline; left out without a supervisor): for each
//! process in `backoff`, `supervisor.<name>.backoffMs` (the delay before its restart) and
//! `supervisor.<name>.restartsInWindow` (crashes in the restart-intensity window); for one
//! that is `failed`, `supervisor.<name>.failed` = 1 and the same window count — so a client
//! sees why a call answered `unavailable`.

use std::collections::HashMap;
use std::time::Duration;

use snowpea_common::client::unix_channel;
use snowpea_common::home::Home;
use snowpea_proto::rpc::v1::CallStatsReply;
use snowpea_proto::supervisor::v1::supervisor_client::SupervisorClient;
use snowpea_proto::supervisor::v1::StatusReply;
use snowpea_proto::system::v1::SystemInfoResult;
use snowpea_proto::PROTOCOL_VERSION;

use super::update::Updates;
use crate::upstream::bus;
use crate::upstream::services::Services;
use crate::wire::counters::Counters;

/// How long system.info waits for each service's CallStats (they are asked at once).
const CALL_STATS_DEADLINE: Duration = Duration::from_millis(500);

/// What `system.info` reports about the daemon.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// The Snowpea home.
    pub home: Home,
    /// TCP port the gateway listens on.
    pub port: u16,
    /// UTC ISO-8601 time this gateway started.
    pub started_at: String,
    /// `system.checkUpdate` / `system.update` state (`restartRequired` once an upgrade
    /// finished).
    pub updates: Updates,
}

/// The `system.info` result.
pub async fn info(daemon: &Daemon, counters: &Counters, services: &Services) -> SystemInfoResult {
    let supervisor = daemon
        .home
        .read_daemon_json()
        .ok()
        .filter(|d| d.port == daemon.port);
    let (pid, started_at) = match supervisor {
        Some(d) => (d.pid, d.started_at),
        None => (std::process::id(), daemon.started_at.clone()),
    };
    let mut all = counters.to_map();
    let asked = services.iter().map(|svc| async move {
        (
            svc.name.as_str(),
            bus::call_stats(svc, CALL_STATS_DEADLINE).await,
        )
    });
    let (stats, supervisor) = tokio::join!(
        futures::future::join_all(asked),
        supervisor_status(&daemon.home)
    );
    for (service, reply) in stats {
        if let Some(reply) = reply {
            add_call_counters(&mut all, service, &reply);
        }
    }
    if let Some(status) = supervisor {
        add_restart_counters(&mut all, &status);
    }
    SystemInfoResult {
        counters: all,
        home: daemon.home.root().display().to_string(),
        lifecycle: None,
        pid: i64::from(pid),
        platform: Some(platform().to_owned()),
        port: i64::from(daemon.port),
        protocol_version: PROTOCOL_VERSION.to_owned(),
        restart_required: false,
        started_at,
        version: snowpea_common::VERSION.to_owned(),
    }
}

/// The supervisor's `Status`, or `None` when none answers within the deadline.
async fn supervisor_status(home: &Home) -> Option<StatusReply> {
    let mut client = SupervisorClient::new(unix_channel(home.supervisor_socket()));
    match tokio::time::timeout(CALL_STATS_DEADLINE, client.status(())).await {
        Ok(Ok(reply)) => Some(reply.into_inner()),
        _ => None,
    }
}

/// Adds `supervisor.<name>.*` for every process that is backing off or failed.
fn add_restart_counters(all: &mut HashMap<String, i64>, status: &StatusReply) {
    for p in &status.processes {
        let key = |what: &str| format!("supervisor.{}.{what}", p.name);
        match p.state.as_str() {
            "backoff" => {
                all.insert(key("backoffMs"), p.backoff_ms);
            }
            "failed" => {
                all.insert(key("failed"), 1);
            }
            _ => continue,
        }
        all.insert(key("restartsInWindow"), p.restarts_in_window);
    }
}

/// Adds one service's rows as `calls.<service>.<method>.*`.
fn add_call_counters(all: &mut HashMap<String, i64>, service: &str, reply: &CallStatsReply) {
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    for m in &reply.methods {
        let key = |what: &str| format!("calls.{service}.{}.{what}", m.method);
        all.insert(key("count"), n(m.count));
        all.insert(
            key("errors"),
            n(m.errors.values().fold(0u64, |a, b| a.saturating_add(*b))),
        );
        for (code, count) in &m.errors {
            all.insert(key(&format!("error.{code}")), n(*count));
        }
        all.insert(key("p50Us"), n(m.p50_us));
        all.insert(key("p99Us"), n(m.p99_us));
    }
}

/// `std::env::consts::OS` in Python's `sys.platform` spelling, as the spec asks.
fn platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use snowpea_proto::rpc::v1::{CallStatsReply, MethodCallStats};
    use snowpea_proto::supervisor::v1::{ProcessStatus, StatusReply};

    use super::{add_call_counters, add_restart_counters};

    #[test]
    fn processes_backing_off_or_failed_are_named() {
        let process = |name: &str, state: &str, backoff_ms, in_window| ProcessStatus {
            name: name.into(),
            state: state.into(),
            backoff_ms,
            restarts_in_window: in_window,
            max_restarts_in_window: 5,
            ..Default::default()
        };
        let status = StatusReply {
            processes: vec![
                process("session", "backoff", 3200, 4),
                process("audio", "failed", 30_000, 6),
                process("memory", "running", 100, 1),
            ],
            ..Default::default()
        };
        let mut all = HashMap::new();
        add_restart_counters(&mut all, &status);
        let want: HashMap<String, i64> = [
            ("supervisor.session.backoffMs", 3200),
            ("supervisor.session.restartsInWindow", 4),
            ("supervisor.audio.failed", 1),
            ("supervisor.audio.restartsInWindow", 6),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(all, want);
    }

    #[test]
    fn call_counters_are_named_by_service_and_method() {
        let reply = CallStatsReply {
            service: "session".into(),
            methods: vec![MethodCallStats {
                method: "session.list".into(),
                count: 5,
                errors: HashMap::from([("not_found".into(), 2), ("internal".into(), 1)]),
                p50_us: 120,
                p99_us: 900,
            }],
        };
        let mut all = HashMap::new();
        add_call_counters(&mut all, "session", &reply);
        let want: HashMap<String, i64> = [
            ("calls.session.session.list.count", 5),
            ("calls.session.session.list.errors", 3),
            ("calls.session.session.list.error.not_found", 2),
            ("calls.session.session.list.error.internal", 1),
            ("calls.session.session.list.p50Us", 120),
            ("calls.session.session.list.p99Us", 900),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(all, want);
    }
}
