//! What clients are shown of a prompt (issue 32 items 3 and 4): `message.user` carries
//! exactly the documented fields — `text` as typed, `attachments` as listed, `refs`,
//! `steered`, a command's `expansion` — while what only the model sees (the rendered page,
//! attached files, `@` references, a skill's body) reaches the model and the history of
//! later turns, never the wire.

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::testkit::{done_reason, of_kind, Harness};

/// The fields `message.user` may carry: the spec's, plus the wire-only `turnId`.
const DOCUMENTED: &[&str] = &[
    "attachments",
    "expansion",
    "kind",
    "refs",
    "steered",
    "text",
    "turnId",
];

fn put(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The last model request's user messages.
fn last_user_texts(h: &Harness) -> Vec<String> {
    let last = snowpea_session_llm::provider::fake_provider(&h.script)
        .unwrap()
        .received()
        .pop()
        .expect("a model call");
    last.messages
        .iter()
        .filter(|m| m.role == snowpea_session_llm::provider::Role::User)
        .map(|m| m.content.clone())
        .collect()
}

fn assert_documented(payload: &Value) {
    for key in payload.as_object().unwrap().keys() {
        assert!(
            DOCUMENTED.contains(&key.as_str()),
            "undocumented message.user field {key:?}: {payload}"
        );
    }
}

/// Regression: `message.user` carried an undocumented `input` with the rendered page,
/// the attached file's contents and the `@` reference's lines, to every client.
#[tokio::test]
async fn message_user_shows_clients_only_the_documented_fields() {
    let mut h = Harness::new(json!({"default": {"text": "seen"}})).await;
    std::fs::write(h.workdir.join("notes.txt"), "NOTES-FROM-DISK").unwrap();
    std::fs::write(h.workdir.join("ref.txt"), "REFERENCED-LINE\n").unwrap();
    let sid = h.create("accept").await;
    let p = pb::SessionPromptParams {
        session_id: sid.clone(),
        text: "compare @ref.txt with these".into(),
        attachments: vec![
            pb::session_prompt_params::Attachment {
                kind: "page".into(),
                url: Some("https://example.com/a".into()),
                title: Some("A page".into()),
                snapshot: Some("RENDERED-PAGE-BODY".into()),
                ..Default::default()
            },
            pb::session_prompt_params::Attachment {
                kind: "file".into(),
                path: Some(h.workdir.join("notes.txt").to_string_lossy().into_owned()),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let t = h
        .app
        .turns
        .prompt(&Harness::ctx("c1", Some("cli")), p)
        .await
        .unwrap();
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "complete");
    let hidden = ["RENDERED-PAGE-BODY", "NOTES-FROM-DISK", "REFERENCED-LINE"];
    // What the model got.
    let given = last_user_texts(&h).pop().unwrap();
    for part in hidden {
        assert!(given.contains(part), "{part} reaches the model: {given}");
    }
    // What every client is shown, live and through session.resume.
    let live = &of_kind(&ev, "message.user")[0]["payload"];
    h.app.flush().await.unwrap();
    let stored = h
        .app
        .events
        .after(&sid, 0)
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "message.user")
        .unwrap()
        .payload;
    for payload in [live, &stored] {
        assert_documented(payload);
        assert_eq!(payload["text"], "compare @ref.txt with these");
        assert_eq!(
            payload["attachments"],
            json!([
                {"kind": "page", "name": "A page", "title": "A page", "url": "https://example.com/a"},
                {"kind": "file", "name": "notes.txt"}
            ])
        );
        assert_eq!(payload["refs"][0]["path"], "ref.txt");
        for part in hidden {
            assert!(
                !payload.to_string().contains(part),
                "{part} shown: {payload}"
            );
        }
    }
    // The next turn's history still has what the model was given.
    let t = h.prompt(&sid, "and now?").await;
    h.until_done(&t, |_| None).await;
    let first = &last_user_texts(&h)[0];
    for part in hidden {
        assert!(first.contains(part), "{part} in the history: {first}");
    }
}

/// Regression: `/<skill> now` showed `message.user{text: "Use the skill …"}` with no
/// `expansion`, a markdown command its expanded body as `text`.
#[tokio::test]
async fn commands_keep_text_as_typed_and_carry_their_body_in_expansion() {
    let mut h = Harness::new(json!({"default": {"text": "done"}})).await;
    put(
        &h.workdir.join(".snowpea/skills/pea-skill/SKILL.md"),
        "---\nname: pea-skill\ndescription: Explains peas in a scripted test\n---\nSKILL-BODY for $ARGUMENTS\n",
    );
    put(
        &h.workdir.join(".snowpea/commands/greet.md"),
        "---\ndescription: Greets someone\n---\nSay hello to $ARGUMENTS\n",
    );
    let sid = h.create("accept").await;
    for (typed, kind, name, body) in [
        ("/pea-skill now", "skill", "pea-skill", "SKILL-BODY for now"),
        ("/greet Bob", "command", "greet", "Say hello to Bob"),
    ] {
        let t = h.prompt(&sid, typed).await;
        let ev = h.until_done(&t, |_| None).await;
        assert_eq!(done_reason(&ev), "complete", "{typed}: {ev:?}");
        let user = &of_kind(&ev, "message.user")[0]["payload"];
        assert_documented(user);
        assert_eq!(user["text"], typed);
        let expansion = &user["expansion"];
        assert_eq!(expansion["kind"], kind, "{user}");
        assert_eq!(expansion["name"], name, "{user}");
        let text = expansion["text"].as_str().unwrap();
        assert!(text.contains(body), "{typed}: {text}");
        // The model was given the body, not the command.
        let given = last_user_texts(&h).pop().unwrap();
        assert_eq!(given, text, "{typed}");
    }
    // Later turns' history has the bodies the model was given.
    let t = h.prompt(&sid, "thanks").await;
    h.until_done(&t, |_| None).await;
    let history = last_user_texts(&h);
    assert!(history[0].contains("SKILL-BODY for now"), "{history:?}");
    assert_eq!(history[1], "Say hello to Bob");
}

/// Migration 10 moves the `input` earlier versions stored in `message.user` payloads (and
/// so showed every client) beside the event, where only the history reads it.
#[test]
fn migration_10_moves_stored_inputs_off_the_wire() {
    use crate::store::{self, events::EventRow};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("session.db");
    let old = snowpea_common::db::open(&path, &store::MIGRATIONS[..9]).unwrap();
    let row = |seq: i64, kind: &str, payload: Value| EventRow {
        session_id: "s1".into(),
        seq,
        kind: kind.into(),
        payload: payload.to_string(),
        ts: "2026-01-01T00:00:00Z".into(),
    };
    for r in [
        row(
            1,
            "message.user",
            json!({"turnId": "t1", "text": "see @a.txt", "input": "see @a.txt\n<ref>SECRET</ref>"}),
        ),
        row(2, "message.user", json!({"turnId": "t2", "text": "plain"})),
        row(3, "message.done", json!({"turnId": "t2", "text": "input"})),
    ] {
        store::events::insert(&old, &r).unwrap();
    }
    drop(old);
    let conn = store::open(&path).unwrap();
    let shown: Vec<Value> = store::events::after(&conn, "s1", 0)
        .unwrap()
        .into_iter()
        .map(|r| serde_json::from_str(&r.payload).unwrap())
        .collect();
    assert_eq!(
        shown,
        [
            json!({"turnId": "t1", "text": "see @a.txt"}),
            json!({"turnId": "t2", "text": "plain"}),
            json!({"turnId": "t2", "text": "input"}),
        ]
    );
    let kept = store::events::of_kinds(&conn, "s1", &["message.user"]).unwrap();
    assert_eq!(
        kept[0]
            .2
            .as_deref()
            .map(|m| serde_json::from_str::<Value>(m).unwrap()),
        Some(json!({"input": "see @a.txt\n<ref>SECRET</ref>"}))
    );
    assert_eq!(kept[1].2, None);
}
