//! The composition root (docs/ARCHITECTURE.md "Gateway layers"): [`Gateway::start`]
//! builds each layer from what it needs — the services and their Subscribe loops, the
//! presence stream, the route table, the dispatcher and the callbacks consumer — wires
//! the channels between them and starts their tasks. One `Arc<Gateway>` is what the
//! server and the WebSocket connections (the top layer) hold; nothing below sees it.

use std::sync::Arc;

use snowpea_common::home::Home;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::callbacks::consume;
use crate::callbacks::requests::ServerRequests;
use crate::dispatch::info::Daemon;
use crate::dispatch::router::Dispatcher;
use crate::dispatch::update::Updates;
use crate::route::table::Routes;
use crate::upstream::presence::Presence;
use crate::upstream::services::Services;
use crate::upstream::subscribe::Subscriber;
use crate::wire::counters::Counters;
use crate::wire::large::LargeRequests;
use crate::wire::limits::Limits;
use crate::wire::preauth::{self, PreAuth};
use crate::wire::registry::Registry;

/// Upstream events queued between the Subscribe loops and the callbacks consumer.
const EVENT_QUEUE: usize = 1024;

/// Everything the gateway process shares.
pub struct Gateway {
    /// The Snowpea home.
    pub home: Home,
    /// Limits and waits.
    pub limits: Limits,
    /// `system.info` counters.
    pub counters: Arc<Counters>,
    /// Live WebSocket connections.
    pub connections: Arc<Registry>,
    /// Answers every client call.
    pub dispatcher: Dispatcher,
    /// Server→client requests and their answers.
    pub requests: Arc<ServerRequests>,
    /// Where connection changes go (closes from the WebSocket side).
    pub presence: Presence,
    /// Cancelled when the gateway should stop (SIGTERM or a local system.shutdown).
    pub shutdown: CancellationToken,
    /// Tracks connection tasks so shutdown can wait for their close frames.
    pub tasks: TaskTracker,
    /// The budget of large requests in process, across all connections (issue 40).
    pub large: LargeRequests,
    /// The budgets of clients before authentication (issue 37 §3).
    pub pre_auth: PreAuth,
}

impl Gateway {
    /// Builds the gateway for `services` (the suite's service names) and starts its
    /// background tasks (one Subscribe loop per service, the presence stream, the
    /// callbacks consumer). Must run inside the Tokio runtime.
    pub fn start(
        home: Home,
        token: String,
        port: u16,
        services: &[String],
        limits: Limits,
    ) -> Arc<Gateway> {
        let first_reports_until = limits
            .services_starting
            .then(|| std::time::Instant::now() + limits.unavailable_wait);
        let services = Arc::new(Services::new(&home, services, first_reports_until));
        let counters = Arc::new(Counters::default());
        let connections = Arc::new(Registry::default());
        let shutdown = CancellationToken::new();
        let (presence, feed) = Presence::channel();
        let (events_tx, events_rx) = mpsc::channel(EVENT_QUEUE);

        Subscriber {
            gateway_id: snowpea_common::ids::random_hex(4),
            live: feed.live(),
            events: events_tx,
            shutdown: shutdown.clone(),
        }
        .spawn_all(&services);
        tokio::spawn(feed.run(services.clone()));
        let requests = Arc::new(ServerRequests::new(
            services.clone(),
            connections.clone(),
            counters.clone(),
        ));
        tokio::spawn(consume::run(
            events_rx,
            connections.clone(),
            counters.clone(),
            requests.clone(),
        ));

        let daemon = Daemon {
            home: home.clone(),
            port,
            started_at: snowpea_common::time::now_iso(),
            updates: Updates::new(home.clone(), connections.clone(), counters.clone()),
        };
        let dispatcher = Dispatcher::new(
            Routes::build(&services),
            limits.clone(),
            counters.clone(),
            services,
            presence.clone(),
            daemon,
            token,
        );
        let pre_auth = PreAuth::new(
            preauth::connection_cap(
                limits.max_connections,
                snowpea_common::descriptors::raise_to_hard_limit(),
            ),
            limits.max_unauthenticated,
            limits.hello_deadline,
        );
        Arc::new(Gateway {
            home,
            limits,
            counters,
            connections,
            dispatcher,
            requests,
            presence,
            shutdown,
            tasks: TaskTracker::new(),
            large: LargeRequests::default(),
            pre_auth,
        })
    }
}
