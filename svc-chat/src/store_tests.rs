use serde_json::json;

use super::*;

fn binding(id: &str) -> BindingRow {
    BindingRow {
        binding_id: id.into(),
        platform: "telegram".into(),
        credentials_ref: "TG".into(),
        target: json!({"new_session": {"workdir": "/tmp"}}),
        channel_id: None,
        user_id: Some("42".into()),
        source: "manual".into(),
        created_ms: 1,
    }
}

#[test]
fn bindings_round_trip_and_unbind_drops_conversations() {
    let s = Store::open_in_memory().unwrap();
    s.insert_binding(&binding("gw-a")).unwrap();
    s.set_conversation("gw-a", "7", "s1", "/tmp", 0).unwrap();
    assert_eq!(s.bindings().unwrap(), vec![binding("gw-a")]);
    assert!(s.delete_binding("gw-a").unwrap());
    assert!(!s.delete_binding("gw-a").unwrap());
    assert!(s.conversations().unwrap().is_empty());
}

#[test]
fn cursors_seen_keys_and_last_seq() {
    let s = Store::open_in_memory().unwrap();
    assert_eq!(s.cursor("telegram", "TG").unwrap(), None);
    s.set_cursor("telegram", "TG", &json!({"updateId": 5}))
        .unwrap();
    s.set_cursor("telegram", "TG", &json!({"updateId": 6}))
        .unwrap();
    assert_eq!(
        s.cursor("telegram", "TG").unwrap(),
        Some(json!({"updateId": 6}))
    );
    assert!(!s.seen("slack", "S", "e:1").unwrap());
    s.mark_seen("slack", "S", "e:1").unwrap();
    s.mark_seen("slack", "S", "e:1").unwrap();
    assert!(s.seen("slack", "S", "e:1").unwrap());

    s.set_conversation("gw-a", "7", "s1", "/w", 0).unwrap();
    s.advance("s1", 9).unwrap();
    s.advance("s1", 4).unwrap(); // never moves back
    assert_eq!(s.conversation("gw-a", "7").unwrap().unwrap().last_seq, 9);
    s.set_conversation("gw-a", "7", "s2", "/w2", 0).unwrap();
    let history = s.conversation_sessions("gw-a", "7").unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(
        s.conversation("gw-a", "7").unwrap().unwrap().session_id,
        "s2"
    );
    s.delete_conversation("gw-a", "7").unwrap();
    assert_eq!(s.conversation("gw-a", "7").unwrap(), None);
}

#[test]
fn a_deleted_session_is_forgotten_by_its_conversations() {
    let s = Store::open_in_memory().unwrap();
    s.insert_binding(&binding("gw-a")).unwrap();
    s.set_conversation("gw-a", "7", "s1", "/tmp", 0).unwrap();
    s.set_conversation("gw-a", "8", "s2", "/tmp", 0).unwrap();
    assert_eq!(
        s.forget_session("s1").unwrap(),
        vec![("gw-a".to_owned(), "7".to_owned())]
    );
    assert!(s.conversation("gw-a", "7").unwrap().is_none());
    assert!(s.conversation("gw-a", "8").unwrap().is_some());
    assert!(s.conversation_sessions("gw-a", "7").unwrap().is_empty());
    assert_eq!(s.bindings().unwrap().len(), 1, "the binding stays");
}
