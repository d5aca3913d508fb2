use super::*;
use serde_json::json;

fn write(path: &Path, v: serde_json::Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

#[test]
fn project_wins_over_global_over_settings_over_plugin() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::new(t.path().join("home"));
    let work = t.path().join("work");
    write(
        &home.settings_path(),
        json!({"mcp": {"servers": {"a": {"command": "settings"}, "s": {"command": "settings"}}}}),
    );
    write(
        &plugins_dir(&home).join("p1/.mcp.json"),
        json!({"mcpServers": {"a": {"command": "plugin"}, "p": {"command": "plugin"}}}),
    );
    write(
        &global_path(&home),
        json!({"mcpServers": {"a": {"command": "global"}, "g": {"command": "global"}}}),
    );
    write(
        &project_path(&work),
        json!({"mcpServers": {"a": {"command": "project"}}}),
    );
    let all = discover(&home, Some(&work));
    let by: std::collections::HashMap<_, _> = all.iter().map(|d| (d.name.as_str(), d)).collect();
    assert_eq!(by["a"].scope, Scope::Project);
    assert_eq!(by["a"].entry.command.as_deref(), Some("project"));
    assert_eq!(by["g"].scope, Scope::Global);
    assert_eq!(by["s"].scope, Scope::Settings);
    assert_eq!(by["p"].scope, Scope::Plugin);
    assert_eq!(by["p"].plugin.as_deref(), Some("p1"));
    let global_only = discover(&home, None);
    assert_eq!(
        global_only.iter().find(|d| d.name == "a").unwrap().scope,
        Scope::Global
    );
}

#[test]
fn a_plugins_servers_name_its_folder_and_may_sit_at_the_top() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::new(t.path().join("home"));
    write(
        &plugins_dir(&home).join("p1/.mcp.json"),
        json!({"mcpServers": {"one": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/srv", "args": ["--cfg", "${SNOWPEA_PLUGIN_ROOT}/c.json", "$HOME"], "env": {"DATA": "${CLAUDE_PLUGIN_ROOT}/data"}, "cwd": "${CLAUDE_PLUGIN_ROOT}"}}}),
    );
    write(
        &plugins_dir(&home).join("p2/.mcp.json"),
        json!({"two": {"command": "node", "args": ["x.js"]}}),
    );
    let all = discover(&home, None);
    let root = plugins_dir(&home).join("p1");
    let one = all.iter().find(|d| d.name == "one").unwrap();
    assert_eq!(one.scope, Scope::Plugin);
    assert_eq!(
        one.entry.command.as_deref(),
        Some(root.join("bin/srv").to_str().unwrap())
    );
    assert_eq!(
        one.entry.args.as_ref().unwrap(),
        &vec![
            "--cfg".to_string(),
            root.join("c.json").to_string_lossy().into_owned(),
            "$HOME".to_string()
        ]
    );
    assert_eq!(
        one.entry.env.as_ref().unwrap()["DATA"],
        root.join("data").to_string_lossy()
    );
    assert_eq!(one.entry.cwd.as_deref(), Some(root.to_str().unwrap()));
    let two = all.iter().find(|d| d.name == "two").unwrap();
    assert_eq!(
        (two.scope, two.plugin.as_deref()),
        (Scope::Plugin, Some("p2"))
    );
    assert_eq!(two.entry.command.as_deref(), Some("node"));
}

#[test]
fn a_malformed_entry_is_reported_not_fatal() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::new(t.path());
    write(
        &global_path(&home),
        json!({"mcpServers": {"bad": {"args": "not-a-list"}, "good": {"command": "node"}}}),
    );
    let all = discover(&home, None);
    assert!(all
        .iter()
        .find(|d| d.name == "bad")
        .unwrap()
        .invalid
        .is_some());
    assert!(all
        .iter()
        .find(|d| d.name == "good")
        .unwrap()
        .invalid
        .is_none());
}

#[test]
fn rewrites_keep_unknown_entries_keys_and_order() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join(".mcp.json");
    std::fs::write(
        &path,
        r#"{"$schema":"x","mcpServers":{"zeta":{"command":"z","x-custom":{"b":1,"a":2},"args":["1"]},"alpha":{"url":"https://a.example"}},"other":true}"#,
    )
    .unwrap();
    let mut f = file::McpFile::load(&path).unwrap();
    let mut e = ServerEntry::from_json("zeta", f.entry("zeta").unwrap()).unwrap();
    e.timeout_sec = Some(5);
    e.args = None;
    f.upsert("zeta", &e);
    f.upsert(
        "new",
        &ServerEntry {
            command: Some("n".into()),
            ..Default::default()
        },
    );
    f.save().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let back: Json = serde_json::from_str(&text).unwrap();
    let keys: Vec<&String> = back.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["$schema", "mcpServers", "other"]);
    let servers: Vec<&String> = back
        .get("mcpServers")
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(servers, ["zeta", "alpha", "new"]);
    let zeta: Vec<&String> = back
        .get("mcpServers")
        .unwrap()
        .get("zeta")
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(zeta, ["command", "x-custom", "timeoutSec"]);
    assert!(
        text.contains(r#""b": 1,"#) && text.find("\"b\"") < text.find("\"a\": 2"),
        "nested order kept: {text}"
    );
    // No temp file is left behind.
    let left: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

#[test]
fn a_write_is_atomic_and_keeps_the_mode() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join(".mcp.json");
    let mut f = file::McpFile::load(&path).unwrap();
    f.upsert(
        "a",
        &ServerEntry {
            command: Some("node".into()),
            env: Some([("K".to_string(), "v".to_string())].into_iter().collect()),
            ..Default::default()
        },
    );
    f.save().unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600,
        "new files may hold secrets"
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
    f.remove("a");
    f.save().unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    assert_ne!(
        std::os::unix::fs::MetadataExt::ino(&meta),
        ino,
        "replaced by rename, not rewritten in place"
    );
}

#[test]
fn a_malformed_file_is_mcp_invalid_naming_it() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join(".mcp.json");
    std::fs::write(&path, "{ nope").unwrap();
    match file::McpFile::load(&path) {
        Err(Error::Invalid(m)) => assert!(m.contains(".mcp.json"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn transport_inference_and_filters() {
    let e = |v: serde_json::Value| -> ServerEntry { serde_json::from_value(v).unwrap() };
    assert_eq!(e(json!({"command": "x"})).transport(), Transport::Stdio);
    assert_eq!(
        e(json!({"url": "https://a.example/mcp"})).transport(),
        Transport::Http
    );
    assert_eq!(
        e(json!({"url": "https://a.example/sse"})).transport(),
        Transport::Sse
    );
    assert_eq!(
        e(json!({"type": "streamable-http", "url": "https://a.example/sse"})).transport(),
        Transport::Http
    );
    let f = e(json!({"command": "x", "tools": {"include": ["a", "b"], "exclude": ["b"]}}));
    assert!(f.tool_allowed("a") && !f.tool_allowed("b") && !f.tool_allowed("c"));
    assert_eq!(f.start_timeout().as_secs(), 30);
    assert_eq!(f.tool_timeout().as_secs(), 300);
}

#[test]
fn permission_defaults_to_network() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::new(t.path());
    assert_eq!(permission(&home, "x"), "network");
    file::write_permission(&home.settings_path(), "x", "exec").unwrap();
    assert_eq!(permission(&home, "x"), "exec");
}

/// Regression: a workdir that is `$SNOWPEA_HOME` itself has no project scope, so a global
/// server is declared (and started) once, not twice.
#[test]
fn home_as_workdir_declares_global_servers_once() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::new(t.path());
    std::fs::write(
        global_path(&home),
        r#"{"mcpServers": {"ev": {"command": "node", "args": ["x.js"]}}}"#,
    )
    .unwrap();
    assert!(is_global_file(&home, t.path()));
    let found = discover(&home, Some(t.path()));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].scope, Scope::Global);
}

#[test]
fn removing_a_permission_keeps_the_rest_and_writes_nothing_when_absent() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::new(t.path());
    std::fs::write(
        home.settings_path(),
        r#"{"theme":"dark","mcp":{"permissions":{"a":"read","b":"exec"},"x":1}}"#,
    )
    .unwrap();
    assert!(file::remove_permission(&home.settings_path(), "a").unwrap());
    assert_eq!(permission(&home, "a"), "network");
    assert_eq!(permission(&home, "b"), "exec");
    let text = std::fs::read_to_string(home.settings_path()).unwrap();
    assert!(text.find("theme") < text.find("\"mcp\""), "{text}");
    let mtime = std::fs::metadata(home.settings_path())
        .unwrap()
        .modified()
        .unwrap();
    assert!(!file::remove_permission(&home.settings_path(), "a").unwrap());
    assert_eq!(
        std::fs::metadata(home.settings_path())
            .unwrap()
            .modified()
            .unwrap(),
        mtime
    );
    assert!(!file::remove_permission(&t.path().join("missing.json"), "a").unwrap());
}

#[test]
fn a_forced_overwrite_replaces_known_keys_and_keeps_unknown_ones() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join(".mcp.json");
    std::fs::write(
        &path,
        r#"{"mcpServers":{"a":{"x-note":"kept","command":"old","args":["1"],"env":{"K":"v"}}}}"#,
    )
    .unwrap();
    let mut f = file::McpFile::load(&path).unwrap();
    f.replace(
        "a",
        &ServerEntry {
            url: Some("https://a.example/mcp".into()),
            ..Default::default()
        },
    );
    f.save().unwrap();
    let back: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        back["mcpServers"]["a"],
        json!({"x-note": "kept", "url": "https://a.example/mcp"})
    );
}

#[test]
fn a_project_settings_file_cannot_change_a_permission() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::new(t.path().join("home"));
    home.ensure_dirs().unwrap();
    let project = t.path().join("p");
    std::fs::create_dir_all(project.join(".snowpea")).unwrap();
    std::fs::write(
        project.join(".snowpea/settings.json"),
        r#"{"mcp": {"permissions": {"x": "read"}}}"#,
    )
    .unwrap();
    // `permission` takes no workdir: only the user's own settings.json counts.
    assert_eq!(permission(&home, "x"), "network");
    file::write_permission(&home.settings_path(), "x", "exec").unwrap();
    assert_eq!(permission(&home, "x"), "exec");
}
