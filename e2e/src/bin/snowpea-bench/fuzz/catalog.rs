//! What the fuzz calls: every method of the protocol, read at run time from the suite's own
//! `GET /protocol.json` (the descriptor rendered by the gateway), so a method added to the
//! proto files is fuzzed without touching this code. Each method gets a [`Policy`]: most are
//! called with anything; a few that would stop the suite or reach the network are only sent
//! with params the gateway's validation refuses, and three are never sent.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

/// How a method may be called by the fuzz.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Valid-shaped params with random values, and every kind of malformed params.
    Any,
    /// Only params the gateway refuses before forwarding (they always carry an unknown
    /// field, and every params object of the protocol is `additionalProperties: false`):
    /// the method's validation path is fuzzed, the method never runs.
    SchemaOnly,
    /// Never sent.
    Never,
}

/// Methods that stop or replace the suite under the fuzz: never sent.
const NEVER: &[&str] = &["system.shutdown", "system.restart", "system.update"];

/// Methods that would reach the network (a provider, a chat platform, a registry, an SSH
/// host, a URL) or change what later calls reach (settings, credentials, model pins, a
/// browser): sent only with params the gateway refuses. The fuzz stays on loopback.
const SCHEMA_ONLY: &[&str] = &[
    "agent.bindChannel",
    "audio.install",
    "audio.record.start",
    "backend.set",
    "gateway.bind",
    "mcp.add",
    "mcp.test",
    "provider.configure",
    "provider.loginWeb",
    "provider.models",
    "provider.test",
    "session.setBrowserProvider",
    "session.setModel",
    "settings.set",
    "setup.applyDefaults",
    "skill.install",
    "skill.search",
    "web.search",
];

/// One method of the protocol.
#[derive(Debug, Clone)]
pub struct Method {
    /// JSON-RPC name, e.g. `memory.search`.
    pub name: String,
    /// JSON Schema of its params (an object schema; `Value::Null` when it has none).
    pub params: Value,
    /// How it may be called.
    pub policy: Policy,
    /// The process that answers it (`session`, `memory`, `system`, …).
    pub owner: String,
}

/// Every method, the server→client requests' result schemas and the error codes.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// Client→server methods and client notifications, in protocol order.
    pub methods: Vec<Method>,
    /// Server→client requests (`approval.request`, …) → the schema of the client's answer.
    pub answers: Vec<(String, Value)>,
    /// Every `error.data.code` the protocol defines.
    pub error_codes: HashSet<String>,
    /// The protocol version the daemon speaks (for `system.hello`).
    pub protocol_version: String,
}

impl Catalog {
    /// Fetches `GET http://127.0.0.1:<port>/protocol.json` (bounded wait) and reads it.
    pub async fn fetch(port: u16) -> anyhow::Result<Catalog> {
        let url = format!("http://127.0.0.1:{port}/protocol.json");
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .no_proxy()
            .build()?;
        let doc: Value = client
            .get(&url)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?
            .error_for_status()?
            .json()
            .await
            .with_context(|| format!("{url}: not JSON"))?;
        Catalog::from_doc(&doc)
    }

    /// Reads a protocol document (the shape of `docs/protocol.json`).
    pub fn from_doc(doc: &Value) -> anyhow::Result<Catalog> {
        let methods = doc["methods"]
            .as_object()
            .context("protocol.json has no \"methods\" object")?;
        let mut out = Catalog {
            methods: Vec::new(),
            answers: Vec::new(),
            error_codes: doc["errorCodes"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
            protocol_version: doc["protocolVersion"].as_str().unwrap_or("").to_owned(),
        };
        for (name, m) in methods {
            let params = m.get("params").cloned().unwrap_or(Value::Null);
            if m["direction"] == "serverToClient" {
                out.answers.push((
                    name.clone(),
                    m.get("result").cloned().unwrap_or(Value::Null),
                ));
                // Also sent by the client: the gateway must refuse it like any unknown call.
            }
            // A guarded method whose params would not be refused for an unknown field
            // could run: never send it.
            let mut policy = policy(name);
            if policy == Policy::SchemaOnly && params["additionalProperties"] != Value::Bool(false)
            {
                policy = Policy::Never;
            }
            out.methods.push(Method {
                name: name.clone(),
                params,
                policy,
                owner: m["owner"].as_str().unwrap_or("").to_owned(),
            });
        }
        anyhow::ensure!(!out.methods.is_empty(), "protocol.json lists no methods");
        Ok(out)
    }

    /// Methods the fuzz sends (everything but [`Policy::Never`]).
    pub fn callable(&self) -> impl Iterator<Item = &Method> {
        self.methods.iter().filter(|m| m.policy != Policy::Never)
    }
}

/// The policy of `name`.
pub fn policy(name: &str) -> Policy {
    if NEVER.contains(&name) {
        Policy::Never
    } else if SCHEMA_ONLY.contains(&name) {
        Policy::SchemaOnly
    } else {
        Policy::Any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in protocol document is read completely, and every method the policy
    /// lists exists in it (a renamed method would otherwise be fuzzed unguarded).
    #[test]
    fn reads_the_protocol_document_and_every_listed_method_exists() {
        let doc: Value = serde_json::from_str(include_str!("../../../../../docs/protocol.json"))
            .expect("docs/protocol.json");
        let c = Catalog::from_doc(&doc).unwrap();
        let names: HashSet<&str> = c.methods.iter().map(|m| m.name.as_str()).collect();
        for n in NEVER.iter().chain(SCHEMA_ONLY) {
            assert!(names.contains(n), "{n} is not a method of the protocol");
        }
        for m in &c.methods {
            assert_eq!(m.policy, policy(&m.name), "{}: params not closed", m.name);
        }
        assert!(names.contains("memory.search"));
        assert!(c.callable().all(|m| !NEVER.contains(&m.name.as_str())));
        assert!(c.answers.iter().any(|(n, _)| n == "approval.request"));
        assert!(c.error_codes.contains("invalid_params"));
        assert!(!c.protocol_version.is_empty());
    }
}
