use super::*;

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
    let client = McpClient::new(dir.path().join("mcp.sock"));
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
        client: McpClient::new(PathBuf::from("/nonexistent.sock")),
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
