use super::*;
use std::path::PathBuf;

#[test]
fn names_are_prefixed_and_safe_for_providers() {
    assert_eq!(tool_name("fs", "read_file"), "mcp__fs__read_file");
    assert_eq!(tool_name("x", "a.b/c"), "mcp__x__a_b_c");
    assert_eq!(tool_name("s", &"t".repeat(100)).len(), 64);
    assert!(
        std::ptr::eq(intern("mcp__a__b"), intern("mcp__a__b")),
        "interned once"
    );
}

#[test]
fn permission_tags_map_and_default_to_network() {
    assert_eq!(parse_permission("exec"), Permission::Exec);
    assert_eq!(parse_permission("read"), Permission::Read);
    assert_eq!(parse_permission(""), Permission::Network);
    assert_eq!(parse_permission("bogus"), Permission::Network);
}

#[tokio::test]
async fn svc_mcp_down_means_no_tools_and_calls_fail_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let client = McpClient::new(&Home::new(dir.path()));
    let tools = tokio::time::timeout(Duration::from_secs(10), client.tools(dir.path()))
        .await
        .unwrap();
    assert!(tools.is_empty());
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        client.call(dir.path(), "s", "t", &json!({}), "c1"),
    )
    .await
    .unwrap();
    assert!(!out.ok);
    assert!(out.content.starts_with("unavailable"), "{}", out.content);
}

#[tokio::test]
async fn plan_uses_the_server_permission_and_refuses_non_object_args() {
    let t = McpTool {
        name: intern("mcp__s__t"),
        server: "s".into(),
        tool: "t".into(),
        description: String::new(),
        schema: json!({"type": "object"}),
        permission: Permission::Exec,
        client: McpClient::new(&Home::new("/nonexistent")),
    };
    let p = t.plan(&json!({"a": 1}), Path::new("/")).unwrap();
    assert_eq!(p.permission, Permission::Exec);
    assert!(p.summary.starts_with("mcp s/t"));
    assert!(t.plan(&json!([1]), Path::new("/")).is_err());
    assert!(t.spec().description.contains("MCP server s"));
}

#[test]
fn images_are_read_back_from_the_result_meta() {
    let meta = json!({"source": "mcp", "images": [
        {"mimeType": "image/png", "data": "iVBORw0KGgo="},
        {"mimeType": "image/png", "data": ""},
        {"mimeType": "image/jpeg"}
    ]});
    assert_eq!(
        images_of(&meta),
        vec![ToolImage {
            mime_type: "image/png".into(),
            data: "iVBORw0KGgo=".into()
        }]
    );
    assert!(images_of(&json!({"source": "mcp"})).is_empty());
    assert!(images_of(&Value::Null).is_empty());
}

/// A home (with its `run/` directory) and a workdir under `dir`.
fn home_and_workdir(dir: &Path) -> (Home, PathBuf) {
    let home = Home::new(dir.join("home"));
    home.ensure_dirs().unwrap();
    let workdir = dir.join("work");
    std::fs::create_dir_all(&workdir).unwrap();
    (home, workdir)
}

#[tokio::test]
async fn permission_tags_come_from_the_global_settings_only() {
    // svc-mcp merges the project's `.snowpea/settings.json` into the tag it reports, so a
    // project could lower a global server to `read`; the session reads the global file itself.
    let dir = tempfile::tempdir().unwrap();
    let (home, workdir) = home_and_workdir(dir.path());
    std::fs::create_dir_all(workdir.join(".snowpea")).unwrap();
    std::fs::write(
        workdir.join(".snowpea/settings.json"),
        json!({"mcp": {"permissions": {"f": "read", "g": "read"}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        home.settings_path(),
        json!({"mcp": {"permissions": {"g": "exec"}}}).to_string(),
    )
    .unwrap();
    let _mcp = fake::FakeMcp::serve(
        &home.socket("mcp"),
        fake::Script {
            tools: vec![
                fake::tool("f", "echo", "read"),
                fake::tool("g", "run", "read"),
            ],
            servers: vec![fake::server("f", "ready"), fake::server("g", "ready")],
            ..Default::default()
        },
    );
    let tools = McpClient::new(&home).tools(&workdir).await;
    let tag = |name: &str| {
        let t = tools.iter().find(|t| t.name() == name).expect(name);
        t.plan(&json!({}), &workdir).unwrap().permission
    };
    assert_eq!(
        tag("mcp__f__echo"),
        Permission::Network,
        "default, not the project's read"
    );
    assert_eq!(tag("mcp__g__run"), Permission::Exec, "the global tag");
}

#[test]
fn the_permission_tag_defaults_to_network_and_ignores_unknown_tags() {
    let s = json!({"mcp": {"permissions": {"a": "write", "b": "sudo", "c": 3}}});
    assert_eq!(permission_of(&s, "a"), Permission::Write);
    assert_eq!(permission_of(&s, "b"), Permission::Network);
    assert_eq!(permission_of(&s, "c"), Permission::Network);
    assert_eq!(permission_of(&s, "d"), Permission::Network);
    assert_eq!(permission_of(&json!({}), "a"), Permission::Network);
}
