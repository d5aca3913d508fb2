//! The way back: the events of every conversation's session to its chat, and the approvals and
//! questions of those sessions as buttons.
//!
//! * One worker task per session handles its `session.event`s in seq order, each once: a gap
//!   (or a restart: [`Relay::attach`] starts with a fill) is filled with `session.resume` from
//!   the last handled seq, which the store keeps (`conversations.last_seq`), so a `message.done`
//!   missed while svc-chat was down is sent when it comes back, and one already sent is not
//!   sent again. `message.done` → the text, converted and split ([`crate::format`]);
//!   `turn.started` → the typing indicator every [`TYPING_EVERY`] until `turn.done`; `error` →
//!   a warning line.
//! * `approval.request` / `question.request` (svc-chat is the sessions' origin connection) are
//!   posted with buttons whose data is a short random token; a press is accepted only from the
//!   binding's `userId` (with none, nobody can answer from chat and the request waits for its
//!   timeout). The handler waits at most the request's `timeoutSec` (+ [`GRACE`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_sdk::{Client, RpcError, SessionEvent};
use tokio::sync::{mpsc, oneshot};

use crate::chat::Chat;
use crate::platform::Button;
use crate::store::Store;

/// How often the typing indicator is renewed while a turn runs (Telegram shows it 5 s).
pub const TYPING_EVERY: Duration = Duration::from_secs(4);
/// Longest a turn shows the typing indicator.
pub const TYPING_MAX: Duration = Duration::from_secs(30 * 60);
/// Extra wait of an approval/question handler beyond the request's own timeout.
pub const GRACE: Duration = Duration::from_secs(5);
/// How often a failed send is tried.
pub const SEND_ATTEMPTS: u32 = 3;

enum Work {
    Event(SessionEvent),
    Fill,
}

struct Conv {
    binding_id: String,
    channel: String,
    tx: mpsc::UnboundedSender<Work>,
}

/// A posted approval or question waiting for a button press.
struct Pending {
    request_id: String,
    binding_id: String,
    /// Per button token: what the press answers.
    choice: Choice,
    tx: Arc<Mutex<Option<oneshot::Sender<Value>>>>,
}

#[derive(Clone)]
enum Choice {
    /// An approval decision: `decision`, `scope`.
    Approval(&'static str, &'static str),
    /// Option `label` of question `index` of a batch of `count`.
    Question {
        index: usize,
        count: usize,
        label: String,
        answers: Arc<Mutex<Vec<Option<Value>>>>,
    },
}

/// The relay state (owned by [`Chat`]).
pub struct Relay {
    store: Arc<Store>,
    convs: Mutex<HashMap<String, Conv>>,
    pending: Mutex<HashMap<String, Pending>>,
    /// Questions without options, answered by the next message of the binding's user in
    /// their chat, oldest first.
    texts: Mutex<Vec<TextWait>>,
}

/// A question waiting for a text answer.
struct TextWait {
    request_id: String,
    binding_id: String,
    channel: String,
    index: usize,
    secret: bool,
    answers: Arc<Mutex<Vec<Option<Value>>>>,
    tx: Arc<Mutex<Option<oneshot::Sender<Value>>>>,
}

/// Sends the batch's answers once every question has one; true when it did.
fn complete(
    answers: &Mutex<Vec<Option<Value>>>,
    tx: &Mutex<Option<oneshot::Sender<Value>>>,
) -> bool {
    let a = answers.lock().unwrap_or_else(|e| e.into_inner());
    if !a.iter().all(Option::is_some) {
        return false;
    }
    let all: Vec<Value> = a.iter().flatten().cloned().collect();
    if let Some(tx) = tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = tx.send(json!({ "answers": all }));
    }
    true
}

impl Relay {
    /// An empty relay.
    pub fn new(store: Arc<Store>) -> Relay {
        Relay {
            store,
            convs: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            texts: Mutex::new(Vec::new()),
        }
    }

    /// The (binding, channel) a session belongs to.
    pub fn conversation_of(&self, session_id: &str) -> Option<(String, String)> {
        self.convs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session_id)
            .map(|c| (c.binding_id.clone(), c.channel.clone()))
    }

    /// Starts relaying session `session_id` of (binding, channel) from seq `last_seq` on.
    pub fn attach(
        &self,
        chat: &Arc<Chat>,
        client: &Arc<Client>,
        binding_id: &str,
        channel: &str,
        session_id: &str,
        last_seq: u64,
    ) {
        let mut convs = self.convs.lock().unwrap_or_else(|e| e.into_inner());
        if convs.contains_key(session_id) {
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(Work::Fill);
        convs.insert(
            session_id.to_owned(),
            Conv {
                binding_id: binding_id.to_owned(),
                channel: channel.to_owned(),
                tx,
            },
        );
        client.track(session_id, Some(last_seq));
        let worker = Worker {
            chat: Arc::downgrade(chat),
            client: client.clone(),
            store: self.store.clone(),
            session_id: session_id.to_owned(),
            binding_id: binding_id.to_owned(),
            channel: channel.to_owned(),
            last: last_seq,
            typing: None,
        };
        tokio::spawn(worker.run(rx));
    }

    /// Stops relaying a session (the conversation moved on with `/new` or `/resume`).
    pub fn detach(&self, session_id: &str) {
        self.convs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session_id);
    }

    /// Stops relaying every session of a binding and drops its pending buttons.
    pub fn forget_binding(&self, binding_id: &str) {
        self.convs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, c| c.binding_id != binding_id);
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, p| p.binding_id != binding_id);
    }

    /// Reads the client's notifications for ever: session events to their workers, resolved
    /// approvals/questions drop their buttons.
    pub async fn pump(chat: Weak<Chat>, client: Arc<Client>) {
        let mut rx = client.subscribe();
        loop {
            let n = match rx.recv().await {
                Ok(n) => n,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    // Workers fill their gaps with session.resume on the next event; make
                    // every one check now.
                    tracing::warn!(missed, "notification stream lagged");
                    let Some(chat) = chat.upgrade() else { return };
                    for c in chat
                        .relay
                        .convs
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .values()
                    {
                        let _ = c.tx.send(Work::Fill);
                    }
                    continue;
                }
                Err(_) => return,
            };
            let Some(chat) = chat.upgrade() else { return };
            match n.method.as_str() {
                "session.event" => {
                    if let Some(e) = n.session_event() {
                        let convs = chat.relay.convs.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(c) = convs.get(&e.session_id) {
                            let _ = c.tx.send(Work::Event(e));
                        }
                    }
                }
                "approval.resolved" | "question.resolved" => {
                    if let Some(id) = n.params.get("requestId").and_then(Value::as_str) {
                        chat.relay.drop_request(id);
                    }
                }
                _ => {}
            }
        }
    }

    fn drop_request(&self, request_id: &str) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, p| p.request_id != request_id);
        self.texts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|t| t.request_id != request_id);
    }

    /// A message of `user` in (binding, channel) answering the oldest text question waiting
    /// there; `Some(secret)` when it did (the message is then not prompted).
    pub fn answer_text(
        &self,
        binding_id: &str,
        channel: &str,
        allowed: Option<&str>,
        user: &str,
        text: &str,
    ) -> Option<bool> {
        if allowed != Some(user) {
            return None;
        }
        let mut texts = self.texts.lock().unwrap_or_else(|e| e.into_inner());
        let pos = texts
            .iter()
            .position(|t| t.binding_id == binding_id && t.channel == channel)?;
        let t = texts.remove(pos);
        {
            let mut a = t.answers.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(slot) = a.get_mut(t.index) {
                *slot = Some(json!({ "text": text }));
            }
        }
        if complete(&t.answers, &t.tx) {
            let id = t.request_id.clone();
            texts.retain(|x| x.request_id != id);
            drop(texts);
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|_, p| p.request_id != id);
        }
        Some(t.secret)
    }

    /// Registers the `approval.request` and `question.request` handlers on `client`.
    pub fn register_handlers(chat: &Arc<Chat>, client: &Arc<Client>) {
        let weak = Arc::downgrade(chat);
        client.on_request("approval.request", move |params| {
            let weak = weak.clone();
            async move {
                let chat = weak
                    .upgrade()
                    .ok_or_else(|| RpcError::with_code("unavailable", "svc-chat is stopping"))?;
                chat.relay.approval(&chat, params).await
            }
        });
        let weak = Arc::downgrade(chat);
        client.on_request("question.request", move |params| {
            let weak = weak.clone();
            async move {
                let chat = weak
                    .upgrade()
                    .ok_or_else(|| RpcError::with_code("unavailable", "svc-chat is stopping"))?;
                chat.relay.question(&chat, params).await
            }
        });
    }

    /// The `requestId` of a server → client request (`approval.request`, `question.request`)
    /// and the (binding, channel) conversation of its `sessionId`; `not_found` when svc-chat
    /// holds no conversation for that session.
    fn request_target(&self, params: &Value) -> Result<(String, String, String), RpcError> {
        let session_id = params
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or("");
        let request_id = params
            .get("requestId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let (binding_id, channel) = self.conversation_of(session_id).ok_or_else(|| {
            RpcError::with_code(
                "not_found",
                "svc-chat holds no conversation for this session",
            )
        })?;
        Ok((request_id, binding_id, channel))
    }

    async fn approval(&self, chat: &Arc<Chat>, params: Value) -> Result<Value, RpcError> {
        let (request_id, binding_id, channel) = self.request_target(&params)?;
        let tool = params
            .get("tool")
            .and_then(Value::as_str)
            .unwrap_or("a tool");
        let args = params.get("args").cloned().unwrap_or(Value::Null);
        let mut text = format!("Approval needed: {tool}\n{}", clip(&args.to_string(), 600));
        if let Some(note) = params.get("note").and_then(Value::as_str) {
            text.push_str(&format!("\n{}", clip(note, 300)));
        }
        let (tx, rx) = oneshot::channel();
        let tx = Arc::new(Mutex::new(Some(tx)));
        let choices = [
            ("Allow once", Choice::Approval("allow", "once")),
            (
                "Allow for this session",
                Choice::Approval("allow", "session"),
            ),
            ("Deny", Choice::Approval("deny", "once")),
        ];
        let buttons = self.register(&request_id, &binding_id, &tx, choices.to_vec());
        chat.send_to(&binding_id, &channel, &text, false, &buttons)
            .await;
        let wait = timeout_of(&params);
        let answer = tokio::time::timeout(wait, rx).await;
        self.drop_request(&request_id);
        match answer {
            Ok(Ok(v)) => Ok(v),
            _ => Err(RpcError::with_code(
                "timeout",
                "no answer from the chat in time",
            )),
        }
    }

    async fn question(&self, chat: &Arc<Chat>, params: Value) -> Result<Value, RpcError> {
        let (request_id, binding_id, channel) = self.request_target(&params)?;
        let questions = params
            .get("questions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let count = questions.len();
        let answers = Arc::new(Mutex::new(vec![None; count]));
        let (tx, rx) = oneshot::channel();
        let tx = Arc::new(Mutex::new(Some(tx)));
        for (index, q) in questions.iter().enumerate() {
            let text = q.get("question").and_then(Value::as_str).unwrap_or("?");
            let options: Vec<String> = q
                .get("options")
                .and_then(Value::as_array)
                .map(|o| {
                    o.iter()
                        .filter_map(|o| o.get("label").and_then(Value::as_str))
                        .map(str::to_owned)
                        .take(8)
                        .collect()
                })
                .unwrap_or_default();
            let choices = options
                .iter()
                .map(|label| {
                    (
                        label.as_str(),
                        Choice::Question {
                            index,
                            count,
                            label: label.clone(),
                            answers: answers.clone(),
                        },
                    )
                })
                .collect::<Vec<_>>();
            let buttons = self.register(&request_id, &binding_id, &tx, choices);
            let shown = if buttons.is_empty() {
                self.texts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(TextWait {
                        request_id: request_id.clone(),
                        binding_id: binding_id.clone(),
                        channel: channel.clone(),
                        index,
                        secret: q.get("secret").and_then(Value::as_bool) == Some(true),
                        answers: answers.clone(),
                        tx: tx.clone(),
                    });
                format!("Question: {}\n(reply with your answer)", clip(text, 1000))
            } else {
                format!("Question: {}", clip(text, 1000))
            };
            chat.send_to(&binding_id, &channel, &shown, false, &buttons)
                .await;
        }
        let answer = tokio::time::timeout(timeout_of(&params), rx).await;
        self.drop_request(&request_id);
        match answer {
            Ok(Ok(v)) => Ok(v),
            _ => Err(RpcError::with_code(
                "timeout",
                "no answer from the chat in time",
            )),
        }
    }

    fn register(
        &self,
        request_id: &str,
        binding_id: &str,
        tx: &Arc<Mutex<Option<oneshot::Sender<Value>>>>,
        choices: Vec<(&str, Choice)>,
    ) -> Vec<Button> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        choices
            .into_iter()
            .map(|(label, choice)| {
                let token = snowpea_common::ids::random_hex(8);
                pending.insert(
                    token.clone(),
                    Pending {
                        request_id: request_id.to_owned(),
                        binding_id: binding_id.to_owned(),
                        choice,
                        tx: tx.clone(),
                    },
                );
                Button {
                    label: label.to_owned(),
                    data: format!("sp:{token}"),
                }
            })
            .collect()
    }

    /// A button press on (binding, channel) by `user`: what to tell the presser.
    pub fn press(&self, binding_id: &str, allowed: Option<&str>, user: &str, data: &str) -> Press {
        let Some(token) = data.strip_prefix("sp:") else {
            return Press::Unknown;
        };
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some(p) = pending.get(token) else {
            return Press::Unknown;
        };
        if p.binding_id != binding_id {
            return Press::Unknown;
        }
        if allowed != Some(user) {
            return Press::Refused;
        }
        let request_id = p.request_id.clone();
        let result = match &p.choice {
            Choice::Approval(decision, scope) => {
                Some(json!({ "decision": decision, "scope": scope }))
            }
            Choice::Question {
                index,
                count,
                label,
                answers,
            } => {
                {
                    let mut a = answers.lock().unwrap_or_else(|e| e.into_inner());
                    if *index < *count {
                        a[*index] = Some(json!({ "selected": [label] }));
                    }
                }
                // `complete` sends the batch; Null only marks it done.
                complete(answers, &p.tx).then_some(Value::Null)
            }
        };
        let label = match &p.choice {
            Choice::Approval("allow", _) => "Allowed",
            Choice::Approval(..) => "Denied",
            Choice::Question { .. } => "Answered",
        };
        if let Some(result) = result {
            if !result.is_null() {
                if let Some(tx) = p.tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    let _ = tx.send(result);
                }
            }
            pending.retain(|_, p| p.request_id != request_id);
            drop(pending);
            self.texts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|t| t.request_id != request_id);
        }
        Press::Accepted(label)
    }
}

/// What a button press did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Press {
    /// It answered (part of) a request.
    Accepted(&'static str),
    /// The presser is not the binding's `userId`.
    Refused,
    /// No such pending request (answered elsewhere, timed out, or not ours).
    Unknown,
}

fn timeout_of(params: &Value) -> Duration {
    let secs = params
        .get("timeoutSec")
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0)
        .unwrap_or(600.0)
        .min(24.0 * 3600.0);
    Duration::from_secs_f64(secs) + GRACE
}

/// At most `n` characters of `s`, with an ellipsis when cut.
pub fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(n).collect();
        out.push('…');
        out
    }
}

struct Worker {
    chat: Weak<Chat>,
    client: Arc<Client>,
    store: Arc<Store>,
    session_id: String,
    binding_id: String,
    channel: String,
    last: u64,
    typing: Option<tokio::task::JoinHandle<()>>,
}

impl Worker {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Work>) {
        while let Some(work) = rx.recv().await {
            match work {
                Work::Event(e) if e.seq <= self.last => {}
                Work::Event(e) if e.seq == self.last + 1 => self.handle(e).await,
                Work::Event(e) => {
                    self.fill().await;
                    if e.seq > self.last {
                        self.handle(e).await;
                    }
                }
                Work::Fill => self.fill().await,
            }
        }
        if let Some(t) = self.typing.take() {
            t.abort();
        }
    }

    async fn fill(&mut self) {
        match tokio::time::timeout(
            crate::daemon::CALL_TIMEOUT,
            self.client.resume(&self.session_id, self.last),
        )
        .await
        {
            Ok(Ok(events)) => {
                for e in events {
                    if e.seq > self.last {
                        self.handle(e).await;
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(session = %self.session_id, error = %e, "session.resume failed")
            }
            Err(_) => tracing::warn!(session = %self.session_id, "session.resume timed out"),
        }
    }

    async fn handle(&mut self, e: SessionEvent) {
        let Some(chat) = self.chat.upgrade() else {
            return;
        };
        let durable = match e.kind.as_str() {
            "turn.started" => {
                self.start_typing(&chat);
                false
            }
            "turn.done" => {
                if let Some(t) = self.typing.take() {
                    t.abort();
                }
                true
            }
            "message.done" => {
                let role = e
                    .payload
                    .get("role")
                    .and_then(Value::as_str)
                    .unwrap_or("assistant");
                let text = e.payload.get("text").and_then(Value::as_str).unwrap_or("");
                if role != "user" && !text.trim().is_empty() {
                    chat.send_markdown(&self.binding_id, &self.channel, text)
                        .await;
                }
                true
            }
            "error" => {
                let msg = e
                    .payload
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                chat.send_to(
                    &self.binding_id,
                    &self.channel,
                    &format!("⚠ {}", clip(msg, 500)),
                    false,
                    &[],
                )
                .await;
                true
            }
            _ => false,
        };
        self.last = e.seq;
        if durable {
            let store = self.store.clone();
            let (sid, seq) = (self.session_id.clone(), e.seq);
            if let Ok(Err(err)) =
                snowpea_common::db::blocking("advance", move || store.advance(&sid, seq)).await
            {
                tracing::error!(error = %format!("{err:#}"), "recording a sent answer failed");
            }
        }
    }

    fn start_typing(&mut self, chat: &Arc<Chat>) {
        if let Some(t) = self.typing.take() {
            t.abort();
        }
        let Some(binding) = chat.binding(&self.binding_id) else {
            return;
        };
        let Some(out) = chat.outbound_of(&binding) else {
            return;
        };
        let channel = self.channel.clone();
        self.typing = Some(tokio::spawn(async move {
            let until = tokio::time::Instant::now() + TYPING_MAX;
            while tokio::time::Instant::now() < until {
                if let Err(e) = out.typing(&channel).await {
                    tracing::debug!(error = %e, "typing indicator failed");
                }
                tokio::time::sleep(TYPING_EVERY).await;
            }
        }));
    }
}

impl Chat {
    /// Sends Markdown to a conversation, converted and split for its platform.
    pub async fn send_markdown(&self, binding_id: &str, channel: &str, markdown: &str) {
        let Some(b) = self.binding(binding_id) else {
            return;
        };
        let Some(platform) = crate::binding::Platform::parse(&b.platform) else {
            return;
        };
        for part in crate::format::render(platform, markdown) {
            self.send_to(binding_id, channel, &part.text, part.html, &[])
                .await;
        }
    }

    /// Sends one message to a conversation (tried [`SEND_ATTEMPTS`] times; a failure is
    /// logged and reported as `gateway.event` `error`), and reports it as `gateway.event`
    /// `message` `{direction: "out"}`.
    pub async fn send_to(
        &self,
        binding_id: &str,
        channel: &str,
        text: &str,
        html: bool,
        buttons: &[Button],
    ) {
        let Some(b) = self.binding(binding_id) else {
            return;
        };
        let Some(out) = self.outbound_of(&b) else {
            return;
        };
        let mut last_err = None;
        for attempt in 0..SEND_ATTEMPTS {
            match out.send(channel, text, html, buttons).await {
                Ok(()) => {
                    self.event(
                        binding_id,
                        "message",
                        json!({ "direction": "out", "channel": channel, "text": clip(text, 2000) }),
                    );
                    return;
                }
                Err(e) => {
                    last_err = Some(e);
                    tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
                }
            }
        }
        let message = format!(
            "sending to {channel} failed: {}",
            last_err.map(|e| e.to_string()).unwrap_or_default()
        );
        tracing::warn!(binding = binding_id, error = %message, "send failed");
        self.event(binding_id, "error", json!({ "message": message }));
    }
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
