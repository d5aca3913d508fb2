//! Issue 21 "Done means", host tools: a second real WebSocket client (the Rust SDK's
//! `register_tools`) lends the agent its tools. register → the scripted model calls the tool →
//! `tool.invoke` with its context → the result reaches the model; progress keeping a 1 s
//! timeout alive for 3 s; silence timing out with `tool.cancel`; interrupt cancelling; the
//! host disconnecting mid-call failing fast; all-or-nothing registration; `browser_*`
//! shadowing allowed and `shell` refused; `meta.sensitive` absent from `session.resume` and
//! every log; an image fetched by `session.toolContent`; two `parallel:"safe"` calls
//! overlapping and two `"never"` calls not; `approval.ask` with a `site` scope stored and
//! matched, and `localDevServer` stored as a project rule. One suite; the phases run in order.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::{Client, HostTool, ToolInvocation, ToolResult};
use snowpea_testkit::within;
use tokio::sync::{mpsc, Barrier};

const WAIT: Duration = Duration::from_secs(30);
const SECRET: &str = "hunter2-e2e-5c1d";
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn script() -> Value {
    let call = |name: &str, args: Value| json!({"name": name, "arguments": args});
    let step =
        |m: &str, calls: Vec<Value>| json!({"match": m, "repeat": true, "tool_calls": calls});
    json!({"steps": [
        step("use page", vec![call("page_read", json!({"tab": 7}))]),
        {"after_tool": "page_read", "repeat": true, "echoToolResults": true},
        step("slow progress", vec![call("slow_progress", json!({}))]),
        step("go silent", vec![call("silent", json!({}))]),
        step("hang", vec![call("hang", json!({}))]),
        step("secret", vec![call("secret_read", json!({}))]),
        {"after_tool": "secret_read", "repeat": true, "echoToolResults": true},
        step("snap", vec![call("snap", json!({}))]),
        {"after_tool": "snap", "repeat": true, "describeImages": true},
        step("two safe", vec![call("safe_a", json!({})), call("safe_b", json!({}))]),
        step("two never", vec![call("never_a", json!({})), call("never_b", json!({}))]),
        step("navigate", vec![call("browser_navigate", json!({"url": "https://x.example"}))]),
        {"after_tool": "browser_navigate", "repeat": true, "echoToolResults": true}
    ], "default": {"text": "ok"}})
}

/// What the host's handler saw.
#[derive(Default)]
struct HostLog {
    invokes: Mutex<Vec<Value>>,
    cancelled: Mutex<Vec<String>>,
    never_running: AtomicBool,
    never_overlapped: AtomicBool,
}

fn tools() -> Vec<HostTool> {
    let one_second = Duration::from_secs(1);
    vec![
        HostTool::new("page_read", "Read the open tab.", "read")
            .with_schema(json!({"type": "object", "properties": {"tab": {"type": "integer"}}})),
        HostTool::new("slow_progress", "Works for 3 s, saying so.", "read")
            .with_timeout(one_second),
        HostTool::new("silent", "Never answers.", "read").with_timeout(one_second),
        HostTool::new("hang", "Runs until cancelled.", "read"),
        HostTool::new("secret_read", "Reads a password.", "read"),
        HostTool::new("snap", "Screenshot of the tab.", "read"),
        HostTool::new("safe_a", "Safe A.", "read").parallel_safe(),
        HostTool::new("safe_b", "Safe B.", "read").parallel_safe(),
        HostTool::new("never_a", "Never A.", "read"),
        HostTool::new("never_b", "Never B.", "read"),
        HostTool::new("browser_navigate", "The host's own navigation.", "network"),
    ]
}

async fn handle(
    call: ToolInvocation,
    log: Arc<HostLog>,
    barrier: Arc<Barrier>,
    started: mpsc::UnboundedSender<String>,
) -> ToolResult {
    log.invokes.lock().unwrap().push(call.params.clone());
    let _ = started.send(call.name.clone());
    let until_cancelled = |call: &ToolInvocation, log: &Arc<HostLog>| {
        let (token, id, log) = (call.cancelled.clone(), call.call_id.clone(), log.clone());
        async move {
            token.cancelled().await;
            log.cancelled.lock().unwrap().push(id);
            ToolResult::error("cancelled")
        }
    };
    match call.name.as_str() {
        "page_read" => ToolResult::ok(format!("tab {} says hello", call.args["tab"]))
            .with_meta(json!({"pages": [1]})),
        "slow_progress" => {
            // 15 × 200 ms = 3 s of work under a 1 s silence timeout.
            for i in 0..15 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                call.progress(&format!("step {i}"))
                    .await
                    .expect("tool.progress");
            }
            ToolResult::ok("worked 3 s")
        }
        "silent" | "hang" => until_cancelled(&call, &log).await,
        "secret_read" => ToolResult::ok(format!("the password is {SECRET}")).sensitive(),
        "snap" => ToolResult::ok("a screenshot").with_image("image/png", PNG),
        // Each waits until the other has started: only overlapping calls get past it.
        "safe_a" | "safe_b" => match tokio::time::timeout(WAIT, barrier.wait()).await {
            Ok(_) => ToolResult::ok("overlapped"),
            Err(_) => ToolResult::error("the other safe call never ran beside this one"),
        },
        "never_a" | "never_b" => {
            if log.never_running.swap(true, Ordering::SeqCst) {
                log.never_overlapped.store(true, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            log.never_running.store(false, Ordering::SeqCst);
            ToolResult::ok("alone")
        }
        "browser_navigate" => ToolResult::ok(format!("host navigated to {}", call.args["url"])),
        other => ToolResult::error(format!("no tool {other}")),
    }
}

async fn host(
    suite: &Suite,
    client_id: &str,
) -> (Client, Arc<HostLog>, mpsc::UnboundedReceiver<String>) {
    let client = suite.client_with(|o| o.with_client_id(client_id)).await;
    let log = Arc::new(HostLog::default());
    let barrier = Arc::new(Barrier::new(2));
    let (started_tx, started) = mpsc::unbounded_channel();
    let (l, b) = (log.clone(), barrier.clone());
    let names = client
        .register_tools(tools(), move |call| {
            handle(call, l.clone(), b.clone(), started_tx.clone())
        })
        .await
        .expect("tool.register");
    assert_eq!(names.len(), tools().len());
    (client, log, started)
}

fn result(events: &[snowpea_sdk::SessionEvent]) -> Value {
    events
        .iter()
        .rev()
        .find(|e| e.kind == "tool.result")
        .map(|e| e.payload.clone())
        .expect("a tool.result")
}

async fn turn(user: &Client, sid: &str, text: &str) -> snowpea_sdk::TurnOutcome {
    user.prompt_and_collect(sid, text, WAIT)
        .await
        .expect("turn")
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[tokio::test]
async fn a_second_client_lends_its_tools_to_the_agent() {
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script()),
        ..Default::default()
    })
    .await;
    let (ide, log, mut started) = host(&suite, "ide").await;
    let user = suite.client_with(|o| o.with_client_id("ui")).await;
    let approvals: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = approvals.clone();
    user.on_request("approval.request", move |p: Value| {
        let seen = seen.clone();
        async move {
            let scope = if p["scopeHint"] == "project" {
                "project"
            } else {
                "site"
            };
            seen.lock().unwrap().push(p);
            Ok(json!({"decision": "allow", "scope": scope}))
        }
    });
    let workdir = suite.workdir.path().to_string_lossy().into_owned();
    let sid = user
        .create_session_with(json!({"workdir": workdir, "mode": "auto", "hostToolsFrom": "ide"}))
        .await
        .unwrap();

    // 1. tool.list shows the host's tools; a call reaches the host with its context and the
    // answer reaches the model.
    let listed = user
        .call("tool.list", json!({"sessionId": sid}))
        .await
        .unwrap();
    let page = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "page_read")
        .unwrap()
        .clone();
    assert_eq!(
        (
            page["source"].as_str(),
            page["state"].as_str(),
            page["provider"].as_str()
        ),
        (Some("host"), Some("active"), Some("ide"))
    );
    let out = turn(&user, &sid, "use page seven").await;
    assert_eq!(out.reason.as_deref(), Some("complete"));
    let p = log.invokes.lock().unwrap().last().cloned().unwrap();
    assert_eq!(p["name"], "page_read");
    assert_eq!(p["sessionId"], sid.as_str());
    assert_eq!(p["args"], json!({"tab": 7}));
    assert_eq!(p["mode"], "auto");
    assert_eq!(p["origin"], "human");
    assert_eq!(p["userTurn"]["text"], "use page seven");
    assert_eq!(p["userTurn"]["current"], true);
    assert!(p["turnId"]
        .as_str()
        .is_some_and(|t| out.events.iter().any(|e| e.payload["turnId"] == t)));
    assert!(p["callId"].as_str().is_some_and(|c| !c.is_empty()));
    let canonical = std::fs::canonicalize(suite.workdir.path()).unwrap();
    assert_eq!(p["workdir"], canonical.to_string_lossy().as_ref());
    assert!(p["workspaceDir"].as_str().is_some_and(|w| !w.is_empty()));
    for absent in ["parentSessionId", "job", "guard"] {
        assert!(p.get(absent).is_none_or(Value::is_null), "{absent}: {p}");
    }
    let r = result(&out.events);
    assert_eq!(
        (r["ok"].as_bool(), r["meta"].clone()),
        (Some(true), json!({"pages": [1]}))
    );
    assert!(
        out.text().contains("[tool page_read ok] tab 7 says hello"),
        "{}",
        out.text()
    );

    // 2. Progress keeps a 1 s silence timeout alive for 3 s.
    let out = turn(&user, &sid, "slow progress").await;
    let r = result(&out.events);
    assert_eq!(
        (r["ok"].as_bool(), r["output"].as_str()),
        (Some(true), Some("worked 3 s")),
        "{r}"
    );
    // The progress is re-emitted as events. The gateway forwards each notification of a
    // host and its answer on separate calls, so a last one may land after the result (and is
    // dropped: the call is over) and two may swap.
    let mut chunks: Vec<String> = out
        .events
        .iter()
        .filter(|e| e.kind == "tool.progress")
        .map(|e| e.payload["chunk"].as_str().unwrap().to_owned())
        .collect();
    chunks.sort_by_key(|c| c.trim_start_matches("step ").parse::<u32>().unwrap());
    chunks.dedup();
    assert!(chunks.len() >= 10 && chunks.len() <= 15, "{chunks:?}");
    let expected: Vec<String> = (0..chunks.len()).map(|i| format!("step {i}")).collect();
    assert_eq!(chunks, expected);

    // 3. Silence: timed out, the host told tool.cancel, the model a clear error.
    let out = turn(&user, &sid, "go silent").await;
    let r = result(&out.events);
    assert_eq!(r["ok"], false);
    assert!(r["output"].as_str().unwrap().starts_with("timeout"), "{r}");
    let call_id = r["callId"].as_str().unwrap().to_owned();
    snowpea_testkit::assert_eventually!(log.cancelled.lock().unwrap().contains(&call_id));

    // 4. session.interrupt cancels the call on the host.
    while started.try_recv().is_ok() {}
    let mut events = user.events(&sid);
    let t = user.prompt(&sid, "hang on").await.unwrap();
    assert_eq!(
        within(WAIT, "hang started", started.recv())
            .await
            .as_deref(),
        Some("hang")
    );
    user.interrupt(&sid).await.unwrap();
    let out = events.wait_for_turn_done(&t, WAIT).await.unwrap();
    assert_eq!(out.reason.as_deref(), Some("interrupted"));
    let call_id = result(&out.events)["callId"].as_str().unwrap().to_owned();
    snowpea_testkit::assert_eventually!(log.cancelled.lock().unwrap().contains(&call_id));

    // 5. All-or-nothing registration; browser_* may be shadowed, shell may not.
    let bad = json!({"tools": [
        {"name": "fine_one", "description": "ok", "permission": "read"},
        {"name": "9bad", "description": "bad name", "permission": "read"}
    ]});
    let e = ide.call("tool.register", bad).await.unwrap_err();
    assert_eq!(e.code_str(), Some("invalid_params"));
    assert!(e.to_string().contains("params.tools[1].name"), "{e}");
    let e = ide
        .call(
            "tool.register",
            json!({"tools": [{"name": "shell", "description": "mine", "permission": "exec"}]}),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("params.tools[0].name"), "{e}");
    let listed = user
        .call("tool.list", json!({"sessionId": sid}))
        .await
        .unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"fine_one"),
        "nothing of a refused call is registered"
    );
    let shells: Vec<_> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "shell")
        .collect();
    assert_eq!(
        (shells.len(), shells[0]["source"].as_str()),
        (1, Some("builtin"))
    );
    let out = turn(&user, &sid, "navigate there").await;
    assert!(
        out.text()
            .contains("host navigated to \"https://x.example\""),
        "{}",
        out.text()
    );

    // 6. meta.sensitive: the model reads it; session.resume and the logs never hold it.
    let out = turn(&user, &sid, "secret please").await;
    assert!(
        out.text().contains(SECRET),
        "the model got the clear output"
    );
    let r = result(&out.events);
    assert_eq!(r["output"], "[redacted]");
    let resumed = user
        .call("session.resume", json!({"sessionId": sid, "afterSeq": 0}))
        .await
        .unwrap();
    let tool_results: Vec<&Value> = resumed["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool.result")
        .collect();
    assert!(!tool_results.is_empty());
    assert!(
        !tool_results.iter().any(|e| e.to_string().contains(SECRET)),
        "no tool.result holds it"
    );

    // 7. An image result: a contentRef in the event, the bytes from session.toolContent, the
    // image to the model.
    let out = turn(&user, &sid, "snap it").await;
    let r = result(&out.events);
    let call_id = r["callId"].as_str().unwrap();
    assert_eq!(r["content"][0]["contentRef"], format!("{call_id}:0"));
    assert!(r["content"][0].get("data").is_none());
    assert!(
        out.text().contains(&format!(
            "[image image/png, {} base64 characters, from snap]",
            PNG.len()
        )),
        "{}",
        out.text()
    );
    let c = user
        .call(
            "session.toolContent",
            json!({"sessionId": sid, "callId": call_id}),
        )
        .await
        .unwrap();
    assert_eq!(c["content"][0]["data"], PNG);
    assert_eq!(c["content"][0]["mediaType"], "image/png");

    // 8. parallel: two "safe" calls overlap (each waits for the other), two "never" do not.
    let out = turn(&user, &sid, "two safe").await;
    let oks: Vec<_> = out
        .events
        .iter()
        .filter(|e| e.kind == "tool.result")
        .map(|e| e.payload["output"].clone())
        .collect();
    assert_eq!(oks, [json!("overlapped"), json!("overlapped")]);
    let out = turn(&user, &sid, "two never").await;
    assert_eq!(
        out.events
            .iter()
            .filter(|e| e.kind == "tool.result")
            .count(),
        2
    );
    assert!(
        !log.never_overlapped.load(Ordering::SeqCst),
        "two never calls ran at once"
    );

    // 9. approval.ask: a site answer is stored and matched; a local dev server navigation is a
    // project rule only such asks match.
    let ask = |tool: &str, args: Value| json!({"sessionId": sid, "tool": tool, "permission": "send", "reason": "Press Buy", "args": args, "forceAsk": true});
    let a = ide
        .call(
            "approval.ask",
            ask("repl.click", json!({"url": "https://shop.example/cart"})),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            a["decision"].as_str(),
            a["scope"].as_str(),
            a["by"].as_str()
        ),
        (Some("allow"), Some("site"), Some("user"))
    );
    let req = approvals.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (
            req["site"].as_str(),
            req["scopeHint"].as_str(),
            req["note"].as_str()
        ),
        (
            Some("https://shop.example"),
            Some("site"),
            Some("Press Buy")
        )
    );
    assert_eq!(req["args"]["site"], "https://shop.example");
    let a = ide
        .call(
            "approval.ask",
            ask("repl.click", json!({"url": "https://shop.example/pay"})),
        )
        .await
        .unwrap();
    assert_eq!(a["by"], "allowlist", "matched by the stored site rule");
    let dev =
        json!({"reasonCode": "localDevServer", "url": "http://localhost:5173/", "project": "web"});
    let a = ide
        .call("approval.ask", ask("repl.navigate", dev.clone()))
        .await
        .unwrap();
    assert_eq!(a["scope"], "project");
    assert_eq!(
        approvals.lock().unwrap().last().unwrap()["scopeHint"],
        "project"
    );
    let a = ide
        .call("approval.ask", ask("repl.navigate", dev))
        .await
        .unwrap();
    assert_eq!(a["by"], "allowlist");
    let asked = approvals.lock().unwrap().len();
    let a = ide
        .call(
            "approval.ask",
            ask("repl.navigate", json!({"url": "http://localhost:5173/"})),
        )
        .await
        .unwrap();
    assert_eq!(
        a["by"], "user",
        "a plain navigation does not match the dev-server rule"
    );
    assert_eq!(approvals.lock().unwrap().len(), asked + 1);
    let rules = user
        .call("permission.allowlist.list", json!({"workdir": workdir}))
        .await
        .unwrap();
    let rules = rules["patterns"].as_array().unwrap();
    assert!(
        rules.iter().any(|r| r["scope"] == "project"
            && r["reasonCode"] == "localDevServer"
            && r["origin"] == "http://localhost:5173"),
        "{rules:?}"
    );
    assert!(
        rules
            .iter()
            .any(|r| r["origin"] == "https://shop.example" && r["tool"] == "repl.click"),
        "{rules:?}"
    );

    // 10. The host disconnects mid-call: the call fails "host gone" at once (its timeout is
    // the default 120 s), and its tools are gone.
    let (ide2, _log2, mut started2) = host(&suite, "ide2").await;
    let sid2 = user
        .create_session_with(json!({"workdir": workdir, "mode": "auto", "hostToolsFrom": "ide2"}))
        .await
        .unwrap();
    let mut events = user.events(&sid2);
    let t = user.prompt(&sid2, "hang again").await.unwrap();
    assert_eq!(
        within(WAIT, "hang started", started2.recv())
            .await
            .as_deref(),
        Some("hang")
    );
    ide2.close().await;
    let out = events.wait_for_turn_done(&t, WAIT).await.unwrap();
    let r = result(&out.events);
    assert_eq!(r["ok"], false);
    assert!(
        r["output"].as_str().unwrap().starts_with("host gone"),
        "{r}"
    );
    let listed = user
        .call("tool.list", json!({"sessionId": sid2}))
        .await
        .unwrap();
    assert!(!listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["source"] == "host"));

    // The secret is in no log file.
    let mut logs = Vec::new();
    files_under(&suite.home().join("logs"), &mut logs);
    assert!(!logs.is_empty(), "the suite writes log files");
    for f in logs {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        assert!(
            !text.contains(SECRET),
            "{} holds the sensitive output",
            f.display()
        );
    }
    drop(ide);
}
