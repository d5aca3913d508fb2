//! Language servers through the real suite (issue 23) with a real server: pyright from npm
//! (`e2e/tests/lsp-servers`, installed by `.ci/run` with `npm ci`). A `write_file` that
//! introduces a type error gets pyright's diagnostic appended to its result and an
//! `lsp.diagnostics` event; `lsp.status` shows the server; `lsp.catalog` lists the table;
//! the `lsp_*` tools answer. One suite for the file.
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use snowpea_e2e::{Suite, SuiteOptions};

const LONG: Duration = Duration::from_secs(120);

fn pyright() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/lsp-servers/node_modules/.bin/pyright-langserver");
    if p.exists() {
        Some(p)
    } else {
        snowpea_common::test_deps::missing(
            "pyright",
            "npm ci --prefix e2e/tests/lsp-servers (.ci/run does it)",
        );
        None
    }
}

#[tokio::test]
async fn a_type_error_written_by_the_agent_comes_back_as_diagnostics() {
    let Some(pyright) = pyright() else {
        return;
    };
    let script = json!({
        "steps": [
            {"match": "type error", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "app/main.py", "content": "def twice(n: int) -> int:\n    return n * 2\n\nx: int = \"hello\"\ny = twice(2)\n"}}
            ]},
            {"match": "hover", "tool_calls": [
                {"name": "lsp_hover", "arguments": {"path": "app/main.py", "line": 5, "character": 5}},
                {"name": "lsp_definition", "arguments": {"path": "app/main.py", "line": 5, "character": 5}}
            ]},
            {"match": "fixed", "tool_calls": [
                {"name": "edit_file", "arguments": {"path": "app/main.py", "old": "x: int = \"hello\"", "new": "x: int = 3"}}
            ]}
        ],
        "default": {"text": "ok"}
    });
    let settings = json!({"lsp": {
        "servers": {"pyright": {"command": [pyright.display().to_string(), "--stdio"]}},
        "diagnosticsWaitSeconds": 60
    }});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        settings: Some(settings),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let work = suite.workdir.path().join("py");
    std::fs::create_dir_all(work.join("app")).unwrap();
    std::fs::write(work.join("pyproject.toml"), "[project]\nname = \"t\"\n").unwrap();
    let work = std::fs::canonicalize(work).unwrap();
    let sid = client.create_session(&work, Some("auto")).await.unwrap();

    let catalog = client.call("lsp.catalog", json!({})).await.unwrap();
    let ids: Vec<&str> = catalog["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    for id in [
        "pyright",
        "rust-analyzer",
        "typescript",
        "gopls",
        "clangd",
        "ruff",
    ] {
        assert!(ids.contains(&id), "{id}: {catalog}");
    }
    let status = client.call("lsp.status", json!({})).await.unwrap();
    assert_eq!(
        status["servers"],
        json!([]),
        "nothing started before an edit"
    );

    let out = client
        .prompt_and_collect(&sid, "type error", LONG)
        .await
        .unwrap();
    let result = out
        .events
        .iter()
        .find(|e| e.kind == "tool.result")
        .expect("tool.result");
    let text = result.payload["output"].as_str().unwrap();
    assert!(text.contains("LSP diagnostics for app/main.py"), "{text}");
    assert!(text.contains("ERROR [4:"), "{text}");
    assert!(
        text.contains("pyright") || text.contains("Pyright"),
        "{text}"
    );
    let diag = out
        .events
        .iter()
        .find(|e| e.kind == "lsp.diagnostics")
        .expect("lsp.diagnostics event");
    assert_eq!(
        diag.payload["path"],
        json!("app/main.py"),
        "{:?}",
        diag.payload
    );
    assert!(
        diag.payload["errors"].as_i64().unwrap() >= 1,
        "{:?}",
        diag.payload
    );

    let status = client.call("lsp.status", json!({})).await.unwrap();
    let row = &status["servers"][0];
    assert_eq!(row["id"], json!("pyright"), "{status}");
    assert_eq!(row["state"], json!("ready"), "{status}");
    assert_eq!(row["root"], json!(work.display().to_string()), "{status}");
    assert_eq!(row["languageId"], json!("python"), "{status}");
    assert!(row["pid"].as_i64().is_some(), "{status}");

    let tools = client
        .call("tool.list", json!({"sessionId": sid}))
        .await
        .unwrap();
    let hover = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "lsp_hover")
        .expect("lsp_hover listed");
    assert_eq!(hover["state"], json!("active"), "{hover}");

    let out = client
        .prompt_and_collect(&sid, "hover", LONG)
        .await
        .unwrap();
    let results: Vec<_> = out
        .events
        .iter()
        .filter(|e| e.kind == "tool.result")
        .collect();
    assert_eq!(results.len(), 2);
    assert!(
        results[0].payload["ok"].as_bool().unwrap(),
        "{:?}",
        results[0].payload
    );
    assert!(
        results[0].payload["output"]
            .as_str()
            .unwrap()
            .contains("twice"),
        "{:?}",
        results[0].payload
    );
    assert!(
        results[1].payload["output"]
            .as_str()
            .unwrap()
            .contains("app/main.py:1:"),
        "{:?}",
        results[1].payload
    );

    // The fix clears the error.
    let out = client
        .prompt_and_collect(&sid, "fixed", LONG)
        .await
        .unwrap();
    let diag = out
        .events
        .iter()
        .find(|e| e.kind == "lsp.diagnostics")
        .expect("lsp.diagnostics event");
    assert_eq!(
        diag.payload["errors"].as_i64().unwrap_or(0),
        0,
        "{:?}",
        diag.payload
    );
}
