//! Issue 24 §4: the permission tag a tool is listed with (`tool.list`), the one its plan
//! carries into approvals, and the one the mode matrix checks come from one declaration
//! ([`Tool::permission`]) — walked over every built-in tool and every MCP tool. Host tools
//! are not supported yet (module doc), so none is listed and none can disagree.

use std::path::Path;

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::clients::mcp::fake::{self, FakeMcp, Script};
use crate::permissions::{decide, matrix, risk, Mode, Verdict};
use crate::testkit::Harness;
use crate::tools::Permission;

/// Valid arguments for each built-in tool, so its plan can be made; a built-in missing
/// here fails the walk (add it when adding a tool).
fn sample_args(name: &str) -> Option<Value> {
    Some(match name {
        "read_file" | "list_dir" => json!({"path": "."}),
        "write_file" => json!({"path": "a.txt", "content": "x"}),
        "edit_file" => json!({"path": "a.txt", "old": "x", "new": "y"}),
        "glob" => json!({"pattern": "*.rs"}),
        "grep" => json!({"pattern": "fn"}),
        "shell" => json!({"command": "true"}),
        n if n.starts_with("lsp_") => {
            json!({"path": "a.py", "line": 1, "character": 1, "newName": "b", "query": "x"})
        }
        "ask_user" => json!({"question": "Which database?", "choices": ["sqlite", "postgres"]}),
        "save_memory" => json!({"text": "a fact"}),
        "search_memory" => json!({"query": "fact"}),
        "schedule_create" => json!({"spec": "every 30 minutes", "task": "check"}),
        "schedule_list" => json!({}),
        "schedule_cancel" => json!({"jobId": "j_1"}),
        "web_search" => json!({"query": "rust"}),
        n if n.starts_with("mcp__") => json!({"x": 1}),
        _ => return None,
    })
}

fn tag(s: &str) -> Permission {
    [
        Permission::Read,
        Permission::Write,
        Permission::Exec,
        Permission::Network,
        Permission::Send,
        Permission::Config,
        Permission::Delegate,
        Permission::Secret,
    ]
    .into_iter()
    .find(|p| p.as_str() == s)
    .unwrap_or_else(|| panic!("`{s}` is not a permission tag of the protocol"))
}

#[tokio::test]
async fn every_tool_is_listed_planned_and_checked_with_its_one_permission_tag() {
    let h = Harness::with_settings(
        json!({"steps": []}),
        json!({"mcp": {"permissions": {"x": "exec", "y": "write"}}}),
    )
    .await;
    let _mcp = FakeMcp::serve(
        &h.home.socket("mcp"),
        Script {
            tools: vec![
                fake::tool("x", "run", "exec"),
                fake::tool("y", "put", "write"),
                fake::tool("z", "get", ""),
            ],
            servers: vec![
                fake::server("x", "ready"),
                fake::server("y", "ready"),
                fake::server("z", "ready"),
            ],
            ..Default::default()
        },
    );
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let listed = h
        .app
        .tools
        .list(pb::ToolListParams {
            session_id: Some(sid),
        })
        .await
        .unwrap()
        .tools;
    let mcp = h.app.tools.mcp().tools(&h.workdir).await;
    let all: Vec<_> = h.app.tools.builtin().iter().chain(&mcp).cloned().collect();
    assert_eq!(
        listed.len(),
        all.len(),
        "tool.list lists every tool: {:?}",
        listed.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    assert_eq!(mcp.len(), 3, "the MCP tools are walked too");

    for tool in &all {
        let name = tool.name();
        let row = listed
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} is not listed"));
        let declared = tool.permission();
        assert_eq!(
            row.permission_tag,
            declared.as_str(),
            "{name}: tool.list tag vs its declaration"
        );
        let args = sample_args(name).unwrap_or_else(|| panic!("no sample arguments for {name}"));
        let plan = tool
            .plan(&args, Path::new(&h.workdir))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(plan.permission, declared, "{name}: the plan's tag");
        assert!(plan.outside_workdir.is_empty(), "{name}: {plan:?}");
        assert_eq!(
            risk(plan.permission),
            risk(tag(&row.permission_tag)),
            "{name}: the approval's risk"
        );
        for mode in [Mode::Plan, Mode::Accept, Mode::Auto] {
            let listed_verdict = matrix(mode, tag(&row.permission_tag));
            assert_eq!(
                decide(mode, &plan, false),
                listed_verdict,
                "{name} in {} mode: what the matrix checks vs what tool.list says",
                mode.as_str()
            );
        }
    }

    // The case of the issue: listed as `read`, refused in plan mode as needing `send`.
    let create = listed.iter().find(|t| t.name == "schedule_create").unwrap();
    assert_eq!(create.permission_tag, "send");
    assert_eq!(
        matrix(Mode::Plan, tag(&create.permission_tag)),
        Verdict::Deny
    );
    // The global settings' tags (and the `network` default) reach the listing.
    let tags: Vec<_> = ["mcp__x__run", "mcp__y__put", "mcp__z__get"]
        .iter()
        .map(|n| &listed.iter().find(|t| t.name == *n).unwrap().permission_tag)
        .collect();
    assert_eq!(tags, ["exec", "write", "network"]);
}
