//! Attachments through a turn with the scripted provider.

use base64::Engine;
use serde_json::json;
use snowpea_proto::session::v1 as pb;

use crate::testkit::{done_reason, of_kind, Harness};

fn attachment(kind: &str) -> pb::session_prompt_params::Attachment {
    pb::session_prompt_params::Attachment {
        kind: kind.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn images_text_pages_and_files_reach_the_model_and_are_stored() {
    let mut h = Harness::new(json!({"default": {"text": "seen"}})).await;
    let sid = h.create("accept").await;
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG fake");
    let on_disk = h.workdir.join("notes.txt");
    std::fs::write(&on_disk, "from disk").unwrap();
    let p = pb::SessionPromptParams {
        session_id: sid.clone(),
        text: "what are these?".into(),
        attachments: vec![
            pb::session_prompt_params::Attachment {
                data: Some(png.clone()),
                mime_type: Some("image/png".into()),
                name: Some("shot.png".into()),
                ..attachment("image")
            },
            pb::session_prompt_params::Attachment {
                text: Some("pasted text".into()),
                name: Some("paste".into()),
                ..attachment("text")
            },
            pb::session_prompt_params::Attachment {
                url: Some("https://example.com/a".into()),
                title: Some("A page".into()),
                snapshot: Some("page body".into()),
                ..attachment("page")
            },
            pb::session_prompt_params::Attachment {
                path: Some(on_disk.to_string_lossy().into_owned()),
                ..attachment("file")
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
    let user = &of_kind(&ev, "message.user")[0]["payload"];
    assert_eq!(user["text"], "what are these?");
    assert_eq!(
        user["attachments"],
        json!([
            {"kind": "image", "name": "shot.png"},
            {"kind": "text", "name": "paste"},
            {"kind": "page", "name": "A page", "title": "A page", "url": "https://example.com/a"},
            {"kind": "file", "name": "notes.txt"}
        ])
    );
    assert!(!user.to_string().contains(&png), "no bytes in the event");
    let req = snowpea_session_llm::provider::fake_provider(&h.script)
        .unwrap()
        .received()
        .pop()
        .unwrap();
    let msg = req.messages.last().unwrap();
    assert_eq!(msg.images.len(), 1);
    assert_eq!(msg.images[0].data, png);
    for part in [
        "pasted text",
        "page body",
        "url=\"https://example.com/a\"",
        "from disk",
    ] {
        assert!(msg.content.contains(part), "{part} in {}", msg.content);
    }
    let listed = h
        .app
        .turns
        .attachments(pb::SessionAttachmentsParams {
            session_id: sid.clone(),
        })
        .await
        .unwrap()
        .attachments;
    assert_eq!(
        listed.len(),
        2,
        "the image and the file have bytes: {listed:?}"
    );
    assert_eq!(listed[0].mime, "image/png");
    assert_eq!(std::fs::read(&listed[0].path).unwrap(), b"\x89PNG fake");
    assert!(listed[1].by_path);
    assert_eq!(listed[1].message_id.as_deref(), Some(t.as_str()));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&listed[0].path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}

#[tokio::test]
async fn bad_attachments_name_the_field_and_store_nothing() {
    let h = Harness::with_settings(
        json!({"default": {"text": "seen"}}),
        json!({"providers": {"fake": {"vision": false}}}),
    )
    .await;
    let sid = h.create("accept").await;
    let cases = [
        (attachment("video"), "params.attachments[0].kind"),
        (
            pb::session_prompt_params::Attachment {
                data: Some("%%%".into()),
                mime_type: Some("image/png".into()),
                ..attachment("image")
            },
            "params.attachments[0].data",
        ),
        (
            pb::session_prompt_params::Attachment {
                data: Some("AAAA".into()),
                mime_type: Some("image/tiff".into()),
                ..attachment("image")
            },
            "params.attachments[0].mimeType",
        ),
        (
            pb::session_prompt_params::Attachment {
                path: Some("rel/x".into()),
                ..attachment("file")
            },
            "params.attachments[0].path",
        ),
        (attachment("text"), "params.attachments[0].text"),
    ];
    for (a, field) in cases {
        let err = h
            .app
            .turns
            .prompt(
                &Harness::ctx("c1", Some("cli")),
                pb::SessionPromptParams {
                    session_id: sid.clone(),
                    text: "x".into(),
                    attachments: vec![a],
                    ..Default::default()
                },
            )
            .await
            .unwrap_err();
        assert!(err.to_string().starts_with(field), "{err}");
    }
    assert!(!h.home.root().join("attachments").join(&sid).exists());
}

#[tokio::test]
async fn an_image_to_a_model_without_vision_is_a_clear_error() {
    let mut h = Harness::with_settings(
        json!({"default": {"text": "seen"}}),
        json!({"providers": {"fake": {"vision": false}}}),
    )
    .await;
    let sid = h.create("accept").await;
    let t = h
        .app
        .turns
        .prompt(
            &Harness::ctx("c1", Some("cli")),
            pb::SessionPromptParams {
                session_id: sid.clone(),
                text: "look".into(),
                attachments: vec![pb::session_prompt_params::Attachment {
                    data: Some("AAAA".into()),
                    mime_type: Some("image/png".into()),
                    ..attachment("image")
                }],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "error");
    let err = &of_kind(&ev, "error")[0]["payload"];
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("does not accept images"),
        "{err}"
    );
}
