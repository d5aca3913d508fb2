//! One language server process and its LSP connection over stdio: framing by `lsp-server`
//! (`Content-Length` messages), shapes from `lsp-types`. A reader thread and a writer thread
//! own the pipes; requests wait for their response with a timeout; the server's
//! `publishDiagnostics` are kept per document and waited on by [`Client::diagnostics`].
//! Requests the server sends (`workspace/configuration`, `client/registerCapability`, …)
//! are answered with empty results so no server waits on us.

use std::collections::HashMap;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lsp_server::{Message, Notification, Request, RequestId, Response};
use lsp_types::{Diagnostic, PublishDiagnosticsParams, Uri};
use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};

/// Longest wait for the `initialize` answer.
pub const INIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Latest diagnostics per document URI: (publish counter, document version, diagnostics).
type Published = Arc<Mutex<HashMap<String, (u64, Option<i32>, Vec<Diagnostic>)>>>;

/// Where a document stood when it was sent ([`Client::sync`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synced {
    /// The publish counter before the change.
    pub before: u64,
    /// The document's version sent.
    pub version: i32,
}

/// A running server.
pub struct Client {
    child: Mutex<Child>,
    pid: u32,
    tx: std::sync::mpsc::Sender<Message>,
    next_id: AtomicI32,
    pending: Arc<Mutex<HashMap<RequestId, oneshot::Sender<Response>>>>,
    /// Latest diagnostics per document URI, with a counter of publishes.
    diagnostics: Published,
    published: watch::Sender<u64>,
    /// Open documents and their version.
    versions: Mutex<HashMap<String, i32>>,
    /// Flips to true when the server's stdout closes (it exited or crashed).
    exited: watch::Receiver<bool>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `file://` URI of an absolute path.
pub fn uri_of(path: &Path) -> String {
    url::Url::from_file_path(path)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| format!("file://{}", path.display()))
}

/// The path of a `file://` URI.
pub fn path_of(uri: &str) -> Option<PathBuf> {
    url::Url::parse(uri).ok()?.to_file_path().ok()
}

impl Client {
    /// Spawns `program args` in `root` (own process group, stdin/stdout piped, stderr
    /// discarded, orphan `mark` set) and starts the reader and writer threads.
    pub fn spawn(
        program: &Path,
        args: &[String],
        root: &Path,
        mark: Option<&str>,
    ) -> std::io::Result<Client> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some(mark) = mark {
            cmd.env(snowpea_common::orphans::MARK_ENV, mark);
        }
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let (tx, rx) = std::sync::mpsc::channel::<Message>();
        std::thread::Builder::new()
            .name(format!("lsp-write-{pid}"))
            .spawn(move || {
                let mut w = BufWriter::new(stdin);
                while let Ok(msg) = rx.recv() {
                    if msg.write(&mut w).is_err() {
                        break;
                    }
                }
            })?;
        let pending: Arc<Mutex<HashMap<RequestId, oneshot::Sender<Response>>>> = Arc::default();
        let diagnostics: Published = Arc::default();
        let (published, _) = watch::channel(0u64);
        let (exited_tx, exited) = watch::channel(false);
        {
            let pending = pending.clone();
            let diagnostics = diagnostics.clone();
            let published = published.clone();
            let tx = tx.clone();
            std::thread::Builder::new()
                .name(format!("lsp-read-{pid}"))
                .spawn(move || {
                    let mut r = BufReader::new(stdout);
                    while let Ok(Some(msg)) = Message::read(&mut r) {
                        match msg {
                            Message::Response(resp) => {
                                if let Some(waiter) = lock(&pending).remove(&resp.id) {
                                    let _ = waiter.send(resp);
                                }
                            }
                            Message::Notification(n)
                                if n.method == "textDocument/publishDiagnostics" =>
                            {
                                if let Ok(p) =
                                    serde_json::from_value::<PublishDiagnosticsParams>(n.params)
                                {
                                    // Stored with the next counter value before the counter moves,
                                    // so a waiter woken by it finds the entry.
                                    let seq = *published.borrow() + 1;
                                    lock(&diagnostics)
                                        .insert(p.uri.to_string(), (seq, p.version, p.diagnostics));
                                    published.send_modify(|n| *n = seq);
                                }
                            }
                            Message::Notification(_) => {}
                            Message::Request(req) => {
                                let result = match req.method.as_str() {
                                    "workspace/configuration" => {
                                        let n =
                                            req.params["items"].as_array().map_or(0, |a| a.len());
                                        Value::Array(vec![Value::Null; n])
                                    }
                                    _ => Value::Null,
                                };
                                let _ =
                                    tx.send(Message::Response(Response::new_ok(req.id, result)));
                            }
                        }
                    }
                    let _ = exited_tx.send(true);
                    lock(&pending).clear();
                })?;
        }
        Ok(Client {
            child: Mutex::new(child),
            pid,
            tx,
            next_id: AtomicI32::new(1),
            pending,
            diagnostics,
            published,
            versions: Mutex::new(HashMap::new()),
            exited,
        })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// True once the server's output closed.
    pub fn has_exited(&self) -> bool {
        *self.exited.borrow()
    }

    /// Resolves when the server's output closes.
    pub async fn wait_exit(&self) {
        let mut rx = self.exited.clone();
        let _ = rx.wait_for(|e| *e).await;
    }

    /// Sends a request and waits at most `timeout` for its result (an LSP error or a
    /// closed server is an `Err` with a message).
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, String> {
        let id = RequestId::from(self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id.clone(), tx);
        if self.has_exited()
            || self
                .tx
                .send(Message::Request(Request::new(
                    id.clone(),
                    method.into(),
                    params,
                )))
                .is_err()
        {
            lock(&self.pending).remove(&id);
            return Err("the language server is not running".into());
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(resp)) => match (resp.result, resp.error) {
                (_, Some(e)) => Err(format!("{method}: {} ({})", e.message, e.code)),
                (r, None) => Ok(r.unwrap_or(Value::Null)),
            },
            Ok(Err(_)) => Err("the language server exited".into()),
            Err(_) => {
                lock(&self.pending).remove(&id);
                Err(format!(
                    "{method}: no answer from the language server within {} s",
                    timeout.as_secs_f64()
                ))
            }
        }
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        let _ = self.tx.send(Message::Notification(Notification::new(
            method.into(),
            params,
        )));
    }

    /// `initialize` + `initialized` for `root`.
    pub async fn initialize(&self, root: &Path, timeout: Duration) -> Result<Value, String> {
        let uri = uri_of(root);
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "root".into());
        let params = json!({
            "processId": std::process::id(),
            "rootUri": uri,
            "rootPath": root,
            "workspaceFolders": [{"uri": uri, "name": name}],
            "clientInfo": {"name": "snowpea"},
            "capabilities": {
                "textDocument": {
                    "synchronization": {"didSave": true, "dynamicRegistration": false},
                    "publishDiagnostics": {"relatedInformation": false, "versionSupport": true},
                    "hover": {"contentFormat": ["plaintext", "markdown"]},
                    "definition": {"linkSupport": false},
                    "references": {},
                    "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
                    "rename": {"prepareSupport": false}
                },
                // No `workspaceFolders` capability: pyright then waits for folder events that
                // never come and publishes nothing.
                "workspace": {"configuration": true, "symbol": {}},
                "window": {"workDoneProgress": false}
            }
        });
        let result = self.request("initialize", params, timeout).await?;
        self.notify("initialized", json!({}));
        Ok(result)
    }

    /// Opens `path` (first time) or sends its full new `text` (`didChange` + `didSave`).
    /// Returns the publish counter before the change and the document version, for
    /// [`Client::diagnostics`].
    pub fn sync(&self, path: &Path, language_id: &str, text: &str) -> Synced {
        let before = *self.published.borrow();
        let uri = uri_of(path);
        let mut versions = lock(&self.versions);
        let version = match versions.get_mut(&uri) {
            None => {
                versions.insert(uri.clone(), 1);
                self.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": uri, "languageId": language_id, "version": 1, "text": text}}),
                );
                1
            }
            Some(v) => {
                *v += 1;
                self.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": uri, "version": *v}, "contentChanges": [{"text": text}]}),
                );
                self.notify(
                    "textDocument/didSave",
                    json!({"textDocument": {"uri": uri}, "text": text}),
                );
                *v
            }
        };
        Synced { before, version }
    }

    /// True when `path` is open on the server.
    pub fn is_open(&self, path: &Path) -> bool {
        lock(&self.versions).contains_key(&uri_of(path))
    }

    /// The diagnostics of `path` published after the counter was `since`, waiting at most
    /// `wait`; then whatever is known (possibly older, possibly none).
    pub async fn diagnostics(
        &self,
        path: &Path,
        since: Synced,
        wait: Duration,
    ) -> Option<Vec<Diagnostic>> {
        let uri = uri_of(path);
        let mut rx = self.published.subscribe();
        let fresh = {
            let diags = self.diagnostics.clone();
            let uri = uri.clone();
            async move {
                loop {
                    rx.borrow_and_update();
                    let fresh = lock(&diags).get(&uri).is_some_and(|(seq, version, _)| {
                        *seq > since.before && version.is_none_or(|v| v >= since.version)
                    });
                    if fresh {
                        // A publish for this file after the change (of its version, when the
                        // server says which).
                        return;
                    }
                    if rx.changed().await.is_err() {
                        return;
                    }
                }
            }
        };
        // Bounded, and cut short when the server exits meanwhile.
        tokio::select! {
            _ = tokio::time::timeout(wait, fresh) => {}
            _ = self.wait_exit() => {}
        }
        lock(&self.diagnostics).get(&uri).map(|(_, _, d)| d.clone())
    }

    /// Asks the server to shut down, then kills it.
    pub async fn stop(&self) {
        if !self.has_exited() {
            let _ = self
                .request("shutdown", Value::Null, Duration::from_secs(2))
                .await;
            self.notify("exit", Value::Null);
            let _ = tokio::time::timeout(Duration::from_secs(2), self.wait_exit()).await;
        }
        self.kill();
    }

    /// Kills the process group and reaps the server.
    pub fn kill(&self) {
        let pgid = nix::unistd::Pid::from_raw(self.pid as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let mut child = lock(&self.child);
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Parses a URI string as `lsp_types::Uri` (for typed params).
pub fn lsp_uri(path: &Path) -> Option<Uri> {
    uri_of(path).parse().ok()
}
