use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::sync::oneshot;

use super::*;

fn relay() -> Relay {
    Relay::new(Arc::new(Store::open_in_memory().unwrap()))
}

fn approval(r: &Relay) -> (Vec<Button>, oneshot::Receiver<Value>) {
    let (tx, rx) = oneshot::channel();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let buttons = r.register(
        "ap-1",
        "gw-a",
        &tx,
        vec![
            ("Allow once", Choice::Approval("allow", "once")),
            ("Deny", Choice::Approval("deny", "once")),
        ],
    );
    (buttons, rx)
}

#[test]
fn only_the_bindings_user_may_press_and_without_one_nobody_can() {
    let r = relay();
    let (buttons, mut rx) = approval(&r);
    assert!(
        buttons.iter().all(|b| b.data.len() <= 64),
        "Telegram callback_data limit"
    );
    let allow = &buttons[0].data;
    assert_eq!(r.press("gw-a", None, "42", allow), Press::Refused);
    assert_eq!(r.press("gw-a", Some("42"), "99", allow), Press::Refused);
    assert_eq!(r.press("gw-other", Some("42"), "42", allow), Press::Unknown);
    assert!(rx.try_recv().is_err(), "nothing answered yet");
    assert_eq!(
        r.press("gw-a", Some("42"), "42", allow),
        Press::Accepted("Allowed")
    );
    assert_eq!(
        rx.try_recv().unwrap(),
        json!({"decision": "allow", "scope": "once"})
    );
    // The request is gone: its other button no longer answers anything.
    assert_eq!(
        r.press("gw-a", Some("42"), "42", &buttons[1].data),
        Press::Unknown
    );
    assert_eq!(
        r.press("gw-a", Some("42"), "42", "not-ours"),
        Press::Unknown
    );
}

#[test]
fn a_question_batch_is_answered_once_every_question_has_an_answer() {
    let r = relay();
    let (tx, mut rx) = oneshot::channel();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let answers = Arc::new(Mutex::new(vec![None, None]));
    let buttons = r.register(
        "qu-1",
        "gw-a",
        &tx,
        vec![(
            "pg",
            Choice::Question {
                index: 0,
                count: 2,
                label: "pg".into(),
                answers: answers.clone(),
            },
        )],
    );
    r.texts.lock().unwrap().push(TextWait {
        request_id: "qu-1".into(),
        binding_id: "gw-a".into(),
        channel: "7".into(),
        index: 1,
        secret: true,
        answers,
        tx,
    });
    assert_eq!(
        r.press("gw-a", Some("42"), "42", &buttons[0].data),
        Press::Accepted("Answered")
    );
    assert!(rx.try_recv().is_err(), "the text question is still open");
    assert_eq!(
        r.answer_text("gw-a", "7", Some("42"), "99", "x"),
        None,
        "not the bound user"
    );
    assert_eq!(
        r.answer_text("gw-a", "8", Some("42"), "42", "x"),
        None,
        "another chat"
    );
    assert_eq!(
        r.answer_text("gw-a", "7", Some("42"), "42", "hunter2"),
        Some(true)
    );
    assert_eq!(
        rx.try_recv().unwrap(),
        json!({"answers": [{"selected": ["pg"]}, {"text": "hunter2"}]})
    );
    assert_eq!(r.answer_text("gw-a", "7", Some("42"), "42", "again"), None);
}
