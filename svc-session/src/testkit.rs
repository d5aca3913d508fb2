//! Test harness: an [`App`] on a temp home with a temp workdir, the scripted provider
//! (`SNOWPEA_PROVIDER=fake:<script>` injected through `AppConfig::env`, never the process
//! environment), and a simulated gateway: the bus feed subscribed through
//! [`BusService::subscribe`], connections announced with `sync_connections`, and
//! server→client requests answered with `reply`. Every wait has a timeout.

use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{json, Value};
use snowpea_common::bus::{BusHub, BusService, OutboundStream};
use snowpea_common::context::CallContext;
use snowpea_common::home::Home;
use snowpea_proto::rpc::v1::service_bus_server::ServiceBus;
use snowpea_proto::rpc::v1::{
    client_reply, outbound, BusClientRequest, ClientReply, ConnectionInfo, ConnectionSet,
    SubscribeRequest,
};
use snowpea_proto::session::v1 as pb;
use tonic::Request;

use crate::app::{App, AppConfig};

/// Default wait for anything in tests: the one test kit's bound.
pub use snowpea_testkit::WAIT;

/// One item seen on the bus.
#[derive(Debug, Clone)]
pub enum Item {
    /// A notification `(method, params)`.
    Note(String, Value),
    /// A server→client request.
    Request(BusClientRequest),
}

/// A test daemon.
pub struct Harness {
    pub _tmp: tempfile::TempDir,
    pub home: Home,
    pub workdir: PathBuf,
    pub script: PathBuf,
    pub hub: Arc<BusHub>,
    pub bus: BusService,
    pub app: Arc<App>,
    pub feed: OutboundStream,
}

/// Builds an app config for `home` using the script at `script`.
pub fn config(home: &Home, script: &std::path::Path) -> AppConfig {
    let spec = format!("fake:{}", script.display());
    let mut c = AppConfig::new(home.clone());
    c.env = Arc::new(move |k| (k == "SNOWPEA_PROVIDER").then(|| spec.clone()));
    c
}

impl Harness {
    /// A harness with `script` as the provider script and `settings` as global settings.
    pub async fn with_settings(script: Value, settings: Value) -> Harness {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::new(tmp.path().join("home"));
        home.ensure_dirs().unwrap();
        std::fs::write(home.settings_path(), settings.to_string()).unwrap();
        let workdir = tmp.path().join("work");
        std::fs::create_dir_all(&workdir).unwrap();
        let workdir = std::fs::canonicalize(workdir).unwrap();
        let script_path = tmp.path().join("script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let hub = BusHub::new();
        let bus = BusService::new(hub.clone());
        let feed = bus
            .subscribe(Request::new(SubscribeRequest {
                gateway_id: "test".into(),
            }))
            .await
            .unwrap()
            .into_inner();
        let app = App::open(config(&home, &script_path), hub.clone())
            .await
            .unwrap();
        Harness {
            _tmp: tmp,
            home,
            workdir,
            script: script_path,
            hub,
            bus,
            app,
            feed,
        }
    }

    /// A harness with `script` and default settings.
    pub async fn new(script: Value) -> Harness {
        Self::with_settings(script, json!({})).await
    }

    /// Announces a live connection.
    pub async fn connect(&self, connection_id: &str, client_id: Option<&str>) {
        let info = ConnectionInfo {
            connection_id: connection_id.into(),
            client_id: client_id.map(str::to_owned),
            client_version: "test".into(),
            ..Default::default()
        };
        self.bus
            .sync_connections(Request::new(ConnectionSet {
                full: false,
                connections: vec![info],
                closed: vec![],
            }))
            .await
            .unwrap();
    }

    /// Announces that a connection closed.
    pub async fn disconnect(&self, connection_id: &str) {
        self.bus
            .sync_connections(Request::new(ConnectionSet {
                full: false,
                connections: vec![],
                closed: vec![connection_id.into()],
            }))
            .await
            .unwrap();
    }

    /// The call context of a connection.
    pub fn ctx(connection_id: &str, client_id: Option<&str>) -> CallContext {
        CallContext {
            connection_id: Some(connection_id.into()),
            client_id: client_id.map(str::to_owned),
            ..Default::default()
        }
    }

    /// Creates a session in the workdir from connection `c1`.
    pub async fn create(&self, mode: &str) -> String {
        self.create_with(mode, false).await
    }

    /// Creates a session, optionally with `denyExec`.
    pub async fn create_with(&self, mode: &str, deny_exec: bool) -> String {
        let p = pb::SessionCreateParams {
            workdir: self.workdir.to_string_lossy().into_owned(),
            mode: Some(mode.into()),
            deny_exec: Some(deny_exec),
            ..Default::default()
        };
        self.app
            .sessions
            .create(&Self::ctx("c1", Some("cli")), p)
            .await
            .unwrap()
            .session_id
    }

    /// Sends a prompt from `c1`.
    pub async fn prompt(&self, session_id: &str, text: &str) -> String {
        let p = pb::SessionPromptParams {
            session_id: session_id.into(),
            text: text.into(),
            ..Default::default()
        };
        self.app
            .turns
            .prompt(&Self::ctx("c1", Some("cli")), p)
            .await
            .unwrap()
    }

    /// Sends a prompt from `c1` with `whenBusy` (`queue` or `steer`).
    pub async fn prompt_with(&self, session_id: &str, text: &str, when_busy: &str) -> String {
        let p = pb::SessionPromptParams {
            session_id: session_id.into(),
            text: text.into(),
            when_busy: Some(when_busy.into()),
            ..Default::default()
        };
        self.app
            .turns
            .prompt(&Self::ctx("c1", Some("cli")), p)
            .await
            .unwrap()
    }

    /// The next bus item, or panics after `WAIT`.
    pub async fn next(&mut self) -> Item {
        let item = snowpea_testkit::within(WAIT, "the next bus item", self.feed.next())
            .await
            .expect("feed open")
            .expect("feed item");
        match item.item.expect("item") {
            outbound::Item::Notification(n) => {
                Item::Note(n.method, serde_json::from_str(&n.params_json).unwrap())
            }
            outbound::Item::Request(r) => Item::Request(r),
        }
    }

    /// Answers a server→client request with `result`.
    pub async fn reply(&self, request_id: &str, result: Value) {
        self.bus
            .reply(Request::new(ClientReply {
                request_id: request_id.into(),
                outcome: Some(client_reply::Outcome::ResultJson(result.to_string())),
            }))
            .await
            .unwrap();
    }

    /// Collects the `session.event` params of a session until `turn.done` of `turn_id`,
    /// giving every other bus item to `on_item` first (e.g. to answer approvals).
    pub async fn until_done(
        &mut self,
        turn_id: &str,
        mut on_item: impl FnMut(&Item) -> Option<(String, Value)>,
    ) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let item = self.next().await;
            if let Some((rid, answer)) = on_item(&item) {
                self.reply(&rid, answer).await;
            }
            if let Item::Note(m, p) = &item {
                if m == "session.event" {
                    let done = p["kind"] == "turn.done" && p["payload"]["turnId"] == turn_id;
                    events.push(p.clone());
                    if done {
                        return events;
                    }
                }
            }
        }
    }
}

/// The kinds of `events`, in order.
pub fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The events of one kind.
pub fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// The `turn.done` reason among `events`.
pub fn done_reason(events: &[Value]) -> String {
    of_kind(events, "turn.done")
        .last()
        .map(|e| {
            e["payload"]["reason"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_default()
}

/// Runs `f` on a fresh read connection to the session database of `home` (tests check
/// what was committed, beside the service's own connections).
pub fn read<T>(home: &Home, f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>) -> T {
    let conn = crate::store::open(&home.database("session")).expect("open the session db");
    f(&conn).expect("read the session db")
}
