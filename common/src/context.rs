//! Connection context that travels with every gateway → service call as gRPC metadata
//! (DESIGN.md §4): the connection id and what the client said in `system.hello`.

use tonic::metadata::{MetadataMap, MetadataValue};

/// Metadata key: gateway connection id.
pub const CONNECTION_ID: &str = "snowpea-connection-id";
/// Metadata key: system.hello clientId.
pub const CLIENT_ID: &str = "snowpea-client-id";
/// Metadata key: system.hello clientKind.
pub const CLIENT_KIND: &str = "snowpea-client-kind";
/// Metadata key: system.hello instanceId.
pub const INSTANCE_ID: &str = "snowpea-instance-id";
/// Metadata key: the request id the gateway gives every forwarded JSON-RPC call (and logs
/// under the same field name), so one call can be followed across processes (issue 13 §3).
pub const REQUEST_ID: &str = "snowpea-request-id";

/// Who is calling: absent fields mean an internal caller (e.g. the scheduler) or grpcurl.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallContext {
    /// Gateway connection id of the caller.
    pub connection_id: Option<String>,
    /// The caller's clientId.
    pub client_id: Option<String>,
    /// The caller's clientKind (`tui`, `browser`, …).
    pub client_kind: Option<String>,
    /// The caller's instanceId.
    pub instance_id: Option<String>,
}

fn get(md: &MetadataMap, key: &str) -> Option<String> {
    md.get(key)
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

impl CallContext {
    /// Reads the context from request metadata.
    pub fn from_metadata(md: &MetadataMap) -> Self {
        CallContext {
            connection_id: get(md, CONNECTION_ID),
            client_id: get(md, CLIENT_ID),
            client_kind: get(md, CLIENT_KIND),
            instance_id: get(md, INSTANCE_ID),
        }
    }

    /// Reads the context of a tonic request.
    pub fn of<T>(req: &tonic::Request<T>) -> Self {
        Self::from_metadata(req.metadata())
    }

    /// Writes the context into outgoing metadata. Values that are not valid header text
    /// are skipped (client-supplied ids are checked at system.hello).
    pub fn apply(&self, md: &mut MetadataMap) {
        for (key, value) in [
            (CONNECTION_ID, &self.connection_id),
            (CLIENT_ID, &self.client_id),
            (CLIENT_KIND, &self.client_kind),
            (INSTANCE_ID, &self.instance_id),
        ] {
            if let Some(v) = value {
                if let Ok(v) = MetadataValue::try_from(v.as_str()) {
                    md.insert(key, v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_metadata() {
        let ctx = CallContext {
            connection_id: Some("c1".into()),
            client_id: Some("tui-1".into()),
            client_kind: Some("tui".into()),
            instance_id: None,
        };
        let mut md = MetadataMap::new();
        ctx.apply(&mut md);
        assert_eq!(CallContext::from_metadata(&md), ctx);
    }
}
