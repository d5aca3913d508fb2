//! The turn's side of host tools (issue 21; component `crate::host_tools`): listing the
//! session host's tools when a turn starts (waiting for a scheduled run's host, offering
//! deferred tools by name with `tool_search`), and running one model step's calls in
//! batches ([`crate::host_tools::parallel`]: `parallel: "safe"` host tools and the
//! read-only file tools side by side, everything else alone).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::agent::TurnAccount;
use super::tool_call::Outcome;
use super::{TurnStart, Turns};
use crate::host_tools::deferred::ToolSearch;
use crate::host_tools::parallel::{self, BATCHED_FILE_TOOLS};
use crate::host_tools::Parallel;
use crate::session::Session;
use crate::tools::Tool;
use snowpea_session_llm::provider::{ToolCall, ToolSpec};

/// What a turn knows of its host tools beyond [`TurnAccount::host_tools`].
#[derive(Debug, Default)]
pub(crate) struct HostTurn {
    /// Deferred tools (offered once loaded).
    pub deferred: HashSet<String>,
    /// Loaded by `tool_search` so far.
    loaded: Arc<Mutex<HashSet<String>>>,
    /// Appended to the system prompt (deferred names, a missing host).
    pub prompt: String,
}

impl HostTurn {
    /// Specs of the deferred tools loaded so far.
    pub fn loaded_specs(&self, tools: &crate::clients::mcp::TurnTools) -> Vec<ToolSpec> {
        let loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        tools
            .0
            .iter()
            .filter(|t| self.deferred.contains(t.name()) && loaded.contains(t.name()))
            .map(|t| t.spec())
            .collect()
    }
}

impl Turns {
    /// Fills `acc.host_tools` with the session host's tools (module doc).
    pub(crate) async fn host_turn_tools(
        &self,
        session: &Arc<Session>,
        t: &TurnStart,
        acc: &mut TurnAccount,
    ) -> HostTurn {
        let mut turn = HostTurn::default();
        let Some(hosts) = self.host_tools.as_ref() else {
            return turn;
        };
        if t.system_reason.is_none()
            && !session.is_unattended()
            && session.row().parent_session_id.is_none()
        {
            // The person's own prompt: later turns' tool.invoke name it as `userTurn` (a
            // delegated child's task is the agent's words: its calls report the root's).
            hosts.remember_user_turn(&session.id, &t.turn_id, &t.text);
        }
        if let Some(note) = hosts.wait_for_host(session, &t.cancel).await {
            turn.prompt = format!("\n\n{note}");
        }
        let tools = hosts.turn_tools(session);
        acc.host_parallel = tools
            .iter()
            .filter(|h| h.def.parallel == Parallel::Safe)
            .map(|h| h.def.name.clone())
            .collect();
        let deferred: Vec<_> = tools.iter().filter(|h| h.def.deferred).cloned().collect();
        turn.deferred = deferred.iter().map(|h| h.def.name.clone()).collect();
        acc.host_tools.0 = tools.into_iter().map(|h| h as Arc<dyn Tool>).collect();
        if !deferred.is_empty() {
            let search = ToolSearch::new(deferred, turn.loaded.clone());
            turn.prompt.push_str(&search.prompt_line());
            acc.host_tools.0.push(Arc::new(search));
        }
        turn
    }

    /// The batches of one model step's calls ([`parallel::batches`]).
    pub(crate) fn batches<'a>(
        &self,
        calls: &'a [ToolCall],
        acc: &TurnAccount,
    ) -> Vec<Vec<&'a ToolCall>> {
        let shadowed: HashSet<&str> = acc.host_tools.0.iter().map(|t| t.name()).collect();
        parallel::batches(calls, |name| {
            acc.host_parallel.contains(name)
                || (BATCHED_FILE_TOOLS.contains(&name) && !shadowed.contains(name))
        })
    }

    /// Runs one batch: a single call as is; several side by side, each with its own copy
    /// of the account, whose denials are added back afterwards. Outcomes in call order.
    pub(crate) async fn run_batch(
        &self,
        session: &Arc<Session>,
        t: &TurnStart,
        batch: &[&ToolCall],
        acc: &mut TurnAccount,
    ) -> Vec<Outcome> {
        if let [call] = batch {
            return vec![self.tool_call(session, t, call, acc).await];
        }
        let mut accounts: Vec<TurnAccount> = batch.iter().map(|_| acc.clone()).collect();
        let outcomes = futures::future::join_all(
            batch
                .iter()
                .zip(accounts.iter_mut())
                .map(|(call, a)| self.tool_call(session, t, call, a)),
        )
        .await;
        let base = acc.denials;
        for a in accounts {
            acc.denials += a.denials - base;
            acc.person_denied |= a.person_denied;
            acc.unattended_denied |= a.unattended_denied;
        }
        outcomes
    }
}
