//! Oversized client strings are refused naming their field before anything is stored or
//! started, and a session listing never carries a megabyte prompt back (QA of issues 18,
//! 19 and 21).

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use crate::testkit::Harness;
use snowpea_session_error::Error;

fn field_of(e: Error) -> String {
    match e {
        Error::InvalidParams { field, .. } => field,
        other => panic!("expected invalid_params, got {other:?}"),
    }
}

#[tokio::test]
async fn huge_names_tasks_and_tools_name_their_field_and_listings_clip_prompts() {
    let mut h = Harness::new(json!({"default": {"text": "ok"}})).await;
    let sid = h.create("accept").await;
    let ctx = Harness::ctx("c1", Some("tui"));
    let long = |n: usize| "n".repeat(n);

    let e = h
        .app
        .turns
        .command(
            &ctx,
            pb::CommandRunParams {
                session_id: sid.clone(),
                name: long(crate::turn::command::MAX_COMMAND_NAME_CHARS + 1),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(field_of(e), "params.name");

    let e = h
        .app
        .teams
        .start(
            &ctx,
            pb::TeamStartParams {
                session_id: sid.clone(),
                n: 2,
                task: long(crate::agents::spawn::MAX_TASK_CHARS + 1),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(field_of(e), "params.task");

    let e = h
        .app
        .approvals
        .ask(
            &ctx,
            pb::ApprovalAskParams {
                session_id: sid.clone(),
                tool: long(crate::approval::ask::MAX_TOOL_CHARS + 1),
                permission: "send".into(),
                reason: "why".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(field_of(e), "params.tool");

    let t = h.prompt(&sid, &"p".repeat(100_000)).await;
    h.until_done(&t, |_| None).await;
    let listed = h.app.sessions.list(Default::default()).await.unwrap();
    let row = listed
        .sessions
        .iter()
        .find(|s| s.session_id == sid)
        .unwrap();
    let last = row.last_prompt.as_deref().unwrap();
    assert_eq!(
        last.chars().count(),
        crate::session::LAST_PROMPT_CHARS + 1,
        "clipped with an ellipsis"
    );
}
