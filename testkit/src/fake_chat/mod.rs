//! Fake chat platforms on 127.0.0.1 for svc-chat's tests (issue 22): a Telegram Bot API
//! ([`FakeTelegram`]), a Discord REST + gateway websocket ([`FakeDiscord`]) and a Slack Web API +
//! Socket Mode endpoint ([`FakeSlack`]). Each records what the bot sent, lets the test inject
//! inbound messages and button presses, answer 429 with a retry-after, and drop connections.
//! Point svc-chat at one with `settings.gateway.<platform>.baseUrl` = [`FakeTelegram::base_url`]
//! (etc.). The servers run as [`crate::CheckedTask`]s; they stop when dropped.

mod discord;
mod slack;
mod telegram;

pub use discord::FakeDiscord;
pub use slack::FakeSlack;
pub use telegram::FakeTelegram;

use std::net::SocketAddr;

use crate::CheckedTask;

/// Serves `router` on an ephemeral loopback port.
async fn serve(router: axum::Router) -> (SocketAddr, CheckedTask<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("local addr");
    let task = CheckedTask::spawn("fake chat platform", async move {
        axum::serve(listener, router).await.expect("fake server");
    });
    (addr, task)
}

/// A 429 answer with `retry_after` seconds in the header and in the body's Telegram and
/// Discord/Slack spellings.
fn too_many(retry_after: u64) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        [(axum::http::header::RETRY_AFTER, retry_after.to_string())],
        axum::Json(serde_json::json!({
            "ok": false,
            "error_code": 429,
            "description": "Too Many Requests",
            "error": "ratelimited",
            "retry_after": retry_after,
            "parameters": { "retry_after": retry_after },
        })),
    )
        .into_response()
}
