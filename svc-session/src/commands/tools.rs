//! `/tools` (read): the tools a turn of this session offers, as `tool.list` reports them.

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/tools`.
pub struct ToolsCmd;

impl Builtin for ToolsCmd {
    fn name(&self) -> &'static str {
        "tools"
    }
    fn summary(&self) -> &'static str {
        "List the tools of this session with their permission tags"
    }
    fn usage(&self) -> &'static str {
        "/tools"
    }
    fn risk(&self) -> Risk {
        Risk::Read
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let list = cx
                .tools
                .list(pb::ToolListParams {
                    session_id: Some(call.session.id.clone()),
                })
                .await
                .map_err(Failure::from_error)?;
            let mut text = String::new();
            let mut rows = Vec::new();
            for t in &list.tools {
                text.push_str(&format!("  {:<24} {}\n", t.name, t.permission_tag));
                rows.push(
                    json!({"name": t.name, "permission": t.permission_tag, "category": t.category}),
                );
            }
            Ok(Reply::done(
                format!("{} tools:\n{}", rows.len(), text.trim_end()),
                json!({ "tools": rows }),
            ))
        })
    }
}
