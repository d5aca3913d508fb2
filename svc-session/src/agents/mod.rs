//! The [`Agents`] component (issue 19 part A): agent definitions, `session.setAgent`,
//! subagents (`agent.spawn`, the model's `delegate_task` tool, `subagent.*` events), named
//! agents with their own sessions (`agent.create{named}`, `agent.delete`,
//! `agent.bindChannel`) and `agent.list`. `rpc/agent.rs` only delegates here.
//!
//! * [`definitions`] — the Markdown definitions, read with the skills loader's roots;
//! * [`set_agent`] — `session.setAgent{agent, guardTurn}` and what a turn of a session running
//!   as a definition gets ([`TurnProfile`]: persona, tool allowlist, model, round budget);
//! * [`spawn`] — the child-session runner ([`Agents::spawn_child`], reusable by teams) and
//!   `agent.spawn`;
//! * [`concurrency`] — the per-parent limit and its FIFO queue;
//! * [`guards`] — `duplicate_task`, `file_owned_by_sibling`, the delegation depth;
//! * [`delegate`] — the `delegate_task` tool;
//! * [`named`] — named agents, their sessions and channel bindings; `agent.list`;
//! * [`create`] — `agent.create` (one model call writes a definition);
//! * [`channels`] — `ChannelInternalService.ResolveChannel` for svc-chat (a channel bound
//!   with `agent.bindChannel` talks to the agent's own session).
//!
//! Tables (migration 7): `subagents`, `named_agents`, `agent_bindings`
//! ([`crate::store::agents`]); `sessions.parent_session_id`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;
use tokio::sync::Semaphore;

use crate::events::EventLog;
use crate::models::Models;
use crate::session::turn_guards::TurnGuards;
use crate::session::{Session, Sessions};
use crate::store::Store;
use crate::turn::Turns;
use snowpea_session_llm::provider::Providers;
use snowpea_session_skills::Skills;

pub mod channels;
pub mod concurrency;
pub mod create;
pub mod definitions;
pub mod delegate;
pub mod guards;
pub mod named;
pub mod set_agent;
pub mod spawn;

pub use set_agent::TurnProfile;
pub use spawn::{ChildHandle, ChildResult, ChildSpec};

/// Bookkeeping of the live delegations, guards and turn guards.
#[derive(Default)]
struct State {
    /// Every delegation of this process by agent id (finished ones too: the duplicate guard
    /// and `agent.list` read them).
    runs: HashMap<String, Arc<spawn::ChildRun>>,
    /// Child session id → agent id.
    by_child: HashMap<String, String>,
    /// Per-parent concurrency slots.
    slots: HashMap<String, Arc<Semaphore>>,
    /// (parent session, file) → agent id of the child that wrote it first.
    owners: HashMap<(String, PathBuf), String>,
}

/// The agents component (module doc).
pub struct Agents {
    home: Home,
    store: Store,
    log: EventLog,
    sessions: Arc<Sessions>,
    turns: Arc<Turns>,
    skills: Arc<Skills>,
    models: Arc<Models>,
    providers: Providers,
    /// The `session.setAgent{guardTurn}` guards (shared with approvals).
    guards: Arc<TurnGuards>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agents").finish_non_exhaustive()
    }
}

impl Agents {
    /// The component over its peers; [`Turns`] gets a handle back for the hooks of a turn
    /// (profile, delegation tool, child progress, write guard, interrupt cascade).
    #[allow(clippy::too_many_arguments)] // one per peer, built once in App::open
    pub fn new(
        home: Home,
        store: Store,
        log: EventLog,
        sessions: Arc<Sessions>,
        turns: Arc<Turns>,
        skills: Arc<Skills>,
        models: Arc<Models>,
        providers: Providers,
        guards: Arc<TurnGuards>,
    ) -> Arc<Self> {
        let agents = Arc::new(Agents {
            home,
            store,
            log,
            sessions,
            turns: turns.clone(),
            skills,
            models,
            providers,
            guards,
            state: Mutex::new(State::default()),
        });
        turns.attach_agents(&agents);
        // Closing a parent ends its children, like interrupting it.
        let weak = Arc::downgrade(&agents);
        agents.sessions.on_close(Box::new(move |id| {
            if let Some(a) = weak.upgrade() {
                a.interrupt_children(id);
            }
        }));
        agents
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The effective settings of `session`'s workdir (`{}` when unreadable).
    fn settings_of(&self, workdir: &std::path::Path) -> serde_json::Value {
        snowpea_common::settings::load_effective(&self.home, Some(workdir))
            .unwrap_or_else(|_| serde_json::json!({}))
    }

    /// Queues a typed event on `session`.
    fn event<E: snowpea_proto::typed::SessionEventPayload>(&self, session: &Session, e: &E) {
        self.log.event_to(session, e);
    }

    /// Start-up repair, after the sessions were recovered: delegations a killed svc-session
    /// left `queued`/`running` end `error` with the reason in `subagent.done` on their
    /// parent, and their child sessions are closed; named agents get their session back
    /// (same id) when it was lost.
    pub async fn restore(self: &Arc<Self>) -> snowpea_session_error::Result<()> {
        let cut = self
            .store
            .read("agents.restore", crate::store::agents::unfinished_subagents)
            .await?;
        for mut row in cut {
            let why = "svc-session restarted while the subagent ran; its work stopped there";
            if let Ok(parent) = self.sessions.get(&row.parent_session_id) {
                self.event(
                    &parent,
                    &pb::SubagentDoneEvent {
                        agent_id: row.agent_id.clone(),
                        name: row.name.clone(),
                        ok: false,
                        reason: "error".into(),
                        result: why.into(),
                        summary: why.into(),
                        session_id: row.session_id.clone(),
                        status: "error".into(),
                        title: row.title.clone(),
                        usage: Some(pb::TokenUsage::default()),
                        ..Default::default()
                    },
                );
            }
            if let Some(child) = &row.session_id {
                if let Err(e) = self.sessions.close(child).await {
                    tracing::warn!(session_id = %child, error = %e, "could not close a cut-short subagent session");
                }
            }
            row.status = "error".into();
            row.ended_at = Some(snowpea_common::time::now_iso());
            row.result = Some(why.into());
            self.log
                .write(move |c| crate::store::agents::save_subagent(c, &row))
                .await?;
        }
        self.restore_named().await?;
        self.log.flush().await?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "agents_tests.rs"]
mod tests;
