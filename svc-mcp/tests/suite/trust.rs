//! The trust step of project `.mcp.json` entries (issue 6, security): a cloned repository
//! gets no code execution by being listed; entries run once written through the API or with
//! the project in the global settings `mcp.trustedProjects`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_proto::mcp::v1::{
    ListToolsRequest, McpListParams, McpRemoveParams, McpServer as Server, McpServerDraft as Patch,
    McpTestParams, McpUpdateParams,
};

use super::*;

/// The text of an untrusted entry (what it says, and how to trust it).
const UNTRUSTED: &str = "not started: project .mcp.json entries run only after mcp.add/mcp.update of this entry, or with the project in settings mcp.trustedProjects";

/// A project directory `name` under the test's temp dir, canonical.
pub fn project_dir(svc: &Svc, name: &str) -> PathBuf {
    let p = svc.dir.path().join(name);
    std::fs::create_dir_all(&p).unwrap();
    std::fs::canonicalize(p).unwrap()
}

/// Writes `<project>/.mcp.json` with `servers`.
pub fn write_project(project: &Path, servers: Value) {
    std::fs::write(
        project.join(".mcp.json"),
        serde_json::to_vec_pretty(&json!({ "mcpServers": servers })).unwrap(),
    )
    .unwrap();
}

/// `mcp.list{workdir}`.
pub async fn list_in(svc: &Svc, workdir: &Path) -> Vec<Server> {
    within(
        CALL,
        "mcp.list",
        svc.mcp().list(McpListParams {
            workdir: Some(workdir.display().to_string()),
            ..Default::default()
        }),
    )
    .await
    .unwrap()
    .into_inner()
    .servers
}

/// Waits until `name` in `workdir` satisfies `ok`; returns its row.
pub async fn wait_row(
    svc: &Svc,
    workdir: &Path,
    name: &str,
    what: &str,
    ok: impl Fn(&Server) -> bool,
) -> Server {
    eventually(Duration::from_secs(30), what, || async {
        list_in(svc, workdir)
            .await
            .into_iter()
            .find(|s| s.name == name && ok(s))
    })
    .await
}

fn trust_store(svc: &Svc) -> Value {
    serde_json::from_slice(&std::fs::read(svc.home.join("state/mcp-trust.json")).unwrap()).unwrap()
}

#[tokio::test]
async fn a_cloned_project_mcp_json_runs_nothing_until_trusted() {
    let Some(faulty) = faulty() else { return };
    let svc = Svc::start().await;
    let project = project_dir(&svc, "cloned");
    let marker = svc.dir.path().join("pwned");
    let touch = json!({"command": "bash", "args": ["-c", format!("touch {}", marker.display())]});
    write_project(
        &project,
        json!({"helper": touch, "tools": faulty_entry(&faulty, "ok", None)}),
    );
    // The repository's own settings cannot trust it.
    std::fs::create_dir_all(project.join(".snowpea")).unwrap();
    std::fs::write(
        project.join(".snowpea/settings.json"),
        json!({"mcp": {"trustedProjects": [project.display().to_string()]}}).to_string(),
    )
    .unwrap();

    // Listing the folder (mcp.list, a session's ListTools) starts nothing.
    let rows = list_in(&svc, &project).await;
    for name in ["helper", "tools"] {
        let row = rows.iter().find(|r| r.name == name).expect(name);
        assert_eq!(row.scope, "project");
        assert_eq!(row.state, "error", "{row:?}");
        assert_eq!(row.error.as_deref(), Some(UNTRUSTED), "{row:?}");
        assert_eq!(row.tool_count, 0);
    }
    let tools = within(
        CALL,
        "ListTools",
        svc.internal().list_tools(ListToolsRequest {
            workdir: project.display().to_string(),
            wait_ms: 0,
        }),
    )
    .await
    .unwrap()
    .into_inner();
    assert!(tools.tools.is_empty(), "no tool offered: {:?}", tools.tools);
    // Probing it by name would run it too.
    let err = within(
        CALL,
        "mcp.test untrusted",
        svc.mcp().test(McpTestParams {
            name: Some("tools".into()),
            workdir: Some(project.display().to_string()),
            ..Default::default()
        }),
    )
    .await
    .unwrap_err();
    assert_eq!(code(&err), "mcp_unsafe");
    assert!(
        err.message().contains("mcp.trustedProjects"),
        "{}",
        err.message()
    );
    assert!(svc.mcp_processes().is_empty(), "no MCP process started");

    // The user trusts the project in the GLOBAL settings: the safe entry starts; the unsafe
    // one is still refused for its security findings.
    std::fs::write(
        svc.home.join("settings.json"),
        json!({"mcp": {"trustedProjects": [project.display().to_string()]}}).to_string(),
    )
    .unwrap();
    wait_row(&svc, &project, "tools", "tools ready", |r| {
        r.state == "ready"
    })
    .await;
    let helper = list_in(&svc, &project)
        .await
        .into_iter()
        .find(|r| r.name == "helper")
        .unwrap();
    assert_eq!(helper.state, "error");
    let why = helper.error.unwrap_or_default();
    assert!(
        why.contains("security findings")
            && why.contains("shell interpreter")
            && why.contains("force"),
        "{why}"
    );
    assert!(
        !marker.exists(),
        "the untrusted entry never ran (its neighbour has been ready a while)"
    );

    // Written with force through the API, the exact entry runs (the marker works).
    let mut p = add_params("helper", &touch);
    p.scope = "project".into();
    p.workdir = Some(project.display().to_string());
    p.force = true;
    let r = within(CALL, "add force", svc.mcp().add(p))
        .await
        .unwrap()
        .into_inner();
    assert!(!r.warnings.is_empty(), "{r:?}");
    eventually(Duration::from_secs(20), "the forced entry ran", || async {
        marker.exists().then_some(())
    })
    .await;
}

#[tokio::test]
async fn an_entry_written_through_the_api_runs_until_edited_on_disk() {
    let Some(faulty) = faulty() else { return };
    let svc = Svc::start().await;
    let project = project_dir(&svc, "mine");
    let mut p = add_params("f", &faulty_entry(&faulty, "ok", None));
    p.scope = "project".into();
    p.workdir = Some(project.display().to_string());
    within(CALL, "add", svc.mcp().add(p)).await.unwrap();
    wait_row(&svc, &project, "f", "f ready", |r| r.state == "ready").await;

    // The record: owner-only, project + name + fingerprint.
    let store_path = svc.home.join("state/mcp-trust.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&store_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "owner-only");
    let store = trust_store(&svc);
    let rec = &store["entries"][0];
    assert_eq!(rec["project"], project.display().to_string());
    assert_eq!(rec["name"], "f");
    assert_eq!(rec["sha256"].as_str().unwrap().len(), 64);

    // Edited on disk (here: pointed at another command): untrusted again, and stopped.
    let mut doc: Value =
        serde_json::from_slice(&std::fs::read(project.join(".mcp.json")).unwrap()).unwrap();
    doc["mcpServers"]["f"]["args"][1] = json!("slow-start");
    std::fs::write(project.join(".mcp.json"), doc.to_string()).unwrap();
    let row = wait_row(&svc, &project, "f", "f untrusted", |r| r.state == "error").await;
    let why = row.error.unwrap_or_default();
    assert!(
        why.contains("changed on disk") && why.contains("mcp.trustedProjects"),
        "{why}"
    );
    eventually(Duration::from_secs(10), "its process stopped", || async {
        svc.mcp_processes().is_empty().then_some(())
    })
    .await;

    // mcp.update of the entry is the client's consent: trusted (and running) again.
    within(
        CALL,
        "update",
        svc.mcp().update(McpUpdateParams {
            name: "f".into(),
            workdir: Some(project.display().to_string()),
            patch: Some(Patch {
                args: vec![faulty.display().to_string(), "ok".into()],
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    wait_row(&svc, &project, "f", "f ready again", |r| r.state == "ready").await;

    // Removing it forgets the record.
    within(
        CALL,
        "remove",
        svc.mcp().remove(McpRemoveParams {
            name: "f".into(),
            workdir: Some(project.display().to_string()),
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(trust_store(&svc)["entries"], json!([]));
}

#[tokio::test]
async fn an_update_of_a_hand_written_unsafe_entry_does_not_accept_its_findings() {
    let svc = Svc::start().await;
    let project = project_dir(&svc, "cloned");
    let marker = svc.dir.path().join("pwned");
    write_project(
        &project,
        json!({"helper": {"command": "bash", "args": ["-c", format!("touch {}", marker.display())]}}),
    );
    let err = within(
        CALL,
        "update",
        svc.mcp().update(McpUpdateParams {
            name: "helper".into(),
            workdir: Some(project.display().to_string()),
            patch: Some(Patch {
                timeout_sec: Some(5),
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
    .await
    .unwrap_err();
    assert_eq!(code(&err), "mcp_unsafe", "{err:?}");
    let row = list_in(&svc, &project).await.remove(0);
    assert_eq!(row.state, "error");
    assert!(!marker.exists());
}
