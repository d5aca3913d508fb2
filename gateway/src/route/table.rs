//! The route table (DESIGN.md §4): every client-callable method of the schema is routed
//! by its owner — `system` to the gateway itself, a service of the suite to its socket,
//! any other service to `not_implemented`, and so is a method the declaration
//! `snowpea_proto::implemented::IMPLEMENTED` (the docs' status column) leaves out. Built once
//! at start-up from `snowpea_proto::schema::schema()`; which methods answer `not_implemented`
//! is decided here, in [`Routes::build`] and [`SystemMethod::from_name`] (which agrees with
//! the declaration, see the tests).

use std::collections::HashMap;
use std::sync::Arc;

use http::uri::PathAndQuery;
use snowpea_proto::implemented::is_implemented;
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
    /// `system.reloadSettings` (asked of the settings owner, svc-session).
    ReloadSettings,
    /// `system.checkUpdate`.
    CheckUpdate,
    /// `system.update`.
    Update,
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
            "system.reloadSettings" => SystemMethod::ReloadSettings,
            "system.checkUpdate" => SystemMethod::CheckUpdate,
            "system.update" => SystemMethod::Update,
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
    /// A request owned by a running service but not in `snowpea_proto::implemented::IMPLEMENTED`:
    /// answered `not_implemented` without forwarding, whatever the params.
    NotImplemented,
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
                    None => Target::NotRunning(spec.owner.clone()),
                    // A client notification is never answered, so it is always forwarded
                    // (a service that lacks it drops it).
                    Some(_)
                        if spec.direction == Direction::ClientToServer && !is_implemented(name) =>
                    {
                        Target::NotImplemented
                    }
                    Some(s) => Target::Service(s),
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

#[cfg(test)]
mod tests {
    use snowpea_proto::implemented::is_implemented;
    use snowpea_proto::schema::schema;

    use super::SystemMethod;

    /// The gateway answers exactly the `system.*` methods the declaration lists.
    #[test]
    fn system_methods_agree_with_the_declaration() {
        for name in schema().methods.keys().filter(|n| n.starts_with("system.")) {
            let answered = SystemMethod::from_name(name) != SystemMethod::NotImplemented;
            assert_eq!(answered, is_implemented(name), "{name}");
        }
    }
}
