//! `session.toolContent` (spec; issues 16, 21): the content blocks of a tool result whose
//! images were kept — a host tool's blocks from the host tools' content store (the last
//! [`crate::host_tools::content::KEPT_RESULTS`] per session, on disk), an MCP image
//! result's from the stored `tool.result`'s `meta.images` (the last [`KEPT_RESULTS`] per
//! session). Any other call id is `not_found`.

use serde_json::Value;
use snowpea_proto::session::v1 as pb;

use super::Turns;
use snowpea_session_error::{Error, Result};

/// Tool results with images per session that `session.toolContent` serves.
pub const KEPT_RESULTS: usize = 50;

impl Turns {
    /// `session.toolContent` (module doc): the text block, then one image block per image.
    pub async fn tool_content(
        &self,
        p: pb::SessionToolContentParams,
    ) -> Result<pb::SessionToolContentResult> {
        if self.sessions.registry().row(&p.session_id).await?.is_none() {
            return Err(Error::NotFound(format!("no session {:?}", p.session_id)));
        }
        if let Some(hosts) = self.host_tools.as_ref() {
            if let Some(content) = hosts.content(&p.session_id, &p.call_id).await {
                return Ok(pb::SessionToolContentResult {
                    call_id: p.call_id,
                    content,
                });
            }
        }
        let results = self.log.of_kinds(&p.session_id, &["tool.result"]).await?;
        let with_images = results.iter().rev().filter_map(|(_, payload)| {
            let images = payload
                .get("meta")
                .map(crate::clients::mcp::images_of)
                .unwrap_or_default();
            (!images.is_empty()).then_some((payload, images))
        });
        let Some((payload, images)) = with_images.take(KEPT_RESULTS).find(|(payload, _)| {
            payload.get("callId").and_then(Value::as_str) == Some(p.call_id.as_str())
        }) else {
            return Err(Error::NotFound(format!(
                "no kept tool content for call {:?} in session {:?}",
                p.call_id, p.session_id
            )));
        };
        let mut content = vec![pb::ContentBlock {
            r#type: "text".into(),
            text: payload
                .get("output")
                .and_then(Value::as_str)
                .map(str::to_owned),
            ..Default::default()
        }];
        content.extend(images.into_iter().map(|i| pb::ContentBlock {
            r#type: "image".into(),
            data: Some(i.data),
            media_type: Some(i.mime_type),
            ..Default::default()
        }));
        Ok(pb::SessionToolContentResult {
            call_id: p.call_id,
            content,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use snowpea_proto::session::v1 as pb;

    use crate::testkit::Harness;

    #[tokio::test]
    async fn kept_image_results_answer_with_their_blocks_others_are_not_found() {
        let h = Harness::new(json!({"default": {"text": "ok"}})).await;
        let sid = h.create("accept").await;
        let session = h.app.sessions.get(&sid).unwrap();
        let meta =
            json!({"source": "mcp", "images": [{"mimeType": "image/png", "data": "iVBORw0KGgo="}]});
        for (call, meta) in [("c1", Some(meta)), ("c2", None)] {
            let payload = pb::ToolResultEvent {
                call_id: call.into(),
                name: "mcp__ev__img".into(),
                ok: true,
                output: "Here's the image:".into(),
                ..Default::default()
            };
            match meta {
                Some(m) => h
                    .app
                    .events
                    .event_to_with(&session, &payload, &[("/meta", m)]),
                None => h.app.events.event_to(&session, &payload),
            }
        }
        h.app.flush().await.unwrap();
        let params = |call: &str| pb::SessionToolContentParams {
            call_id: call.into(),
            session_id: sid.clone(),
        };
        let r = h.app.turns.tool_content(params("c1")).await.unwrap();
        assert_eq!(r.content.len(), 2);
        assert_eq!(r.content[0].text.as_deref(), Some("Here's the image:"));
        assert_eq!(r.content[1].r#type, "image");
        assert_eq!(r.content[1].data.as_deref(), Some("iVBORw0KGgo="));
        assert_eq!(r.content[1].media_type.as_deref(), Some("image/png"));
        for call in ["c2", "nope"] {
            let err = h.app.turns.tool_content(params(call)).await.unwrap_err();
            assert!(
                matches!(err, snowpea_session_error::Error::NotFound(_)),
                "{err}"
            );
        }
    }
}
