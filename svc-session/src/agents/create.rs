//! `agent.create{description, name?, named?}` (upstream-behaviour §4 "agent.create"): one
//! model call in the caller's session (the caller connection's latest origin session, else the
//! only open chat session; otherwise `invalid_params`) turns the description into a definition
//! — JSON `{name, description, model, tools, max_turns, prompt}` — which is validated like a
//! file on disk ([`super::definitions::from_parts`]) and written to
//! `<workdir>/.snowpea/agents/<name>.md` (0600 in a 0700 folder). `name` renames it; an
//! existing definition of that name is `invalid_params` (nothing is overwritten). `named`
//! also registers a named agent ([`super::named`]). Answers `{name, path}`; the call's tokens
//! are a `usage` event of the session.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;

use super::definitions::{self, Definition};
use super::Agents;
use crate::session::Session;
use snowpea_session_error::{Error, Result};
use snowpea_session_llm::provider::{ChatMessage, ModelRequest};

/// Longest `description`, characters.
pub const MAX_DESCRIPTION_CHARS: usize = 8_000;
/// Longest the drafting call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);

const SYSTEM: &str = "You write agent definitions for a coding assistant. Answer with one JSON \
object only, no prose: {\"name\": slug (lower-case letters, digits, '-'), \"description\": one \
line, \"model\": \"inherit\", \"tools\": \"*\" or a list of tool names (read_file, write_file, \
edit_file, list_dir, glob, grep, shell, delegate_task), \"max_turns\": number or null, \
\"prompt\": the agent's full instructions in Markdown}.";

impl Agents {
    /// The caller's session (module doc).
    fn callers_session(&self, ctx: &CallContext) -> Result<Arc<Session>> {
        let all = self.sessions.registry().all();
        if let Some(conn) = ctx.connection_id.as_deref() {
            if let Some(s) = all
                .iter()
                .filter(|s| s.origin().as_deref() == Some(conn))
                .max_by(|a, b| a.row().created_at.cmp(&b.row().created_at))
            {
                return Ok(s.clone());
            }
        }
        let chats: Vec<_> = all
            .into_iter()
            .filter(|s| s.row().kind() == crate::store::sessions::KIND_CHAT)
            .collect();
        match chats.as_slice() {
            [only] => Ok(only.clone()),
            _ => Err(Error::invalid(
                "params.description",
                "agent.create runs one model call in the caller's session: create or attach a \
                 session on this connection first",
            )),
        }
    }

    /// `agent.create` (module doc).
    pub async fn create(
        &self,
        ctx: &CallContext,
        p: pb::AgentCreateParams,
    ) -> Result<pb::AgentCreateResult> {
        let description = p.description.trim().to_owned();
        if description.is_empty() {
            return Err(Error::invalid("params.description", "must not be empty"));
        }
        if description.chars().count() > MAX_DESCRIPTION_CHARS {
            return Err(Error::invalid(
                "params.description",
                format!("must be at most {MAX_DESCRIPTION_CHARS} characters"),
            ));
        }
        let wanted = p
            .name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
        if let Some(n) = &wanted {
            definitions::check_name("params.name", n)?;
        }
        let session = self.callers_session(ctx)?;
        let workdir = session.workdir();
        let answer = self.draft(&session, &description).await?;
        let draft = crate::llm::prompt::parse_json(&answer)
            .filter(Value::is_object)
            .ok_or_else(|| Error::InvalidOutput {
                message: "the model did not answer with a JSON agent definition".into(),
                details: json!({"text": answer.chars().take(2000).collect::<String>()}),
            })?;
        let name = match wanted {
            Some(n) => n,
            None => draft["name"]
                .as_str()
                .and_then(definitions::slugify)
                .ok_or_else(|| Error::InvalidOutput {
                    message: "the drafted definition has no usable name; pass params.name".into(),
                    details: json!({"draft": draft}),
                })?,
        };
        let path = workdir
            .join(".snowpea")
            .join("agents")
            .join(format!("{name}.md"));
        let mut meta = draft.as_object().cloned().unwrap_or_default();
        meta.remove("prompt");
        meta.insert("name".into(), Value::String(name.clone()));
        let body = draft["prompt"].as_str().unwrap_or_default().to_owned();
        if body.trim().is_empty() {
            return Err(Error::InvalidOutput {
                message: "the drafted definition has an empty prompt".into(),
                details: json!({"draft": draft}),
            });
        }
        let def = definitions::from_parts(&name, &meta, &body, path.clone(), "project".into())
            .map_err(|why| Error::InvalidOutput {
                message: format!("the drafted definition is invalid: {why}"),
                details: json!({"draft": draft}),
            })?;
        if p.named && self.named(&name).await?.is_some() {
            return Err(Error::invalid(
                "params.name",
                format!("a named agent {name:?} already exists"),
            ));
        }
        write_new(&def).await?;
        if p.named {
            if let Err(e) = self.register_named("params.name", &def).await {
                let _ = std::fs::remove_file(&def.path);
                return Err(e);
            }
        }
        tracing::info!(agent = %name, path = %path.display(), named = p.named, "agent defined");
        Ok(pb::AgentCreateResult {
            name,
            path: Some(path.to_string_lossy().into_owned()),
        })
    }

    /// One tool-less model call of `session` drafting a definition; a `usage` event records
    /// its tokens.
    async fn draft(&self, session: &Session, description: &str) -> Result<String> {
        let docs = self
            .models
            .settings(&session.workdir())
            .map_err(|e| Error::Unavailable(format!("cannot read settings: {e:#}")))?;
        let chosen = self
            .models
            .in_effect(&docs, &session.row())
            .map_err(|(_, message)| Error::Unavailable(message))?;
        let request = ModelRequest {
            model: chosen.model.clone(),
            system: SYSTEM.into(),
            messages: vec![ChatMessage::user(format!(
                "Define an agent for this description:\n\n{description}"
            ))],
            tools: vec![],
            max_tokens: Some(4096),
            effort: None,
        };
        let answered = tokio::time::timeout(
            CALL_TIMEOUT,
            crate::llm::collect(chosen.provider.stream(request)),
        )
        .await;
        let (text, usage) = match answered {
            Err(_) => {
                return Err(Error::Unavailable(format!(
                    "{}: no answer within {}s",
                    chosen.vendor,
                    CALL_TIMEOUT.as_secs()
                )))
            }
            Ok(Err(e)) => return Err(Error::Unavailable(e.to_string())),
            Ok(Ok(r)) => r,
        };
        let (input, output) = usage
            .map(|u| (u.input_tokens, u.output_tokens))
            .unwrap_or((0, (text.len() as u64).div_ceil(4)));
        self.event(
            session,
            &pb::UsageEvent {
                input_tokens: input as i64,
                output_tokens: output as i64,
                model: Some(chosen.model.clone()),
                provider: Some(chosen.vendor.clone()),
                ..Default::default()
            },
        );
        Ok(text)
    }
}

/// Writes a new definition file (owner-only); an existing one is `invalid_params`.
async fn write_new(def: &Definition) -> Result<()> {
    let path: PathBuf = def.path.clone();
    let text = definitions::render(def);
    let name = def.name.clone();
    snowpea_common::db::blocking("agent.create.write", move || {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| Error::Internal(anyhow::anyhow!("create {}: {e}", dir.display())))?;
        }
        let mut f = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::invalid(
                    "params.name",
                    format!(
                        "an agent definition {name:?} already exists at {}",
                        path.display()
                    ),
                ))
            }
            Err(e) => {
                return Err(Error::Internal(anyhow::anyhow!(
                    "write {}: {e}",
                    path.display()
                )))
            }
        };
        f.write_all(text.as_bytes())
            .map_err(|e| Error::Internal(anyhow::anyhow!("write {}: {e}", path.display())))
    })
    .await?
}
