//! Chat bindings through the real suite (issue 22): svc-chat against the fake platforms of the
//! test kit (`snowpea_testkit::fake_chat`, base URLs from `settings.gateway.<platform>.baseUrl`)
//! with the scripted provider. One suite per test; the tests that kill svc-chat or need other
//! settings have their own.

use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::{Client, Notification};
use snowpea_testkit::assert_eventually;
use snowpea_testkit::fake_chat::{FakeDiscord, FakeSlack, FakeTelegram};
use tokio::sync::broadcast::Receiver;

const T: Duration = Duration::from_secs(30);
const TG_TOKEN: &str = "123456:telegram-secret-token";

fn script() -> Value {
    json!({"steps": [
        // agent.create: the drafted definition of the named agent `helper`.
        {"match": "define the helper agent", "text": "{\"name\": \"helper\", \"description\": \"Helps on chat\", \"model\": \"inherit\", \"tools\": \"*\", \"prompt\": \"You help.\"}"},
        {"match": "hello", "text": "Hello **there** <friend>", "repeat": true},
        {"match": "go", "repeat": true, "tool_calls": [{"name": "shell", "arguments": {"command": "touch ran.txt"}}]},
                {"after_tool": "shell", "text": "finished"},
        {"match": "quiz", "tool_calls": [{"name": "ask_user", "arguments": {"questions": [
            {"question": "Which database?", "options": [{"label": "sqlite"}, {"label": "pg"}]},
            {"question": "Why?"}
        ]}}]},
        {"after_tool": "ask_user", "text": "noted"},
        {"match": "slow", "delaySec": 2, "text": "slow answer", "repeat": true},
        {"match": "long", "text": "word ".repeat(2000), "repeat": true}
    ], "default": {"text": "echo"}})
}

async fn call(c: &Client, method: &str, params: Value) -> Result<Value, snowpea_sdk::Error> {
    tokio::time::timeout(T, c.call(method, params))
        .await
        .expect("call timed out")
}

async fn ok(c: &Client, method: &str, params: Value) -> Value {
    call(c, method, params.clone())
        .await
        .unwrap_or_else(|e| panic!("{method} {params}: {e:?}"))
}

/// Asserts `invalid_params` naming `field`.
async fn invalid(c: &Client, method: &str, params: Value, field: &str) {
    let e = call(c, method, params.clone()).await.expect_err("refused");
    assert_eq!(
        e.code_str(),
        Some("invalid_params"),
        "{method} {params}: {e}"
    );
    assert!(e.to_string().contains(field), "{params}: {e} names {field}");
}

fn write_credentials(suite: &Suite, doc: Value) {
    let path = suite.home().join("credentials.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The next `gateway.event` of `binding` with `kind` (others are skipped).
async fn gateway_event(rx: &mut Receiver<Notification>, binding: &str, kind: &str) -> Value {
    tokio::time::timeout(T, async {
        loop {
            let n = rx.recv().await.expect("notifications");
            if n.method == "gateway.event"
                && n.params["bindingId"] == binding
                && n.params["kind"] == kind
            {
                return n.params["payload"].clone();
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("gateway.event {kind} of {binding}"))
}

/// The callback data of the button labelled `label` in the last keyboard sent to `chat`.
fn button(fake: &FakeTelegram, chat: i64, label: &str) -> Option<String> {
    fake.sent()
        .iter()
        .rev()
        .filter(|m| m["chat_id"] == json!(chat))
        .find_map(|m| {
            m["reply_markup"]["inline_keyboard"][0]
                .as_array()?
                .iter()
                .find(|b| b["text"] == label)?["callback_data"]
                .as_str()
                .map(str::to_owned)
        })
}

fn count(texts: &[String], needle: &str) -> usize {
    texts.iter().filter(|t| t.contains(needle)).count()
}

#[tokio::test]
async fn telegram_bindings_conversations_approvals_commands_sync_and_hostile_input() {
    let fake = FakeTelegram::start(TG_TOKEN).await;
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script()),
        settings: Some(
            json!({"gateway": {"telegram": {"baseUrl": fake.base_url(), "pollTimeoutSec": 1, "maxAttachmentBytes": 4096}}}),
        ),
        ..Default::default()
    })
    .await;
    write_credentials(&suite, json!({"tg": TG_TOKEN}));
    let c = suite.client().await;
    let mut rx = c.subscribe();
    let wd = suite.workdir.path().display().to_string();

    // Bad input names the field.
    let good = json!({"platform": "telegram", "credentialsRef": "tg",
                      "target": {"new_session": {"workdir": wd, "mode": "accept"}}, "userId": "42"});
    let with = |k: &str, v: Value| {
        let mut p = good.clone();
        p[k] = v;
        p
    };
    invalid(
        &c,
        "gateway.bind",
        with("platform", json!("irc")),
        "params.platform",
    )
    .await;
    invalid(
        &c,
        "gateway.bind",
        with("target", json!({"agent": "a", "session": "s"})),
        "params.target",
    )
    .await;
    invalid(
        &c,
        "gateway.bind",
        with("target", json!({"new_session": {"workdir": "rel"}})),
        "params.target.new_session.workdir",
    )
    .await;
    invalid(
        &c,
        "gateway.bind",
        with("target", json!({"bogus": 1})),
        "params.target.bogus",
    )
    .await;
    invalid(
        &c,
        "gateway.bind",
        with("credentialsRef", json!("NO_SUCH_CREDENTIAL_22")),
        "params.credentialsRef",
    )
    .await;
    let e = call(
        &c,
        "gateway.unbind",
        json!({"bindingId": "gw-000000000000"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code_str(), Some("not_found"), "{e}");

    // Bind; the connection comes up; the token never appears.
    let id = ok(&c, "gateway.bind", good.clone()).await["bindingId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(id.starts_with("gw-"), "{id}");
    gateway_event(&mut rx, &id, "connected").await;
    let list = ok(&c, "gateway.list", json!({})).await;
    let b = &list["bindings"][0];
    assert_eq!(
        (
            b["platform"].as_str(),
            b["source"].as_str(),
            b["state"].as_str()
        ),
        (Some("telegram"), Some("manual"), Some("active")),
        "{list}"
    );
    assert_eq!(b["target"], format!("new_session:{wd}"));
    assert_eq!(b["userId"], "42");
    assert!(!list.to_string().contains("telegram-secret"), "{list}");

    // A message in → a turn → the answer out, converted to Telegram HTML.
    fake.message(7, 42, "hello");
    assert_eventually!(
        count(&fake.texts_to(7), "<b>there</b> &lt;friend&gt;") == 1,
        "answer: {:?}",
        fake.sent()
    );
    assert!(fake.sent().iter().any(|m| m["parse_mode"] == "HTML"));
    let inbound = gateway_event(&mut rx, &id, "message").await;
    assert_eq!(inbound["direction"], "in", "{inbound}");
    assert_eventually!(fake
        .actions()
        .iter()
        .any(|a| a["action"] == "typing" && a["chat_id"] == 7));
    assert_eventually!(fake.unconfirmed() == 0, "update confirmed");

    // A long answer is split under Telegram's limit.
    fake.message(7, 42, "long");
    assert_eventually!(
        fake.texts_to(7)
            .iter()
            .filter(|t| t.starts_with("word"))
            .count()
            >= 3
    );
    assert!(fake.texts_to(7).iter().all(|t| t.chars().count() <= 4096));

    // Attachments become prompt attachments; one over maxAttachmentBytes is left out, saying so.
    fake.document(7, 42, "see file", "notes.txt", b"plain file content");
    assert_eventually!(
        count(&fake.texts_to(7), "echo") == 1,
        "{:?}",
        fake.texts_to(7)
    );
    let sessions = ok(&c, "session.list", json!({})).await;
    let sid = sessions["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = c.resume(&sid, 0).await.unwrap();
    let user = events
        .iter()
        .filter(|e| e.kind == "message.user")
        .find(|e| e.payload["text"] == "see file")
        .expect("message.user of the document");
    assert_eq!(
        user.payload["attachments"][0]["name"], "notes.txt",
        "{}",
        user.payload
    );
    fake.document(7, 42, "big one", "big.bin", &[7u8; 5000]);
    assert_eventually!(
        count(
            &fake.texts_to(7),
            "Attachment left out: big.bin: larger than 4096 bytes"
        ) == 1
    );
    assert_eventually!(count(&fake.texts_to(7), "echo") == 2);

    // An approval: refused for another user's button, answered by the bound user.
    fake.message(7, 42, "go");
    let allow = snowpea_testkit::eventually(T, "approval buttons", || async {
        button(&fake, 7, "Allow once")
    })
    .await;
    fake.press(7, 99, &allow);
    assert_eventually!(fake.callback_answers().iter().any(|a| a["text"]
        .as_str()
        .unwrap_or("")
        .contains("Only the bound user")));
    let refused = gateway_event(&mut rx, &id, "error").await;
    assert_eq!(refused["userId"], "99", "{refused}");
    assert!(!suite.workdir.path().join("ran.txt").exists());
    fake.press(7, 42, &allow);
    assert_eventually!(
        count(&fake.texts_to(7), "finished") == 1,
        "{:?}",
        fake.texts_to(7)
    );
    assert!(suite.workdir.path().join("ran.txt").exists());

    // A question: options as buttons, a free-text one answered by the bound user's next message.
    fake.message(7, 42, "quiz");
    let pg =
        snowpea_testkit::eventually(T, "question buttons", || async { button(&fake, 7, "pg") })
            .await;
    fake.press(7, 42, &pg);
    assert_eventually!(count(&fake.texts_to(7), "(reply with your answer)") == 1);
    fake.message(7, 42, "because");
    assert_eventually!(
        count(&fake.texts_to(7), "noted") == 1,
        "{:?}",
        fake.texts_to(7)
    );
    assert_eq!(count(&fake.texts_to(7), "Answered."), 1);

    // Chat commands.
    let sessions_before = ok(&c, "session.list", json!({})).await["sessions"]
        .as_array()
        .unwrap()
        .len();
    fake.message(7, 42, "/new");
    assert_eventually!(count(&fake.texts_to(7), "Started a new session") == 1);
    assert_eventually!(
        ok(&c, "session.list", json!({})).await["sessions"]
            .as_array()
            .unwrap()
            .len()
            == sessions_before + 1
    );
    fake.message(7, 42, "/sessions");
    assert_eventually!(count(&fake.texts_to(7), "Sessions of this chat") == 1);
    let listing = fake
        .texts_to(7)
        .into_iter()
        .find(|t| t.contains("Sessions of this chat"))
        .unwrap();
    assert!(
        listing.contains("1. ") && listing.contains("2. "),
        "{listing}"
    );
    fake.message(7, 42, "slow");
    assert_eventually!(fake.actions().len() >= 2);
    fake.message(7, 42, "/stop");
    assert_eventually!(count(&fake.texts_to(7), "Stopped.") == 1);
    fake.message(7, 42, "/status");
    assert_eventually!(count(&fake.texts_to(7), &format!("Binding {id}")) == 1);
    fake.message(7, 42, "/projects");
    assert_eventually!(count(&fake.texts_to(7), &wd) >= 1);

    // Hostile input never crashes the service: invalid UTF-8, an unreadable update, a huge
    // message, control characters.
    let pid = suite.process("chat").0;
    fake.raw(|id| {
        let mut b = format!("{{\"update_id\":{id},\"message\":{{\"message_id\":1,\"date\":0,\"chat\":{{\"id\":7}},\"from\":{{\"id\":42}},\"text\":\"bad ").into_bytes();
        b.extend_from_slice(&[0xff, 0xfe, 0x00, 0xc3]);
        b.extend_from_slice(b"\"}}");
        b
    });
    fake.raw(|_| b"{ this is not json \x01\x02".to_vec());
    fake.message(7, 42, &"x".repeat(200_000));
    fake.message(7, 42, "\u{0}\u{1}\u{7f}binary\u{fffe}");
    fake.message(7, 42, "hello");
    assert_eventually!(
        count(&fake.texts_to(7), "<b>there</b>") == 2,
        "{:?}",
        fake.texts_to(7)
    );
    assert_eventually!(count(&fake.texts_to(7), "too long") == 1);
    assert_eq!(suite.process("chat").0, pid, "svc-chat did not restart");

    // 429 with retry-after and a dropped API connection.
    fake.rate_limit_next(2);
    fake.message(7, 42, "hello");
    assert_eventually!(count(&fake.texts_to(7), "<b>there</b>") == 3);
    assert!(fake.rate_limited() >= 2);
    fake.drop_next_polls(2);
    gateway_event(&mut rx, &id, "disconnected").await;
    gateway_event(&mut rx, &id, "connected").await;
    fake.message(7, 42, "hello");
    assert_eventually!(count(&fake.texts_to(7), "<b>there</b>") == 4);

    // gateway.sync: settings make an automatic binding; hand-made ones are never touched.
    // First the method itself (the file edited by hand, so nobody else syncs), then a
    // settings.set of `gateway`, which svc-chat follows by itself.
    let auto_bindings = |list: &Value| -> Vec<Value> {
        list["bindings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["source"] == "auto")
            .cloned()
            .collect()
    };
    let settings_path = suite.home().join("settings.json");
    let mut settings: Value =
        serde_json::from_slice(&std::fs::read(&settings_path).unwrap()).unwrap();
    let synced = ok(&c, "gateway.sync", json!({})).await;
    assert_eq!(
        (&synced["added"], &synced["removed"]),
        (&json!([]), &json!([])),
        "{synced}"
    );
    settings["gateway"]["telegram"]["enabled"] = json!(true);
    settings["gateway"]["telegram"]["token"] = json!(TG_TOKEN);
    settings["gateway"]["telegram"]["userId"] = json!("42");
    std::fs::write(&settings_path, settings.to_string()).unwrap();
    let synced = ok(&c, "gateway.sync", json!({})).await;
    assert_eq!(synced["added"], json!(["telegram"]), "{synced}");
    let auto = auto_bindings(&ok(&c, "gateway.list", json!({})).await);
    assert_eq!(auto.len(), 1, "{auto:?}");
    assert_eq!(
        (auto[0]["platform"].as_str(), auto[0]["userId"].as_str()),
        (Some("telegram"), Some("42"))
    );
    assert!(!auto[0].to_string().contains("telegram-secret"), "{auto:?}");
    assert_eq!(
        ok(&c, "gateway.sync", json!({})).await["kept"],
        json!(["telegram"])
    );
    settings["gateway"]["telegram"]["enabled"] = json!(false);
    std::fs::write(&settings_path, settings.to_string()).unwrap();
    let synced = ok(&c, "gateway.sync", json!({})).await;
    assert_eq!(synced["removed"], json!(["telegram"]), "{synced}");
    let list = ok(&c, "gateway.list", json!({})).await;
    assert_eq!(list["bindings"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["bindings"][0]["bindingId"], id.as_str());
    // settings.set of `gateway` reaches svc-chat, which syncs by itself.
    ok(
        &c,
        "settings.set",
        json!({"patch": {"gateway": {"telegram": {"enabled": true}}}}),
    )
    .await;
    assert_eventually!(auto_bindings(&ok(&c, "gateway.list", json!({})).await).len() == 1);
    ok(
        &c,
        "settings.set",
        json!({"patch": {"gateway": {"telegram": {"enabled": false}}}}),
    )
    .await;
    assert_eventually!(auto_bindings(&ok(&c, "gateway.list", json!({})).await).is_empty());
    assert_eq!(
        ok(&c, "gateway.list", json!({})).await["bindings"][0]["bindingId"],
        id.as_str()
    );

    // Unbind.
    assert_eq!(
        ok(&c, "gateway.unbind", json!({"bindingId": id})).await["ok"],
        true
    );
    assert_eq!(
        ok(&c, "gateway.list", json!({})).await["bindings"],
        json!([])
    );
    let e = call(&c, "gateway.unbind", json!({"bindingId": id}))
        .await
        .unwrap_err();
    assert_eq!(e.code_str(), Some("not_found"));

    // The token never reached a log.
    let logs = std::fs::read_to_string(suite.home().join("logs/chat.log")).unwrap_or_default();
    assert!(!logs.contains("telegram-secret"), "token in chat.log");
}

#[tokio::test]
async fn kill9_of_svc_chat_mid_conversation_loses_nothing_and_answers_nothing_twice() {
    let fake = FakeTelegram::start(TG_TOKEN).await;
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script()),
        settings: Some(
            json!({"gateway": {"telegram": {"baseUrl": fake.base_url(), "pollTimeoutSec": 1}}}),
        ),
        env: vec![("TELEGRAM_BOT_TOKEN".into(), TG_TOKEN.into())],
    })
    .await;
    let c = suite.client().await;
    let wd = suite.workdir.path().display().to_string();
    // As docs/OPERATIONS.md shows it: the token in the daemon's environment, bound from the
    // shell.
    let out = suite.snowpea(&[
        "gateway",
        "bind",
        "telegram",
        "--credentials",
        "TELEGRAM_BOT_TOKEN",
        "--workdir",
        &wd,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bound: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = bound["bindingId"].as_str().unwrap().to_owned();
    let out = suite.snowpea(&["gateway", "list"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id));
    assert!(
        suite.status().to_string().contains("\"chat\""),
        "supervisor status lists svc-chat"
    );
    fake.message(5, 1, "hello");
    assert_eventually!(count(&fake.texts_to(5), "there") == 1);

    // A turn is running (its prompt accepted) when svc-chat dies; one more message arrives
    // while it is down.
    fake.message(5, 1, "slow");
    assert_eventually!(fake.unconfirmed() == 0, "the slow prompt was accepted");
    let old = suite.kill9("chat");
    fake.message(5, 1, "hello again");
    suite.wait_restarted("chat", old).await;

    let list = ok(&c, "gateway.list", json!({})).await;
    assert_eq!(list["bindings"][0]["bindingId"], id.as_str(), "{list}");
    assert_eventually!(
        count(&fake.texts_to(5), "slow answer") == 1,
        "{:?}",
        fake.texts_to(5)
    );
    assert_eventually!(
        count(&fake.texts_to(5), "there") == 2,
        "{:?}",
        fake.texts_to(5)
    );
    assert_eventually!(ok(&c, "gateway.list", json!({})).await["bindings"][0]["state"] == "active");
    // Quiet for a moment: nothing is sent again.
    fake.message(5, 1, "ping");
    assert_eventually!(count(&fake.texts_to(5), "echo") == 1);
    let texts = fake.texts_to(5);
    assert_eq!(count(&texts, "slow answer"), 1, "{texts:?}");
    assert_eq!(count(&texts, "there"), 2, "{texts:?}");
    // One session for the (binding, chat) pair across the restart.
    let sessions = ok(&c, "session.list", json!({})).await;
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        1,
        "{sessions}"
    );
}

#[tokio::test]
async fn discord_and_slack_round_trips_with_resume_rate_limits_and_buttons() {
    let discord = FakeDiscord::start("discord-secret").await;
    let slack = FakeSlack::start("xapp-secret", "xoxb-secret").await;
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script()),
        settings: Some(json!({"gateway": {
            "discord": {"baseUrl": discord.base_url()},
            "slack": {"baseUrl": slack.base_url()},
        }})),
        env: vec![("SLACK_TOKENS_22".into(), "xapp-secret xoxb-secret".into())],
    })
    .await;
    write_credentials(&suite, json!({"dc": {"token": "discord-secret"}}));
    let c = suite.client().await;
    let mut rx = c.subscribe();
    let wd = suite.workdir.path().display().to_string();

    // Discord.
    let dc = ok(
        &c,
        "gateway.bind",
        json!({"platform": "discord", "credentialsRef": "dc",
        "target": {"new_session": {"workdir": wd, "mode": "accept"}}, "userId": "u1"}),
    )
    .await["bindingId"]
        .as_str()
        .unwrap()
        .to_owned();
    gateway_event(&mut rx, &dc, "connected").await;
    discord.message("c1", "u1", "hello");
    assert_eventually!(
        count(&discord.texts_to("c1"), "Hello **there**") == 1,
        "{:?}",
        discord.sent()
    );
    assert_eventually!(discord.typing().iter().any(|c| c == "c1"), "typing shown");
    // Dropped gateway: resumed with the committed sequence, the message sent meanwhile
    // answered once.
    let resumes_before = discord.sessions().1.len();
    discord.drop_connections();
    discord.message("c1", "u1", "hello");
    assert_eventually!(
        discord.sessions().1.len() > resumes_before,
        "resumed: {:?}",
        discord.sessions()
    );
    assert!(
        discord.sessions().1[resumes_before] >= 2,
        "{:?}",
        discord.sessions()
    );
    assert_eventually!(count(&discord.texts_to("c1"), "Hello **there**") == 2);
    assert_eq!(discord.sessions().0, 1, "no second identify");
    // 429 on the REST call.
    discord.rate_limit_next(1);
    discord.message("c1", "u1", "ping");
    assert_eventually!(count(&discord.texts_to("c1"), "echo") == 1);
    assert!(discord.rate_limited() >= 1);
    // Approval buttons (components), refused for another user, allowed by u1.
    discord.message("c1", "u1", "go");
    let allow = snowpea_testkit::eventually(T, "discord buttons", || async {
        discord.sent().iter().rev().find_map(|(_, b)| {
            b["components"][0]["components"]
                .as_array()?
                .iter()
                .find(|x| x["label"] == "Allow once")?["custom_id"]
                .as_str()
                .map(str::to_owned)
        })
    })
    .await;
    discord.press("c1", "intruder", &allow);
    assert_eventually!(discord.callbacks().iter().any(|x| x["data"]["content"]
        .as_str()
        .unwrap_or("")
        .contains("Only the bound user")));
    discord.press("c1", "u1", &allow);
    assert_eventually!(count(&discord.texts_to("c1"), "finished") == 1);

    // Slack, credentials from an environment variable.
    slack.rate_limit_next(1);
    let sl = ok(
        &c,
        "gateway.bind",
        json!({"platform": "slack", "credentialsRef": "SLACK_TOKENS_22",
        "target": {"new_session": {"workdir": wd}}, "channelId": "C1"}),
    )
    .await["bindingId"]
        .as_str()
        .unwrap()
        .to_owned();
    gateway_event(&mut rx, &sl, "connected").await;
    assert!(slack.rate_limited() >= 1);
    let env = slack.message("C1", "U1", "hello");
    assert_eventually!(
        count(&slack.texts_to("C1"), "Hello *there*") == 1,
        "{:?}",
        slack.posted()
    );
    assert_eventually!(slack.acked().contains(&env));
    // Another channel is not this binding's.
    slack.message("C2", "U1", "hello");
    slack.drop_connections();
    assert_eventually!(slack.opens() >= 2);
    slack.message("C1", "U1", "ping");
    assert_eventually!(count(&slack.texts_to("C1"), "echo") == 1);
    assert!(slack.texts_to("C2").is_empty());
    assert_eq!(count(&slack.texts_to("C1"), "Hello"), 1);
    // Block Kit approval buttons; this binding has no userId, so nobody may answer from chat.
    slack.message("C1", "U1", "go");
    let allow = snowpea_testkit::eventually(T, "slack buttons", || async {
        slack.posted().iter().rev().find_map(|p| {
            p["blocks"][1]["elements"]
                .as_array()?
                .iter()
                .find(|e| e["text"]["text"] == "Allow once")?["value"]
                .as_str()
                .map(str::to_owned)
        })
    })
    .await;
    slack.press("C1", "U1", &allow);
    assert_eventually!(slack.responses().iter().any(|r| r["text"]
        .as_str()
        .unwrap_or("")
        .contains("Only the bound user")));
    let list = ok(&c, "gateway.list", json!({})).await.to_string();
    assert!(!list.contains("secret"), "{list}");
}

/// `agent.bindChannel` routes a channel to a named agent's session, kept across messages.
/// svc-chat asks svc-session's `ChannelInternalService.ResolveChannel`, which answers the
/// named agent's own session for a channel bound with `agent.bindChannel`.
#[tokio::test]
async fn a_named_agent_bound_by_agent_bind_channel_keeps_its_session() {
    let fake = FakeTelegram::start(TG_TOKEN).await;
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script()),
        settings: Some(
            json!({"gateway": {"telegram": {"baseUrl": fake.base_url(), "pollTimeoutSec": 1}}}),
        ),
        ..Default::default()
    })
    .await;
    write_credentials(&suite, json!({"telegram": TG_TOKEN}));
    let c = suite.client().await;
    // agent.create drafts in the caller's session: one on this connection first.
    c.create_session(suite.workdir.path(), Some("auto"))
        .await
        .unwrap();
    let created = ok(
        &c,
        "agent.create",
        json!({"description": "define the helper agent", "named": true}),
    )
    .await;
    assert_eq!(created["name"], "helper", "{created}");
    ok(
        &c,
        "agent.bindChannel",
        json!({"name": "helper", "channel": "telegram:9"}),
    )
    .await;
    let id = ok(
        &c,
        "gateway.bind",
        json!({"platform": "telegram", "credentialsRef": "telegram",
        "target": {"agent": "helper"}}),
    )
    .await["bindingId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(id.starts_with("gw-"));
    fake.message(9, 3, "hello");
    assert_eventually!(count(&fake.texts_to(9), "there") == 1);
    fake.message(9, 3, "hello");
    assert_eventually!(count(&fake.texts_to(9), "there") == 2);
    let sessions = ok(&c, "session.list", json!({})).await;
    let agent_sessions: Vec<&Value> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["agent"] == "helper")
        .collect();
    assert_eq!(agent_sessions.len(), 1, "{sessions}");
    // It is the named agent's own session (agent.list), which both messages went to.
    let listed = ok(&c, "agent.list", json!({})).await;
    let helper = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "named" && a["name"] == "helper")
        .unwrap_or_else(|| panic!("{listed}"))
        .clone();
    assert_eq!(
        helper["sessionId"], agent_sessions[0]["sessionId"],
        "{listed}"
    );
    assert_eq!(helper["channels"], json!(["telegram:9"]), "{listed}");

    // QA: bind checks its target, and deleting a session or an agent removes the bindings
    // targeting it (svc-session tells svc-chat), with gateway.event{removed}.
    invalid(
        &c,
        "gateway.bind",
        json!({"platform": "telegram", "credentialsRef": "telegram", "target": {"session": "s_gone"}}),
        "params.target.session",
    )
    .await;
    invalid(
        &c,
        "gateway.bind",
        json!({"platform": "telegram", "credentialsRef": "telegram", "target": {"agent": "nobody"}}),
        "params.target.agent",
    )
    .await;
    let mut rx = c.subscribe();
    let kept = c
        .create_session(suite.workdir.path(), Some("auto"))
        .await
        .unwrap();
    let on_session = ok(
        &c,
        "gateway.bind",
        json!({"platform": "telegram", "credentialsRef": "telegram", "channelId": "77",
        "target": {"session": kept}}),
    )
    .await["bindingId"]
        .as_str()
        .unwrap()
        .to_owned();
    ok(&c, "session.deleteSaved", json!({"sessionId": kept})).await;
    let removed = gateway_event(&mut rx, &on_session, "removed").await;
    assert_eq!(removed["target"], format!("session:{kept}"), "{removed}");
    ok(&c, "agent.delete", json!({"name": "helper"})).await;
    gateway_event(&mut rx, &id, "removed").await;
    let left = ok(&c, "gateway.list", json!({})).await;
    assert_eq!(left["bindings"], json!([]), "{left}");
}
