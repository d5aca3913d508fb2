//! Test-only HTTP server on 127.0.0.1:0 that replays recorded vendor wire streams
//! (fixtures under `svc-session/crates/llm/tests/fixtures/providers/`), records what it received,
//! and notices when a client drops a streaming response.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::Value;

/// Loads a fixture file from `tests/fixtures/providers/`.
pub(crate) fn fixture(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/providers/").to_string() + name;
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

/// One scripted answer.
#[derive(Clone)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Body is sent in pieces of this many bytes (splits events and even UTF-8 sequences).
    pub chunk_size: usize,
    /// Pause between pieces.
    pub chunk_delay: Duration,
    /// After the body, keep the connection open sending SSE comments until the client
    /// goes away.
    pub hold_open: bool,
}

impl Reply {
    /// A 200 `text/event-stream` answer with `body`, in 37-byte pieces.
    pub fn sse(body: String) -> Self {
        Reply {
            status: 200,
            headers: vec![(
                "content-type".into(),
                "text/event-stream; charset=utf-8".into(),
            )],
            body,
            chunk_size: 37,
            chunk_delay: Duration::ZERO,
            hold_open: false,
        }
    }
    /// A JSON error answer.
    pub fn json(status: u16, body: &str) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
            chunk_size: usize::MAX,
            chunk_delay: Duration::ZERO,
            hold_open: false,
        }
    }
    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// One request the server received.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Clone)]
struct Shared {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    dropped: Arc<AtomicBool>,
}

/// A running replay server.
pub(crate) struct TestServer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }
    /// True once a streaming body was dropped before it was complete (client went away).
    pub fn client_dropped(&self) -> bool {
        self.shared.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct DropFlag {
    flag: Arc<AtomicBool>,
    complete: bool,
}

impl Drop for DropFlag {
    fn drop(&mut self) {
        if !self.complete {
            self.flag.store(true, Ordering::SeqCst);
        }
    }
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body_json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(Recorded {
        method: method.to_string(),
        path: uri.path().to_string(),
        headers,
        body: body_json,
    });
    let reply = shared.replies.lock().unwrap().pop_front();
    let Some(reply) = reply else {
        return Response::builder()
            .status(500)
            .body(Body::from("no more scripted replies"))
            .unwrap();
    };
    let mut builder = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (k, v) in &reply.headers {
        builder = builder.header(k, v);
    }
    let pieces: Vec<Bytes> = reply
        .body
        .as_bytes()
        .chunks(reply.chunk_size.max(1))
        .map(Bytes::copy_from_slice)
        .collect();
    let guard = DropFlag {
        flag: shared.dropped.clone(),
        complete: false,
    };
    let (delay, hold) = (reply.chunk_delay, reply.hold_open);
    let stream = async_stream::stream! {
        let mut guard = guard;
        for p in pieces {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            yield Ok::<Bytes, std::io::Error>(p);
        }
        if hold {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                yield Ok(Bytes::from_static(b": keep-alive\n\n"));
            }
        }
        guard.complete = true;
    };
    builder.body(Body::from_stream(stream)).unwrap()
}

/// Starts a server answering requests (any method, any path) with `replies` in order.
pub(crate) async fn serve(replies: Vec<Reply>) -> TestServer {
    let shared = Shared {
        replies: Arc::new(Mutex::new(replies.into())),
        requests: Arc::default(),
        dropped: Arc::default(),
    };
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    TestServer {
        base: format!("http://{addr}"),
        shared,
        task,
    }
}

/// A [`crate::provider::Providers`] on a temp home with a fixed environment, and the feed of
/// the notifications it publishes.
pub(crate) struct Harness {
    /// The temp home (kept alive).
    pub dir: tempfile::TempDir,
    /// The component under test.
    pub providers: crate::provider::Providers,
    feed: snowpea_common::bus::OutboundStream,
}

impl Harness {
    /// A harness whose environment is `env`.
    pub async fn new(env: &[(&str, &str)]) -> Harness {
        use snowpea_proto::rpc::v1::service_bus_server::ServiceBus;
        let dir = tempfile::tempdir().unwrap();
        let home = snowpea_common::home::Home::new(dir.path());
        let map: std::collections::HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let hub = snowpea_common::bus::BusHub::new();
        let providers = crate::provider::Providers::new(
            home,
            Arc::new(move |k: &str| map.get(k).cloned()),
            hub.clone(),
        );
        let feed = snowpea_common::bus::BusService::new(hub)
            .subscribe(tonic::Request::new(Default::default()))
            .await
            .unwrap()
            .into_inner();
        Harness {
            dir,
            providers,
            feed,
        }
    }

    /// `$SNOWPEA_HOME/<name>`.
    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    /// A JSON file of the home (`{}` when missing).
    pub fn json(&self, name: &str) -> Value {
        std::fs::read(self.path(name))
            .ok()
            .map(|b| serde_json::from_slice(&b).unwrap())
            .unwrap_or_else(|| serde_json::json!({}))
    }

    /// Writes the global settings.
    pub fn write_settings(&self, settings: &Value) {
        std::fs::write(self.path("settings.json"), settings.to_string()).unwrap();
    }

    /// The params of the next notification named `method` (others are skipped), waiting at
    /// most 20 s.
    pub async fn next(&mut self, method: &str) -> Value {
        use futures::StreamExt;
        use snowpea_proto::rpc::v1::outbound::Item;
        let wait = async {
            while let Some(item) = self.feed.next().await {
                if let Some(Item::Notification(n)) = item.unwrap().item {
                    if n.method == method {
                        return serde_json::from_str(&n.params_json).unwrap();
                    }
                }
            }
            panic!("the notification feed ended before {method}");
        };
        snowpea_testkit::within(Duration::from_secs(20), method, wait).await
    }
}
