//! The route table (DESIGN.md §4): every client-callable method of the schema is routed
//! by its owner — `system` to the gateway itself, a service of the suite to its socket,
//! any other service to `not_implemented`. Built once at start-up from
//! `snowpea_proto::schema::schema()`; which methods answer `not_implemented` is decided
//! here, in [`Routes::build`] and [`SystemMethod::from_name`].

use std::collections::HashMap;
use std::sync::Arc;

use http::uri::PathAndQuery;
use snowpea_proto::schema::{schema, Direction, MethodSpec};

use crate::upstream::services::{Service, Services};

/// A `system.*` method answered by the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemMethod {
    /// `system.hello`.
    Hello,
    /// `system.health`.
    Health,
    /// `system.info`.
    Info,
    /// `system.shutdown`.
    Shutdown,
    /// `system.restart`.
    Restart,
    /// Declared in the schema, not implemented yet (answers `not_implemented`).
    NotImplemented,
}

impl SystemMethod {
    /// Maps a `system.*` JSON-RPC name.
    pub fn from_name(name: &str) -> Self {
        match name {
            "system.hello" => SystemMethod::Hello,
            "system.health" => SystemMethod::Health,
            "system.info" => SystemMethod::Info,
            "system.shutdown" => SystemMethod::Shutdown,
            "system.restart" => SystemMethod::Restart,
            _ => SystemMethod::NotImplemented,
        }
    }
}

/// Where a method goes.
#[derive(Debug)]
pub enum Target {
    /// Answered by the gateway.
    System(SystemMethod),
    /// Forwarded to a running service.
    Service(Arc<Service>),
    /// Owned by a service this suite does not run (answers `not_implemented`).
    NotRunning(String),
}

/// One routable method.
#[derive(Debug)]
pub struct Route {
    /// Its schema entry.
    pub spec: &'static MethodSpec,
    /// Where it goes.
    pub target: Target,
    /// The gRPC path, parsed once.
    pub path: PathAndQuery,
}

/// Every client-callable method by JSON-RPC name.
#[derive(Debug, Default)]
pub struct Routes {
    map: HashMap<&'static str, Route>,
}

impl Routes {
    /// Builds the table for the services the suite runs.
    pub fn build(services: &Services) -> Routes {
        let mut map = HashMap::new();
        for (name, spec) in &schema().methods {
            // approval.request & co. are the daemon's to send, never a client's to call.
            if spec.direction == Direction::ServerToClient {
                continue;
            }
            let target = if spec.owner == "system" {
                Target::System(SystemMethod::from_name(name))
            } else {
                match services.get(&spec.owner) {
                    Some(s) => Target::Service(s),
                    None => Target::NotRunning(spec.owner.clone()),
                }
            };
            let Ok(path) =
                PathAndQuery::from_maybe_shared(bytes::Bytes::from(spec.grpc_path.clone()))
            else {
                tracing::error!(method = %name, path = %spec.grpc_path, "unroutable gRPC path; method left out");
                continue;
            };
            map.insert(name.as_str(), Route { spec, target, path });
        }
        Routes { map }
    }

    /// The route of a method.
    pub fn get(&self, method: &str) -> Option<&Route> {
        self.map.get(method)
    }
}
