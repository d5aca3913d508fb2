//! The read-only HTTP endpoints next to the WebSocket (spec "Transport"):
//! `GET /health`, `GET /version`, `GET /protocol.json`.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::{IntoResponse, Json, Response};
use serde_json::json;

/// `GET /health` → `{"status":"ok"}`.
pub async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /version` → `{"serverVersion", "protocolVersion"}`.
pub async fn version() -> Json<serde_json::Value> {
    Json(json!({
        "serverVersion": snowpea_common::VERSION,
        "protocolVersion": snowpea_proto::PROTOCOL_VERSION,
    }))
}

/// `GET /protocol.json` → the protocol schema, rendered once.
pub async fn protocol() -> Response {
    static BODY: LazyLock<bytes::Bytes> = LazyLock::new(|| {
        serde_json::to_vec(&snowpea_proto::gen::protocol_json())
            .unwrap_or_default()
            .into()
    });
    ([(header::CONTENT_TYPE, "application/json")], BODY.clone()).into_response()
}
