use super::*;
use std::path::PathBuf;

#[test]
fn names_are_prefixed_and_safe_for_providers() {
    assert_eq!(tool_name("fs", "read_file"), "mcp__fs__read_file");
    assert_eq!(tool_name("x", "a.b/c"), "mcp__x__a_b_c");
    assert_eq!(tool_name("s", &"t".repeat(100)).len(), 64);
    assert!(
        std::ptr::eq(intern("mcp__a__b", "a", "b"), intern("mcp__a__b", "a", "b")),
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
        client.call(dir.path(), "s", "t", &json!({}), "c1", DEFAULT_TOOL_TIMEOUT),
    )
    .await
    .unwrap();
    assert!(!out.ok);
    assert!(out.content.starts_with("unavailable"), "{}", out.content);
}

#[tokio::test]
async fn plan_uses_the_server_permission_and_refuses_non_object_args() {
    let t = McpTool {
        name: intern("mcp__s__t", "s", "t"),
        server: "s".into(),
        tool: "t".into(),
        description: String::new(),
        schema: json!({"type": "object"}),
        permission: Permission::Exec,
        timeout: DEFAULT_TOOL_TIMEOUT,
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
    assert_eq!(permission_of(&s, "a", "global"), Permission::Write);
    assert_eq!(permission_of(&s, "b", "global"), Permission::Network);
    assert_eq!(permission_of(&s, "c", "global"), Permission::Network);
    assert_eq!(permission_of(&s, "d", "global"), Permission::Network);
    assert_eq!(
        permission_of(&json!({}), "a", "global"),
        Permission::Network
    );
    assert_eq!(permission_of(&s, "a", "settings"), Permission::Write);
    // A project server named like the user's `a` does not inherit its tag.
    assert_eq!(permission_of(&s, "a", "project"), Permission::Network);
}

/// True for a name providers accept: `^[a-zA-Z0-9_-]{1,64}$`.
fn provider_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[test]
fn tools_of_a_long_server_name_get_unique_names_within_the_limit() {
    // A valid 58-character server name leaves no room for the tool name: cutting alone gave
    // every tool the same name `mcp__LLL…L_`.
    let server = "L".repeat(58);
    let pairs = [
        (server.as_str(), "a"),
        (server.as_str(), "b"),
        (server.as_str(), "read_file"),
    ];
    let names = tool_names(&pairs);
    assert_eq!(names.iter().collect::<HashSet<_>>().len(), 3, "{names:?}");
    for n in &names {
        assert!(provider_safe(n), "{n}");
        assert!(n.starts_with("mcp__LLLL"), "{n}");
    }
    assert_eq!(tool_names(&pairs), names, "stable");
    assert_eq!(
        tool_name(&server, "b"),
        names[1],
        "independent of the other tools"
    );
}

#[test]
fn colliding_names_are_disambiguated_and_the_others_stay_plain() {
    let pairs = [
        ("x__y", "z"),
        ("x", "y__z"),
        ("s", "a.b"),
        ("s", "a_b"),
        ("fs", "read"),
        ("fs", "read"),
    ];
    let names = tool_names(&pairs);
    assert_eq!(names[4], "mcp__fs__read");
    assert_eq!(names[5], names[4], "only identical pairs share a name");
    assert_eq!(
        names[..5].iter().collect::<HashSet<_>>().len(),
        5,
        "{names:?}"
    );
    assert!(names.iter().all(|n| provider_safe(n)), "{names:?}");
    assert!(names[0].starts_with("mcp__x__y__z_"), "{}", names[0]);
    assert_eq!(names[0].len(), "mcp__x__y__z_".len() + HASH_LEN);
    assert!(names[2].starts_with("mcp__s__a_b_"), "{}", names[2]);
    assert_eq!(tool_name("x__y", "z"), "mcp__x__y__z", "plain when alone");
}

#[test]
fn the_hash_is_stable_and_separates_server_from_tool() {
    assert_eq!(stable_hash("ab", "c"), stable_hash("ab", "c"));
    assert_ne!(stable_hash("ab", "c"), stable_hash("a", "bc"));
    // FNV-1a 64 of "" + NUL + "": fixed across runs and builds.
    assert_eq!(stable_hash("", ""), 0xaf63_bd4c_8601_b7df);
}

#[tokio::test]
async fn listed_tools_keep_their_server_and_tool_and_call_them() {
    let dir = tempfile::tempdir().unwrap();
    let (home, workdir) = home_and_workdir(dir.path());
    let long = "L".repeat(58);
    let mcp = fake::FakeMcp::serve(
        &home.socket("mcp"),
        fake::Script {
            tools: vec![
                fake::tool(&long, "a", ""),
                fake::tool(&long, "b", ""),
                fake::tool("x", "y__z", ""),
                fake::tool("x__y", "z", ""),
            ],
            ..Default::default()
        },
    );
    let tools = McpClient::new(&home).listed(&workdir).await;
    let got: Vec<_> = tools
        .iter()
        .map(|t| (t.server.as_str(), t.tool.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (long.as_str(), "a"),
            (long.as_str(), "b"),
            ("x", "y__z"),
            ("x__y", "z")
        ]
    );
    let names: HashSet<_> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    for t in &tools {
        let (ctx, _rx) = crate::tools::test_context(&workdir, 10_000);
        let out = t.run(json!({}), ctx).await;
        assert!(out.ok, "{}", out.content);
    }
    let called: Vec<_> = mcp
        .calls()
        .into_iter()
        .map(|c| (c.server, c.tool))
        .collect();
    assert_eq!(
        called,
        [
            (long.clone(), "a".to_owned()),
            (long.clone(), "b".to_owned()),
            ("x".to_owned(), "y__z".to_owned()),
            ("x__y".to_owned(), "z".to_owned())
        ]
    );
}

#[tokio::test]
async fn a_call_svc_mcp_never_answers_fails_after_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (home, workdir) = home_and_workdir(dir.path());
    let mcp = fake::FakeMcp::serve(
        &home.socket("mcp"),
        fake::Script {
            hang_call: true,
            ..Default::default()
        },
    );
    let client = McpClient::new(&home).with_timeouts(fake::short(
        Duration::from_secs(5),
        Duration::from_millis(200),
    ));
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        client.call(&workdir, "f", "echo", &json!({}), "c1", Duration::ZERO),
    )
    .await
    .expect("the call gives up by itself");
    assert!(!out.ok);
    assert_eq!(
        out.content,
        "timeout: svc-mcp did not answer within 200 ms (MCP tool f/echo); the call was abandoned"
    );
    assert_eq!(out.meta["errorKind"], "timeout");
    assert_eq!(mcp.calls().len(), 1, "the request reached svc-mcp");
}

#[tokio::test]
async fn a_list_svc_mcp_never_answers_gives_no_tools_after_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (home, workdir) = home_and_workdir(dir.path());
    let _mcp = fake::FakeMcp::serve(
        &home.socket("mcp"),
        fake::Script {
            tools: vec![fake::tool("f", "echo", "")],
            hang_list: true,
            ..Default::default()
        },
    );
    let short = Duration::from_millis(200);
    let client = McpClient::new(&home).with_timeouts(fake::short(short, short));
    let listed = tokio::time::timeout(Duration::from_secs(10), client.list(&workdir))
        .await
        .expect("the list gives up by itself");
    assert_eq!(listed.unwrap_err(), Unreachable::Slow(short));
    let tools = tokio::time::timeout(Duration::from_secs(10), client.tools(&workdir))
        .await
        .unwrap();
    assert!(tools.is_empty());
    assert_eq!(
        unavailable_message("mcp__f__echo", &Unreachable::Slow(short)),
        "unavailable: svc-mcp did not answer within 200 ms; MCP tool `mcp__f__echo` cannot be called right now"
    );
}

#[test]
fn the_default_deadlines_are_five_seconds_to_list_and_the_tool_timeout_plus_15_s_to_call() {
    let t = Timeouts::default();
    assert_eq!(t.list, Duration::from_secs(5));
    assert_eq!(t.default_tool, Duration::from_secs(300));
    assert_eq!(t.call_margin, Duration::from_secs(15));
    assert_eq!(human(t.default_tool + t.call_margin), "315 s");
    assert_eq!(human(Duration::from_millis(1500)), "1500 ms");
}

#[tokio::test]
async fn listed_tools_carry_the_tool_timeout_svc_mcp_reports() {
    let dir = tempfile::tempdir().unwrap();
    let (home, workdir) = home_and_workdir(dir.path());
    let mut g = fake::tool("g", "t", "");
    g.tool_timeout_sec = 42;
    let mut p = fake::tool("p", "t", "");
    p.tool_timeout_sec = 900;
    let _mcp = fake::FakeMcp::serve(
        &home.socket("mcp"),
        fake::Script {
            // The last one as an older svc-mcp would send it: no timeout, so the default.
            tools: vec![g, p, fake::tool("other", "t", "")],
            ..Default::default()
        },
    );
    let tools = McpClient::new(&home).listed(&workdir).await;
    let timeouts: Vec<_> = tools.iter().map(|t| t.timeout.as_secs()).collect();
    assert_eq!(timeouts, [42, 900, 300]);
}

#[tokio::test]
async fn a_tool_whose_server_is_not_ready_is_not_callable_rather_than_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let (home, workdir) = home_and_workdir(dir.path());
    let long = "N".repeat(60);
    let mcp = fake::FakeMcp::serve(
        &home.socket("mcp"),
        fake::Script {
            tools: vec![
                fake::tool(&long, "echo", ""),
                fake::tool("vanishing", "x", ""),
            ],
            servers: vec![
                fake::server(&long, "ready"),
                fake::server("vanishing", "ready"),
            ],
            ..Default::default()
        },
    );
    let client = McpClient::new(&home);
    let before = client.list(&workdir).await.unwrap();
    let hashed = before.tools[0].name;
    assert!(!hashed.starts_with(&format!("mcp__{long}__")), "{hashed}");
    assert!(not_callable(hashed, &before).is_none(), "ready");

    // svc-mcp restarted: the servers are starting again, one failed, one is gone.
    mcp.update(|s| {
        s.tools.clear();
        s.servers = vec![
            fake::server(&long, "starting"),
            fake::ServerState {
                error: Some("exited with status 1".into()),
                ..fake::server("f", "error")
            },
            fake::server("g", "ready"),
        ];
    });
    let after = client.list(&workdir).await.unwrap();
    let out = not_callable(hashed, &after).expect("known server");
    assert!(!out.ok);
    assert_eq!(
        out.content,
        format!("not_ready: MCP server `{long}` is not ready (state: starting); MCP tool `{hashed}` cannot be called right now; try again shortly")
    );
    assert_eq!(out.meta["errorKind"], "not_ready");
    assert_eq!(out.meta["state"], "starting");
    assert_eq!(out.meta["server"], long.as_str());
    // A name this process never listed: the server by its prefix.
    let out = not_callable("mcp__f__never_listed_here", &after).unwrap();
    assert!(
        out.content.starts_with(
            "not_ready: MCP server `f` is not ready (state: error: exited with status 1);"
        ),
        "{}",
        out.content
    );
    let out = not_callable("mcp__vanishing__x", &after).unwrap();
    assert_eq!(out.meta["errorKind"], "not_found");
    assert!(out
        .content
        .contains("MCP server `vanishing` is not configured"));
    assert!(
        not_callable("mcp__g__not_offered", &after).is_none(),
        "ready: unknown tool"
    );
    assert!(
        not_callable("mcp__nobody__x", &after).is_none(),
        "unknown server"
    );
}
