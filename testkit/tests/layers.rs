//! The layer rule on every crate of the workspace (issue 34): no import cycle among the files
//! of a crate's `src` ([`snowpea_testkit::layers`]). A crate that predates the rule has an
//! allow-list of the edges that close its circles today; it may only shrink (an entry no
//! circle needs fails the test), and a crate not listed has none.

use std::path::{Path, PathBuf};

use snowpea_testkit::layers::{check, Allowed};

/// Known edges per crate folder (relative to the workspace root), seeded by issue 34 with
/// the imports that run "back up" between a crate's top-level modules (a folder entry
/// `x/` covers every file below it; `("x/", "x/")` a circle inside that folder). A crate
/// not listed has none: the gateway and the svc-session library crates
/// (`svc-session/crates/*`) are held to the rule without one.
const ALLOWED: &[(&str, &[Allowed<'static>])] = &[
    ("proto", &[("json.rs", "typed.rs"), ("lib.rs", "gen/")]),
    ("common", &[("bus.rs", "service.rs")]),
    (
        "svc-session",
        &[
            ("agents/", "turn/"),
            ("approval/", "permission/"),
            ("backend/", "tools/"),
            ("clients/", "tools/"),
            ("compaction/", "turn/"),
            ("events.rs", "session/"),
            ("hooks/", "turn/"),
            ("lsp/", "tools/"),
            ("permissions.rs", "tools/"),
            ("runs/", "agents/"),
            ("runs/", "turn/"),
            ("session/", "backend/"),
            ("session/", "checkpoints/"),
            ("session/", "host_tools/"),
            ("session/", "question/"),
            ("session/", "turn/"),
            ("setup/", "app.rs"),
            ("tools/", "agents/"),
            ("tools/", "checkpoints/"),
            ("tools/", "host_tools/"),
            ("turn/", "commands/"),
            ("web/", "app.rs"),
            ("agents/", "agents/"),
            ("backend/", "backend/"),
            ("checkpoints/", "checkpoints/"),
            ("commands/", "commands/"),
            ("hooks/", "hooks/"),
            ("host_tools/", "host_tools/"),
            ("session/", "session/"),
            ("setup/", "setup/"),
            ("teams/", "teams/"),
            ("tools/", "tools/"),
            ("turn/", "turn/"),
            ("web/", "web/"),
        ],
    ),
    ("svc-memory", &[("store/", "store/")]),
    (
        "supervisor",
        &[
            ("cli/", "chat/"),
            ("cli/", "cmd/"),
            ("cli/", "gateway_cmd.rs"),
            ("cli/", "run/"),
            ("cli/", "supervise.rs"),
            ("chat/", "chat/"),
            ("cli/", "cli/"),
            ("cmd/", "cmd/"),
        ],
    ),
    (
        "sdk/rust",
        &[
            ("client.rs", "connection.rs"),
            ("client.rs", "events.rs"),
            ("client.rs", "lib.rs"),
            ("events.rs", "lib.rs"),
            ("lib.rs", "host_tools.rs"),
            ("lib.rs", "options.rs"),
        ],
    ),
    (
        "svc-scheduler",
        &[("runner.rs", "scheduler.rs"), ("store/", "store/")],
    ),
    (
        "svc-mcp",
        &[
            ("config/", "trust.rs"),
            ("config/", "validate.rs"),
            ("config/", "config/"),
            ("host/", "host/"),
        ],
    ),
    (
        "svc-audio",
        &[
            ("engines/", "detect.rs"),
            ("install.rs", "lib.rs"),
            ("engines/", "engines/"),
        ],
    ),
    (
        "testkit",
        &[
            ("eventually.rs", "lib.rs"),
            ("lib.rs", "process.rs"),
            ("lib.rs", "task.rs"),
            ("fake_chat/", "fake_chat/"),
        ],
    ),
    (
        "svc-chat",
        &[
            ("binding.rs", "error.rs"),
            ("chat.rs", "inbound.rs"),
            ("chat.rs", "relay.rs"),
            ("inbound.rs", "commands.rs"),
        ],
    ),
    (
        "front/acp",
        &[
            ("daemon.rs", "lib.rs"),
            ("lib.rs", "state.rs"),
            ("mcp.rs", "state.rs"),
            ("state.rs", "commands.rs"),
            ("state.rs", "permission.rs"),
            ("updates.rs", "state.rs"),
        ],
    ),
    (
        "front/mcp",
        &[
            ("approvals.rs", "server.rs"),
            ("daemon.rs", "lib.rs"),
            ("prompts.rs", "server.rs"),
            ("server.rs", "resources.rs"),
            ("server.rs", "tools/"),
            ("tools/", "tools/"),
        ],
    ),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit sits in the workspace")
        .to_path_buf()
}

/// The member folders of the workspace's `Cargo.toml`.
fn members(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let start = text.find("members = [").expect("a members list") + "members = [".len();
    let end = start + text[start..].find(']').unwrap();
    text[start..end]
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn no_crate_has_an_import_cycle_beyond_its_allow_list() {
    let root = workspace_root();
    let members = members(&root);
    assert!(
        members.iter().any(|m| m == "svc-session/crates/llm"),
        "{members:?}"
    );
    for (dir, _) in ALLOWED {
        assert!(members.iter().any(|m| m == dir), "{dir} is not a member");
    }
    let mut problems = Vec::new();
    for member in &members {
        let src = root.join(member).join("src");
        if !src.join("lib.rs").exists() && !src.join("main.rs").exists() {
            continue;
        }
        let allowed = ALLOWED
            .iter()
            .find(|(d, _)| d == member)
            .map_or(&[][..], |(_, a)| a);
        let (left, stale) = check(&src, allowed);
        for c in left {
            problems.push(format!("{member}: import cycle {c:?}"));
        }
        for s in stale {
            problems.push(format!(
                "{member}: allow-list entry {s} closes no circle any more: remove it"
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
