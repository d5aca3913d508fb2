//! The `Compaction` component (spec `session.compact`, `compaction.started`, `compaction`,
//! `context`; issue 16 "Compaction and context"): replaces all but the last messages of a
//! session's history with a summary written by the session's own provider.
//!
//! * The tail kept verbatim is the last `context.keepLastMessages` (default 4) messages and
//!   never starts on a tool result ([`split::split_point`]).
//! * The summary is asked of the provider and model the session uses (at most 2,048 output
//!   tokens, within [`SUMMARY_TIMEOUT`]), with the caller's `instructions`; when that fails
//!   or is interrupted, [`split::fallback_summary`] is used, so the history is reduced anyway.
//! * The history becomes one user message `Session summary\n\n…` plus the tail; the summary
//!   rides in the `compaction` event's wire-only `summary` so later turns rebuild it
//!   ([`crate::turn::history`]).
//! * Events, in order: `compaction.started{before, reason}` → `compaction{before, after,
//!   summaryChars, kept, auto}` → `context{used, window, percent, estimated, model,
//!   provider}`. With nothing old enough to summarise it changes nothing (`before == after`).
//! * Manual compaction (`session.compact`) holds the session's turn slot
//!   ([`crate::turn::Turns::compact`]); auto-compaction runs inside a turn at the start of a
//!   model call when the estimate crosses `context.autoCompactPercent` (default 85; off when
//!   ≤ 0 or ≥ 100) of a known window.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use snowpea_proto::session::v1 as pb;
use tokio_util::sync::CancellationToken;

use crate::events::EventLog;
use crate::models::Models;
use crate::session::{Session, Sessions};
use snowpea_session_llm::provider::{ChatMessage, ModelRequest, StreamEvent};

pub mod split;

/// Setting: messages kept verbatim.
pub const KEEP_SETTING: &str = "context.keepLastMessages";
/// Messages kept verbatim when the setting is absent.
pub const DEFAULT_KEEP: usize = 4;
/// Setting: the auto-compaction threshold in percent of the window.
pub const AUTO_SETTING: &str = "context.autoCompactPercent";
/// The threshold when the setting is absent.
pub const DEFAULT_AUTO_PERCENT: f64 = 85.0;
/// First line of the message that replaces the summarised history.
pub const SUMMARY_HEADER: &str = "Session summary";
/// Longest wait for the provider's summary.
pub const SUMMARY_TIMEOUT: Duration = Duration::from_secs(120);
/// Output cap of the summary call.
pub const SUMMARY_MAX_TOKENS: u32 = 2048;
/// Most transcript characters sent to the summariser (the newest are kept).
pub const TRANSCRIPT_MAX_CHARS: usize = 400_000;

const SUMMARISER: &str = "You are compacting the conversation of a coding agent with its user so \
the agent can continue with less context. Write concise notes that keep: what the user asked for \
and still wants, decisions and their reasons, files and code that were read or changed, results of \
tool calls that still matter, errors met, and open tasks with the next step. Do not invent \
anything. Answer with the notes only.";

/// The auto-compaction threshold of `settings` in percent; `None` when off.
pub fn auto_threshold(settings: &Value) -> Option<f64> {
    let p = snowpea_common::settings::get(settings, AUTO_SETTING)
        .and_then(Value::as_f64)
        .unwrap_or(DEFAULT_AUTO_PERCENT);
    (p > 0.0 && p < 100.0).then_some(p)
}

/// Messages kept verbatim per `settings`.
pub fn keep_of(settings: &Value) -> usize {
    snowpea_common::settings::get(settings, KEEP_SETTING)
        .and_then(Value::as_u64)
        .map(|n| n as usize)
        .unwrap_or(DEFAULT_KEEP)
}

/// True when `messages` hold something old enough to summarise.
pub fn has_older(settings: &Value, messages: &[ChatMessage]) -> bool {
    split::split_point(messages, keep_of(settings)) > 0
}

/// The user message holding a summary.
pub fn summary_message(summary: &str) -> ChatMessage {
    ChatMessage::user(format!("{SUMMARY_HEADER}\n\n{summary}"))
}

/// What a compaction did.
#[derive(Debug, Clone)]
pub struct Compacted {
    /// Estimated tokens before.
    pub before: u64,
    /// Estimated tokens after.
    pub after: u64,
    /// Length of the summary in characters (0 when nothing was summarised).
    pub summary_chars: usize,
    /// The history now: the summary message plus the kept tail.
    pub messages: Vec<ChatMessage>,
}

/// Where the compaction happens and what it may use.
#[derive(Debug, Clone)]
pub struct CompactionCall<'a> {
    /// The turn it runs in (auto), for the events' `turnId`.
    pub turn_id: Option<&'a str>,
    /// Extra guidance for the summary.
    pub instructions: Option<&'a str>,
    /// True when the threshold triggered it.
    pub auto: bool,
    /// Cancels the summary call (the fallback is used).
    pub cancel: &'a CancellationToken,
}

/// The compaction component (module doc).
pub struct Compaction {
    log: EventLog,
    sessions: Arc<Sessions>,
    models: Arc<Models>,
}

impl std::fmt::Debug for Compaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compaction").finish_non_exhaustive()
    }
}

/// Estimated tokens of a history for `model` (see [`snowpea_session_llm::tokens`]), counted on the
/// blocking pool.
async fn estimate(messages: &[ChatMessage], model: &str) -> u64 {
    snowpea_session_llm::tokens::estimate_blocking(
        messages.to_vec(),
        String::new(),
        model.to_owned(),
    )
    .await
}

impl Compaction {
    /// The component, summarising with the providers [`Models`] chooses.
    pub fn new(log: EventLog, sessions: Arc<Sessions>, models: Arc<Models>) -> Self {
        Compaction {
            log,
            sessions,
            models,
        }
    }

    /// Compacts `messages`, the history of `session` (module doc), emitting the events.
    pub async fn run(
        &self,
        session: &Session,
        messages: Vec<ChatMessage>,
        call: CompactionCall<'_>,
    ) -> Compacted {
        let turn_id = call.turn_id.unwrap_or_default().to_owned();
        let counted_for = session.row().model_in_use.unwrap_or_default();
        let before = estimate(&messages, &counted_for).await;
        self.log.event_to(
            session,
            &pb::CompactionStartedEvent {
                before: before as i64,
                reason: if call.auto { "auto" } else { "manual" }.into(),
                ..Default::default()
            },
        );
        let workdir = session.workdir();
        let docs = self.models.settings(&workdir).unwrap_or_default();
        let at = split::split_point(&messages, keep_of(&docs.effective));
        let (out, summary) = if at == 0 {
            (messages, None)
        } else {
            let old = &messages[..at];
            let summary = self.summarise(session, &docs, old, &call).await;
            let mut out = vec![summary_message(&summary)];
            out.extend_from_slice(&messages[at..]);
            (out, Some(summary))
        };
        let after = estimate(&out, &counted_for).await;
        let summary_chars = summary.as_ref().map_or(0, |s| s.chars().count());
        let kept = if summary.is_some() {
            out.len() - 1
        } else {
            out.len()
        };
        self.log.event_to(
            session,
            &pb::CompactionEvent {
                before: before as i64,
                after: after as i64,
                summary_chars: summary_chars as i64,
                kept: kept as i64,
                auto: call.auto,
                summary,
                ..Default::default()
            },
        );
        let row = session.row();
        let in_effect = self.models.in_effect(&docs, &row).ok();
        let (vendor, model) = match &in_effect {
            Some(e) => (Some(e.vendor.clone()), Some(e.model.clone())),
            None => (row.provider_in_use.clone(), row.model_in_use.clone()),
        };
        let window = match (&vendor, &model) {
            (Some(v), Some(m)) => crate::turn::agent::context_window(&docs.effective, v, m),
            _ => None,
        };
        self.log.event_to(
            session,
            &pb::ContextEvent {
                turn_id,
                used: after as i64,
                window: window.map(|w| w as i64),
                percent: crate::turn::agent::percent(after, window),
                estimated: true,
                model,
                provider: vendor,
                ..Default::default()
            },
        );
        session.update(|r| {
            r.context_used = after as i64;
            r.context_window = window.map(|w| w as i64);
        });
        self.sessions.save(session);
        tracing::info!(session_id = %session.id, before, after, kept, auto = call.auto, "history compacted");
        Compacted {
            before,
            after,
            summary_chars,
            messages: out,
        }
    }

    /// The provider's summary of `old`, or the fallback.
    async fn summarise(
        &self,
        session: &Session,
        docs: &crate::models::SettingsDocs,
        old: &[ChatMessage],
        call: &CompactionCall<'_>,
    ) -> String {
        let row = session.row();
        let chosen = match self.models.in_effect(docs, &row) {
            Ok(c) => c,
            Err((_, message)) => {
                tracing::warn!(session_id = %session.id, "compaction without a provider: {message}");
                return split::fallback_summary(old);
            }
        };
        let mut transcript: String = old
            .iter()
            .map(split::transcript_line)
            .collect::<Vec<_>>()
            .join("\n");
        if transcript.len() > TRANSCRIPT_MAX_CHARS {
            let cut = transcript.len() - TRANSCRIPT_MAX_CHARS;
            let start = (cut..transcript.len())
                .find(|i| transcript.is_char_boundary(*i))
                .unwrap_or(transcript.len());
            transcript = transcript[start..].to_owned();
        }
        let mut system = SUMMARISER.to_owned();
        if let Some(i) = call.instructions.map(str::trim).filter(|i| !i.is_empty()) {
            system.push_str(&format!("\nThe user asks the summary to: {i}"));
        }
        let request = ModelRequest {
            model: chosen.model.clone(),
            system,
            messages: vec![ChatMessage::user(format!(
                "Conversation to summarise:\n\n{transcript}"
            ))],
            tools: vec![],
            max_tokens: Some(SUMMARY_MAX_TOKENS),
            effort: None,
        };
        let mut stream = chosen.provider.stream(request);
        let collect = async {
            let mut text = String::new();
            while let Some(item) = stream.next().await {
                match item {
                    Ok(StreamEvent::TextDelta(d)) => text.push_str(&d),
                    Ok(_) => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
            Ok(text)
        };
        let result = tokio::select! {
            _ = call.cancel.cancelled() => Err("interrupted".to_owned()),
            r = tokio::time::timeout(SUMMARY_TIMEOUT, collect) => r.unwrap_or_else(|_| Err("timed out".to_owned())),
        };
        match result {
            Ok(text) if !text.trim().is_empty() => text.trim().to_owned(),
            Ok(_) => {
                tracing::warn!(session_id = %session.id, "empty summary; using the fallback");
                split::fallback_summary(old)
            }
            Err(e) => {
                tracing::warn!(session_id = %session.id, "summary failed ({e}); using the fallback");
                split::fallback_summary(old)
            }
        }
    }
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
