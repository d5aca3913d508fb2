//! Host tools (protocol `tool.register`, `tool.invoke`, `tool.progress`, `tool.cancel`): a
//! client lends the agent its own tools with [`Client::register_tools`].
//!
//! The helper registers the tools, answers every `tool.invoke` by running the handler on its
//! own task, lets the handler report progress ([`ToolInvocation::progress`], which also
//! keeps the call's silence deadline from running out) and cancels the handler's
//! [`ToolInvocation::cancelled`] token when the daemon sends `tool.cancel` for the call (a
//! timeout or an interrupt). After a reconnect the tools are registered again, since the
//! daemon drops a closed connection's tools.
//!
//! ```no_run
//! # async fn demo(client: &snowpea_sdk::Client) -> Result<(), snowpea_sdk::Error> {
//! use snowpea_sdk::{HostTool, ToolResult};
//! let tools = vec![HostTool::new("page_read", "Read the open tab's text.", "read")];
//! client
//!     .register_tools(tools, |call| async move {
//!         call.progress("reading the tab").await.ok();
//!         ToolResult::ok(format!("tab text for {}", call.args))
//!     })
//!     .await?;
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::client::{lock, Inner, RequestHandler};
use crate::{Client, Error, RpcError};

/// One host tool as `tool.register` takes it (spec `tool.register.tools[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostTool {
    /// Name the model calls (`^[A-Za-z][A-Za-z0-9_-]{0,63}$`).
    pub name: String,
    /// What it does, as the model sees it.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub input_schema: Value,
    /// Permission tag: `read`, `write`, `exec`, `network`, `send`, `config`, `delegate`,
    /// `secret`.
    pub permission: String,
    /// Silence allowed before the daemon cancels a call, in ms (daemon default 120 s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// `safe` when calls may run side by side; `never` (the default) one at a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel: Option<String>,
    /// Listed to the model by name only until it loads the tool.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub deferred: bool,
    /// `tool.list` category.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Agents that may use it; `None` = every session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<String>>,
}

impl HostTool {
    /// A tool taking any object, with the default timeout, run one call at a time.
    pub fn new(name: &str, description: &str, permission: &str) -> Self {
        HostTool {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema: json!({"type": "object"}),
            permission: permission.to_owned(),
            timeout_ms: None,
            parallel: None,
            deferred: false,
            category: None,
            agents: None,
        }
    }

    /// With this argument schema.
    pub fn with_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }

    /// With this silence timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout_ms = Some(timeout.as_millis() as u64);
        self
    }

    /// Calls may overlap (`parallel: "safe"`).
    pub fn parallel_safe(mut self) -> Self {
        self.parallel = Some("safe".into());
        self
    }

    /// Loaded on demand (`deferred: true`).
    pub fn deferred(mut self) -> Self {
        self.deferred = true;
        self
    }
}

/// One content block of a result (`text`, or an `image` with base64 `data`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentBlock {
    /// `text` or `image`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Text of a text block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Base64 bytes of an image block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Media type of an image block, e.g. `image/png`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

/// The answer to one `tool.invoke`: `{ok, output, error, content, meta}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolResult {
    /// False reports the call as a tool error.
    pub ok: bool,
    /// Text the model reads.
    pub output: String,
    /// Error text when `ok` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Rich blocks; images reach vision models.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub content: Vec<ContentBlock>,
    /// Extra facts (≤ 16 KB is copied onto `tool.result`); `{"sensitive": true}` keeps the
    /// output out of the daemon's store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

impl ToolResult {
    /// A successful result.
    pub fn ok(output: impl Into<String>) -> Self {
        ToolResult {
            ok: true,
            output: output.into(),
            ..Default::default()
        }
    }

    /// A failed result.
    pub fn error(message: impl Into<String>) -> Self {
        ToolResult {
            ok: false,
            error: Some(message.into()),
            ..Default::default()
        }
    }

    /// With `meta`.
    pub fn with_meta(mut self, meta: Value) -> Self {
        self.meta = Some(meta);
        self
    }

    /// Marks the output sensitive (`meta.sensitive: true`).
    pub fn sensitive(mut self) -> Self {
        let mut meta = self.meta.take().unwrap_or_else(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            m.insert("sensitive".into(), Value::Bool(true));
        }
        self.meta = Some(meta);
        self
    }

    /// With an image block (`data` base64).
    pub fn with_image(mut self, media_type: &str, data: impl Into<String>) -> Self {
        self.content.push(ContentBlock {
            kind: "image".into(),
            text: None,
            data: Some(data.into()),
            media_type: Some(media_type.to_owned()),
        });
        self
    }
}

/// One call the handler runs.
#[derive(Clone)]
pub struct ToolInvocation {
    /// `tool.invoke.callId`.
    pub call_id: String,
    /// The tool called.
    pub name: String,
    /// The session whose turn called it.
    pub session_id: String,
    /// The model's arguments.
    pub args: Value,
    /// Every `tool.invoke` param as sent (`turnId`, `mode`, `workdir`, `origin`, `userTurn`,
    /// `job`, `guard`, `attachments`, …).
    pub params: Value,
    /// Cancelled when the daemon sends `tool.cancel` for this call (or the client closes).
    pub cancelled: CancellationToken,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ToolInvocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolInvocation")
            .field("call_id", &self.call_id)
            .field("name", &self.name)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl ToolInvocation {
    /// Sends `tool.progress{callId, message}`: shown as the `tool.progress` event, and
    /// restarts the call's silence deadline (an empty message is a keepalive).
    pub async fn progress(&self, message: &str) -> Result<(), Error> {
        self.inner
            .notify(
                "tool.progress",
                json!({"callId": self.call_id, "message": message}),
            )
            .await
    }
}

type Running = Arc<Mutex<HashMap<String, CancellationToken>>>;

/// How long a handler may run on after its call was cancelled before it is dropped.
pub const CANCEL_GRACE: Duration = Duration::from_secs(2);

impl Client {
    /// Registers `tools` (`tool.register`, all-or-nothing; returns the names registered) and
    /// answers every `tool.invoke` with `handler` (module doc). Calling it again replaces the
    /// handler and registers the new list beside what the daemon already holds.
    pub async fn register_tools<F, Fut>(
        &self,
        tools: Vec<HostTool>,
        handler: F,
    ) -> Result<Vec<String>, Error>
    where
        F: Fn(ToolInvocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        let inner = self.inner().clone();
        let running: Running = Arc::default();
        let handler = Arc::new(handler);
        let on_invoke: RequestHandler = {
            let (inner, running) = (inner.clone(), running.clone());
            Arc::new(move |params: Value| {
                let (inner, running, handler) = (inner.clone(), running.clone(), handler.clone());
                Box::pin(async move {
                    let s = |k: &str| {
                        params
                            .get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let call_id = s("callId");
                    let cancelled = inner.cancel.child_token();
                    lock(&running).insert(call_id.clone(), cancelled.clone());
                    let call = ToolInvocation {
                        call_id: call_id.clone(),
                        name: s("name"),
                        session_id: s("sessionId"),
                        args: params.get("args").cloned().unwrap_or_else(|| json!({})),
                        params,
                        cancelled: cancelled.clone(),
                        inner,
                    };
                    // A cancelled handler gets CANCEL_GRACE to notice its token and stop;
                    // then it is dropped. Either way the call is answered `cancelled`.
                    let outcome = tokio::select! {
                        r = handler(call) => Some(r),
                        _ = async {
                            cancelled.cancelled().await;
                            tokio::time::sleep(CANCEL_GRACE).await;
                        } => None,
                    };
                    lock(&running).remove(&call_id);
                    match outcome.filter(|_| !cancelled.is_cancelled()) {
                        Some(r) => serde_json::to_value(r)
                            .map_err(|e| RpcError::with_code("internal", e.to_string())),
                        None => Err(RpcError::with_code(
                            "cancelled",
                            "the call was cancelled (tool.cancel)",
                        )),
                    }
                })
            })
        };
        inner.set_handler("tool.invoke", on_invoke);
        let params = json!({"tools": tools});
        let result = self.call("tool.register", params.clone()).await?;
        spawn_cancel_listener(inner.clone(), running);
        spawn_re_register(inner, params);
        Ok(result
            .get("registered")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// Cancels a running call's token on `tool.cancel{callId}`.
fn spawn_cancel_listener(inner: Arc<Inner>, running: Running) {
    let mut notes = inner.subscribe();
    tokio::spawn(async move {
        loop {
            let note = tokio::select! {
                _ = inner.cancel.cancelled() => break,
                n = notes.recv() => n,
            };
            match note {
                Ok(n) if n.method == "tool.cancel" => {
                    let call = n
                        .params
                        .get("callId")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if let Some(token) = lock(&running).get(call) {
                        token.cancel();
                    }
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
}

/// Registers the tools again on every new connection (the daemon dropped them with the old).
fn spawn_re_register(inner: Arc<Inner>, params: Value) {
    let mut conn = inner.conn.subscribe();
    let start = conn.borrow().generation;
    tokio::spawn(async move {
        let mut seen = start;
        loop {
            tokio::select! {
                _ = inner.cancel.cancelled() => break,
                changed = conn.changed() => if changed.is_err() { break },
            }
            let generation = conn.borrow().generation;
            if generation != seen {
                seen = generation;
                let timeout = inner.opts.call_timeout;
                if let Err(e) = inner
                    .request("tool.register", params.clone(), timeout)
                    .await
                {
                    tracing::warn!(error = %e, "could not register host tools again after a reconnect");
                }
            }
        }
    });
}
