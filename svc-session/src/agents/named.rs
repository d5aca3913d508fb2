//! Named agents (issue 19 "Named agents"; upstream-behaviour §4 `agent/named.py`): a
//! definition registered as a persistent instance (`agent.create{named: true}`) owns one
//! unattended session — kind `agent`, origin surface `agent:<name>`, memory namespace
//! `agent:<name>`, workdir the project holding its definition, else `$SNOWPEA_HOME` — kept
//! across restarts with the same session id (it is an open row of the `sessions` table; at
//! start [`Agents::restore_named`] re-opens it under the same id if it was closed).
//!
//! * `agent.bindChannel{name, channel, credentialsRef?}` validates the channel
//!   (`<platform>:<id>`) and a given `credentialsRef` (it must exist as the chat gateway
//!   resolves credentials, [`credential_exists`]; omitted, it defaults to the platform name,
//!   which must then exist the same way; an unknown agent is `not_found`, as for
//!   `agent.spawn` and `agent.delete`) and stores the binding in `agent_bindings`
//!   (replacing an earlier binding of the channel), where the chat gateway reads it
//!   ([`Agents::bindings`]).
//! * `agent.delete{name}` unbinds its channels, cancels its scheduled jobs, closes its session
//!   and deletes the row; an unknown name is `not_found`. svc-chat is told, so
//!   `gateway.bind{target:{agent}}` bindings naming it are removed.
//! * `agent.list`: definitions (kind `definition`), named agents (kind `named`, with
//!   `sessionId`, `namespace`, `channels`, `active`) and running subagents (kind `subagent`,
//!   with `agentId`, `status`, `parentSessionId`, `task`).
//! * Jobs naming an agent run in its session ([`Agents::named_session`], used by
//!   `RunUnattended`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;

use super::definitions::{self, Definition};
use super::Agents;
use crate::session::SessionSetup;
use crate::store::agents::{self as table, BindingRow, NamedAgentRow};
use crate::store::sessions::KIND_AGENT;
use snowpea_session_error::{Error, Result};

/// Platforms a channel may name (the chat gateway's).
pub const PLATFORMS: &[&str] = &["telegram", "discord", "slack"];
/// Longest channel, characters.
pub const MAX_CHANNEL_CHARS: usize = 256;

/// The memory namespace of named agent `name`.
pub fn namespace(name: &str) -> String {
    format!("agent:{name}")
}

/// The named agent a session row belongs to: its `agent` when the session is a named
/// agent's own (kind `agent`).
pub fn named_agent_of(row: &crate::store::sessions::SessionRow) -> Option<String> {
    (row.kind() == KIND_AGENT)
        .then(|| row.agent.clone())
        .flatten()
}

/// The origin surface of named agent `name`'s session.
pub fn surface(name: &str) -> String {
    format!("agent:{name}")
}

/// The workdir of a named agent defined at `path`: the project holding
/// `<project>/.snowpea/agents/<n>.md` or `<project>/.claude/agents/<n>.md`, else `home`.
pub fn workdir_of(path: &Path, home: &Path) -> PathBuf {
    let agents = path.parent();
    let dot = agents.and_then(Path::parent);
    match (agents, dot) {
        (Some(a), Some(d))
            if a.file_name().is_some_and(|n| n == "agents")
                && d.file_name()
                    .is_some_and(|n| n == ".snowpea" || n == ".claude")
                && d.parent().is_some_and(|p| p != home) =>
        {
            d.parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| home.to_path_buf())
        }
        _ => home.to_path_buf(),
    }
}

/// Checks `channel` (`<platform>:<id>`); the error names `params.channel`.
pub fn check_channel(channel: &str) -> Result<(String, String)> {
    let field = "params.channel";
    let c = channel.trim();
    if c.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if c.chars().count() > MAX_CHANNEL_CHARS || c.chars().any(char::is_control) {
        return Err(Error::invalid(
            field,
            format!("must be at most {MAX_CHANNEL_CHARS} printable characters"),
        ));
    }
    let Some((platform, id)) = c.split_once(':') else {
        return Err(Error::invalid(
            field,
            format!("{c:?} is not '<platform>:<id>' (e.g. 'telegram:123')"),
        ));
    };
    if !PLATFORMS.contains(&platform) {
        return Err(Error::invalid(
            field,
            format!(
                "unknown platform {platform:?}; one of {}",
                PLATFORMS.join(", ")
            ),
        ));
    }
    if id.trim().is_empty() || id.chars().any(char::is_whitespace) {
        return Err(Error::invalid(
            field,
            "the channel id after ':' must be non-empty without spaces",
        ));
    }
    Ok((platform.to_owned(), id.to_owned()))
}

/// Whether credential `reference` exists for `platform`, as the chat gateway resolves it
/// (svc-chat `binding.rs`): a top-level key or a `gateway.<ref>` key of
/// `$SNOWPEA_HOME/credentials.json`, an environment variable of that name, or
/// `settings:gateway.<platform>` with a `token` in `settings.gateway.<platform>`. Only
/// existence is checked; the secret is never read into a message.
pub fn credential_exists(
    home: &snowpea_common::home::Home,
    platform: &str,
    reference: &str,
) -> bool {
    use serde_json::Value;
    if let Some(p) = reference.strip_prefix("settings:gateway.") {
        let settings =
            snowpea_common::settings::load_file(&home.settings_path()).unwrap_or(Value::Null);
        return p == platform
            && settings
                .pointer(&format!("/gateway/{p}/token"))
                .and_then(Value::as_str)
                .is_some_and(|t| !t.trim().is_empty());
    }
    let in_file = std::fs::read_to_string(home.root().join("credentials.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|doc| {
            let entry = doc
                .get(reference)
                .or_else(|| doc.get("gateway").and_then(|g| g.get(reference)));
            entry.is_some_and(|e| !e.is_null())
        });
    let env_name = reference.len() <= 128
        && reference
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    in_file || (env_name && std::env::var_os(reference).is_some_and(|v| !v.is_empty()))
}

impl Agents {
    /// Registers `def` as a named agent with its own session (module doc); an existing name
    /// is `invalid_params` on `field`.
    pub async fn register_named(&self, field: &str, def: &Definition) -> Result<NamedAgentRow> {
        let name = def.name.clone();
        let n = name.clone();
        if self
            .store
            .read("agents.named", move |c| table::named(c, &n))
            .await?
            .is_some()
        {
            return Err(Error::invalid(
                field,
                format!("a named agent {name:?} already exists"),
            ));
        }
        let workdir = workdir_of(&def.path, self.home.root());
        let session_id = self.open_named_session(&name, &workdir, None).await?;
        let row = NamedAgentRow {
            name: name.clone(),
            definition_path: Some(def.path.to_string_lossy().into_owned()),
            session_id,
            namespace: namespace(&name),
            workdir: workdir.to_string_lossy().into_owned(),
            description: def.description.clone(),
            created_at: now_iso(),
        };
        let saved = row.clone();
        self.log
            .write(move |c| table::save_named(c, &saved))
            .await?;
        tracing::info!(agent = %name, session_id = %row.session_id, "named agent registered");
        Ok(row)
    }

    /// Opens the unattended session of named agent `name` (with id `keep` when given: a
    /// restore keeps the id).
    async fn open_named_session(
        &self,
        name: &str,
        workdir: &Path,
        keep: Option<&str>,
    ) -> Result<String> {
        if let Some(id) = keep {
            // Re-open the saved row under its id.
            if let Some(mut row) = self.sessions.registry().row(id).await? {
                row.closed_at = None;
                self.sessions.reopen(row).await?;
                return Ok(id.to_owned());
            }
        }
        // The definition's `permission` narrows the session's starting mode.
        let skills = self.skills.clone();
        let (n, wd) = (name.to_owned(), workdir.to_path_buf());
        let definition_mode = snowpea_session_skills::blocking(move || {
            super::definitions::find(&skills, Some(&wd), "params.name", &n)
        })
        .await
        .ok()
        .and_then(|d| d.mode());
        let created = self
            .sessions
            .create_with(
                &CallContext::default(),
                pb::SessionCreateParams {
                    workdir: workdir.to_string_lossy().into_owned(),
                    origin_surface: Some(surface(name)),
                    ..Default::default()
                },
                SessionSetup {
                    kind: KIND_AGENT,
                    agent: Some(name.to_owned()),
                    definition_mode,
                    ..Default::default()
                },
            )
            .await?;
        Ok(created.session_id)
    }

    /// At start: every named agent gets its session back under the same id (it is normally
    /// still open; one closed by hand is re-opened).
    pub(crate) async fn restore_named(&self) -> Result<()> {
        let rows = self.store.read("agents.named", table::all_named).await?;
        for row in rows {
            if self.sessions.get(&row.session_id).is_ok() {
                continue;
            }
            match self
                .open_named_session(&row.name, Path::new(&row.workdir), Some(&row.session_id))
                .await
            {
                Ok(_) => {
                    tracing::info!(agent = %row.name, session_id = %row.session_id, "named agent session restored")
                }
                Err(e) => {
                    tracing::warn!(agent = %row.name, error = %e, "named agent session not restored")
                }
            }
        }
        Ok(())
    }

    /// The named agent `name`, if registered.
    pub async fn named(&self, name: &str) -> Result<Option<NamedAgentRow>> {
        let n = name.to_owned();
        self.store
            .read("agents.named", move |c| table::named(c, &n))
            .await
    }

    /// The live session a job naming agent `agent` runs in; `not_found` when no such named
    /// agent exists.
    pub async fn named_session(&self, agent: &str) -> Result<Arc<crate::session::Session>> {
        let Some(row) = self.named(agent).await? else {
            return Err(Error::NotFound(format!("no named agent {agent:?}")));
        };
        if let Ok(s) = self.sessions.get(&row.session_id) {
            return Ok(s);
        }
        self.restore_named().await?;
        self.sessions.get(&row.session_id)
    }

    /// `agent.bindChannel` (module doc).
    pub async fn bind_channel(
        &self,
        p: pb::AgentBindChannelParams,
    ) -> Result<snowpea_proto::rpc::v1::OkResult> {
        definitions::check_name("params.name", &p.name)?;
        let (platform, _) = check_channel(&p.channel)?;
        // An unknown agent is `not_found`, as for `agent.spawn` and `agent.delete` (the
        // error table: "No such session, request, job, agent or content"; issue 32 item 6).
        if self.named(&p.name).await?.is_none() {
            return Err(Error::NotFound(format!(
                "no named agent {:?} (agent.create with named: true registers one)",
                p.name
            )));
        }
        let credentials_ref = match p.credentials_ref.as_deref().map(str::trim) {
            // The default is the platform's own credential, resolved by svc-chat like any
            // other reference named after the platform (credentials.json or the environment).
            None | Some("") => {
                if !credential_exists(&self.home, &platform, &platform) {
                    return Err(Error::invalid(
                        "params.credentialsRef",
                        format!(
                            "no {platform} credential: without credentialsRef the channel uses \
                             the credential named {platform:?}; add a {platform:?} key (or \
                             gateway.{platform}) to credentials.json or set the environment \
                             variable {platform}, or pass credentialsRef (e.g. \
                             settings:gateway.{platform} for settings.gateway.{platform}.token)"
                        ),
                    ));
                }
                platform
            }
            Some(r) if r.chars().count() <= 128 && !r.chars().any(char::is_control) => {
                if !credential_exists(&self.home, &platform, r) {
                    return Err(Error::invalid(
                        "params.credentialsRef",
                        format!(
                            "no credential {r:?}: add it to credentials.json (a key {r:?} or \
                             gateway.{r}), set the environment variable {r}, or use \
                             settings:gateway.{platform} with settings.gateway.{platform}.token"
                        ),
                    ));
                }
                r.to_owned()
            }
            Some(_) => {
                return Err(Error::invalid(
                    "params.credentialsRef",
                    "must be at most 128 printable characters",
                ))
            }
        };
        let row = BindingRow {
            channel: p.channel.trim().to_owned(),
            name: p.name.clone(),
            credentials_ref,
            created_at: now_iso(),
        };
        self.log
            .write(move |c| table::save_binding(c, &row))
            .await?;
        tracing::info!(agent = %p.name, channel = %p.channel.trim(), "channel bound to named agent");
        Ok(snowpea_proto::rpc::v1::OkResult { ok: true })
    }

    /// Every channel binding (for the chat gateway, which routes them).
    pub async fn bindings(&self) -> Result<Vec<BindingRow>> {
        self.store
            .read("agents.bindings", table::all_bindings)
            .await
    }

    /// `agent.delete` (module doc).
    pub async fn delete(
        &self,
        p: pb::AgentDeleteParams,
    ) -> Result<snowpea_proto::rpc::v1::OkResult> {
        definitions::check_name("params.name", &p.name)?;
        let Some(row) = self.named(&p.name).await? else {
            return Err(Error::NotFound(format!("no named agent {:?}", p.name)));
        };
        let cancelled = crate::clients::scheduler::cancel_agent_jobs(&self.home, &p.name).await;
        if let Err(e) = &cancelled {
            tracing::warn!(agent = %p.name, error = %e, "could not cancel the agent's jobs");
        }
        if let Err(e) = self.sessions.close(&row.session_id).await {
            tracing::warn!(agent = %p.name, error = %e, "could not close the agent's session");
        }
        let name = p.name.clone();
        self.log
            .write(move |c| table::delete_named(c, &name))
            .await?;
        crate::clients::chat::target_removed(
            &self.home,
            crate::clients::chat::Removed::Agent(p.name.clone()),
        );
        tracing::info!(agent = %p.name, "named agent deleted");
        Ok(snowpea_proto::rpc::v1::OkResult { ok: true })
    }

    /// `agent.list` (module doc). Definitions are those of the global roots and of the open
    /// sessions' workdirs.
    pub async fn list(&self) -> Result<pb::AgentListResult> {
        let mut workdirs: Vec<PathBuf> = Vec::new();
        for s in self.sessions.registry().all() {
            let w = s.workdir();
            if !workdirs.contains(&w) && workdirs.len() < 64 {
                workdirs.push(w);
            }
        }
        let skills = self.skills.clone();
        let defs = snowpea_session_skills::blocking(move || {
            let mut seen = std::collections::BTreeMap::new();
            for d in definitions::all(&skills, None).into_iter().flatten() {
                seen.insert((d.name.clone(), d.path.clone()), d);
            }
            for w in &workdirs {
                for d in definitions::all(&skills, Some(w)).into_iter().flatten() {
                    seen.insert((d.name.clone(), d.path.clone()), d);
                }
            }
            Ok(seen.into_values().collect::<Vec<_>>())
        })
        .await?;
        let mut agents: Vec<pb::AgentRow> = defs
            .into_iter()
            .map(|d| pb::AgentRow {
                kind: "definition".into(),
                name: d.name,
                description: d.description,
                path: Some(d.path.to_string_lossy().into_owned()),
                source: d.source,
                ..Default::default()
            })
            .collect();
        let named = self.store.read("agents.named", table::all_named).await?;
        let bindings = self.bindings().await?;
        for n in named {
            let channels: Vec<String> = bindings
                .iter()
                .filter(|b| b.name == n.name)
                .map(|b| b.channel.clone())
                .collect();
            let live = self.sessions.get(&n.session_id).ok();
            let status = live.as_ref().map(|s| crate::session::status(s).to_owned());
            agents.push(pb::AgentRow {
                kind: "named".into(),
                active: Some(live.is_some()),
                channel: channels.first().cloned(),
                bindings: channels.clone(),
                channels,
                description: n.description,
                name: n.name,
                namespace: Some(n.namespace),
                path: n.definition_path,
                session_id: Some(n.session_id),
                source: "named".into(),
                status,
                ..Default::default()
            });
        }
        for r in self.running() {
            agents.push(pb::AgentRow {
                kind: "subagent".into(),
                agent_id: Some(r.agent_id.clone()),
                active: Some(true),
                name: if r.name.is_empty() {
                    "subagent".into()
                } else {
                    r.name.clone()
                },
                description: r.title.clone(),
                parent_session_id: Some(r.parent_session_id.clone()),
                session_id: r.session_id(),
                status: Some(r.status()),
                task: Some(r.task.clone()),
                source: "spawn".into(),
                ..Default::default()
            });
        }
        Ok(pb::AgentListResult { agents })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_checked_and_named_in_errors() {
        assert!(check_channel("telegram:123").is_ok());
        for bad in ["", "telegram", "fax:1", "slack:", "slack:a b"] {
            let e = check_channel(bad).unwrap_err();
            assert!(e.to_string().starts_with("params.channel"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_project_definition_runs_in_its_project() {
        let home = Path::new("/h");
        assert_eq!(
            workdir_of(Path::new("/p/.snowpea/agents/a.md"), home),
            PathBuf::from("/p")
        );
        assert_eq!(
            workdir_of(Path::new("/h/agents/a.md"), home),
            PathBuf::from("/h")
        );
    }
}
