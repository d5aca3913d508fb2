//! The team rows of `agent.list` (spec `agent.list` row kind `team`): one row per team
//! running now — `name` = the team id, `description`/`task` = its task, `sessionId` = the
//! lead's session, `status` = its state, `stages` = task id → task status, `agents` = the
//! sessions of its tasks' subagents so far, `hasGuide` = a `default` team guide exists
//! for its project (or globally).

use snowpea_proto::session::v1 as pb;

use super::{guides, table, Teams};
use snowpea_session_error::Result;

impl Teams {
    /// The rows `agent.list` shows for the running teams (module doc).
    pub async fn agent_rows(&self) -> Result<Vec<pb::AgentRow>> {
        self.log.flush().await?;
        let teams = self
            .store
            .read("agent.list teams", |c| {
                let mut out = Vec::new();
                for t in table::running(c)? {
                    let tasks = table::tasks(c, &t.id)?;
                    out.push((t, tasks));
                }
                Ok(out)
            })
            .await?;
        let home = self.home.root().to_path_buf();
        Ok(teams
            .into_iter()
            .map(|(t, tasks)| {
                let has_guide = guides::project_file(std::path::Path::new(&t.workdir), "default")
                    .exists()
                    || guides::global_file(&home, "default").exists();
                pb::AgentRow {
                    kind: "team".into(),
                    name: t.id.clone(),
                    active: Some(self.live().contains_key(&t.id)),
                    description: t.task.clone(),
                    task: Some(t.task.clone()),
                    session_id: Some(t.session_id.clone()),
                    status: Some(t.state.clone()),
                    source: "team".into(),
                    has_guide: Some(has_guide),
                    agents: tasks
                        .iter()
                        .filter_map(|k| k.child_session_id.clone())
                        .collect(),
                    stages: tasks
                        .iter()
                        .map(|k| (k.task_id.clone(), k.status.clone()))
                        .collect(),
                    ..Default::default()
                }
            })
            .collect())
    }
}
