//! Client side of the legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp 3 no longer
//! ships: `GET url` opens an event stream whose first `endpoint` event names the URL to POST
//! JSON-RPC messages to; answers arrive as `message` events on the stream.
//!
//! Built as the `(Sink, Stream)` pair rmcp accepts as a transport: the sink is a channel
//! drained by a task that POSTs each message; the stream is fed by the task reading events.
//! Dropping the transport ends both tasks.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use indexmap::IndexMap;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use tokio_stream::wrappers::ReceiverStream;

/// The transport pair: messages to the server, messages from it.
pub type SseTransport = (
    futures::channel::mpsc::UnboundedSender<ClientJsonRpcMessage>,
    ReceiverStream<ServerJsonRpcMessage>,
);

fn with_headers(
    mut req: rmcp_reqwest::RequestBuilder,
    headers: Option<&IndexMap<String, String>>,
) -> rmcp_reqwest::RequestBuilder {
    for (k, v) in headers.into_iter().flatten() {
        req = req.header(k.as_str(), v.as_str());
    }
    req
}

/// Opens the event stream and waits (at most `timeout`) for the `endpoint` event. Errors do
/// not repeat the URL (the caller names it, see `connect::describe_remote_error`).
pub async fn connect(
    url: &str,
    headers: Option<&IndexMap<String, String>>,
    timeout: Duration,
) -> anyhow::Result<SseTransport> {
    crate::install_crypto_provider();
    let base = url::Url::parse(url)?;
    let client = rmcp_reqwest::Client::builder().build()?;
    let get = with_headers(client.get(url), headers).header("accept", "text/event-stream");
    let resp = tokio::time::timeout(timeout, get.send())
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {}s", timeout.as_secs()))??;
    if !resp.status().is_success() {
        anyhow::bail!("the event stream answered HTTP {}", resp.status());
    }
    let mut events = resp.bytes_stream().eventsource();
    let endpoint = tokio::time::timeout(timeout, async {
        while let Some(ev) = events.next().await {
            let ev = ev.map_err(|e| anyhow::anyhow!("event stream: {e}"))?;
            if ev.event == "endpoint" {
                return Ok(base.join(ev.data.trim())?);
            }
        }
        anyhow::bail!("the event stream ended before the endpoint event")
    })
    .await
    .map_err(|_| anyhow::anyhow!("no endpoint event within {}s", timeout.as_secs()))??;

    let (in_tx, in_rx) = tokio::sync::mpsc::channel::<ServerJsonRpcMessage>(64);
    let (out_tx, mut out_rx) = futures::channel::mpsc::unbounded::<ClientJsonRpcMessage>();
    let reader_tx = in_tx.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = reader_tx.closed() => break,
                ev = events.next() => match ev {
                    Some(Ok(ev)) if ev.event == "message" || ev.event.is_empty() => {
                        match serde_json::from_str::<ServerJsonRpcMessage>(&ev.data) {
                            Ok(m) => if reader_tx.send(m).await.is_err() { break },
                            Err(e) => tracing::debug!(error = %e, "sse: skipping a message that is not JSON-RPC"),
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => { tracing::debug!(error = %e, "sse: event stream failed"); break }
                    None => break,
                },
            }
        }
    });
    let headers = headers.cloned();
    tokio::spawn(async move {
        while let Some(msg) = out_rx.next().await {
            let req = with_headers(client.post(endpoint.clone()), headers.as_ref()).json(&msg);
            match req.send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => {
                    tracing::debug!(status = %r.status(), "sse: POST refused; closing");
                    break;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "sse: POST failed; closing");
                    break;
                }
            }
        }
        // Ending the incoming side tells rmcp the transport is gone.
        drop(in_tx);
    });
    Ok((out_tx, ReceiverStream::new(in_rx)))
}
