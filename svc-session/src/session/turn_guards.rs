//! Turn guards of `session.setAgent{guardTurn}` (issue 19): while a guarded turn runs, every
//! call that is not read-only is asked (`forceAsk`), for the session and every session
//! delegated from it. The agents component sets a guard, the turn driver ends it when the
//! person's own next turn starts, approvals and tool calls read it. It lives here, below all
//! of them, so each gets it in its constructor (no handle back to the agents component).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::{Registry, Session};

/// A turn guard of one session.
#[derive(Debug, Clone, Default)]
struct Guard {
    /// The turn of the person's prompt that ends the guard when it starts.
    ends_with: Option<String>,
}

/// The guards of the live sessions (module doc).
#[derive(Debug)]
pub struct TurnGuards {
    sessions: Registry,
    guards: Mutex<HashMap<String, Guard>>,
}

impl TurnGuards {
    /// No guards; delegation parents are looked up in `sessions`.
    pub fn new(sessions: Registry) -> Self {
        TurnGuards {
            sessions,
            guards: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Guard>> {
        self.guards.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Guards the running turn of `session_id` (`session.setAgent{guardTurn: true}`).
    pub fn guard(&self, session_id: &str) {
        self.lock().insert(session_id.to_owned(), Guard::default());
    }

    /// True when a guard covers `session`: its own, or one of a session it was delegated
    /// from.
    pub fn is_guarded(&self, session: &Session) -> bool {
        let st = self.lock();
        if st.is_empty() {
            return false;
        }
        if st.contains_key(&session.id) {
            return true;
        }
        drop(st);
        let mut parent = session.row().parent_session_id;
        let mut hops = 0;
        while let Some(p) = parent {
            if self.lock().contains_key(&p) {
                return true;
            }
            hops += 1;
            if hops > 64 {
                break;
            }
            parent = self
                .sessions
                .get(&p)
                .ok()
                .and_then(|s| s.row().parent_session_id);
        }
        false
    }

    /// Hook of `session.prompt`: the person's own prompt `turn_id` will end the guard of
    /// `session` when its turn starts ([`TurnGuards::turn_starting`]).
    pub fn person_prompted(&self, session_id: &str, turn_id: &str) {
        if let Some(g) = self.lock().get_mut(session_id) {
            g.ends_with = Some(turn_id.to_owned());
        }
    }

    /// Hook of the turn driver: turn `turn_id` of `session_id` starts.
    pub fn turn_starting(&self, session_id: &str, turn_id: &str) {
        let mut st = self.lock();
        if st
            .get(session_id)
            .is_some_and(|g| g.ends_with.as_deref() == Some(turn_id))
        {
            st.remove(session_id);
        }
    }
}
