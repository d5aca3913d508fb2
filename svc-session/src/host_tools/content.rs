//! The kept content of host tool results (`session.toolContent`, issue 21): the blocks of
//! each result that carried an image, with the image bytes, as one 0600 file per call in
//! `$SNOWPEA_HOME/tool-content/<sessionId>/` (0700). The newest [`KEPT_RESULTS`] per session
//! are kept; older files are deleted as new ones arrive. Sensitive results are never
//! written.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use snowpea_proto::session::v1 as pb;

/// Host tool results with images kept per session.
pub const KEPT_RESULTS: usize = 200;

/// The on-disk store.
#[derive(Debug)]
pub struct ContentStore {
    root: PathBuf,
    counter: AtomicU64,
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// One block as stored and served (`ContentBlock` JSON: `type`, `text`, `data`, `mediaType`).
pub fn block_json(b: &pb::ContentBlock) -> Value {
    let mut o = serde_json::Map::new();
    o.insert("type".into(), b.r#type.clone().into());
    for (k, v) in [
        ("text", &b.text),
        ("data", &b.data),
        ("mediaType", &b.media_type),
        ("contentRef", &b.content_ref),
    ] {
        if let Some(v) = v {
            o.insert(k.into(), v.clone().into());
        }
    }
    Value::Object(o)
}

/// A stored block back as a `ContentBlock`.
pub fn block_of(v: &Value) -> pb::ContentBlock {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    pb::ContentBlock {
        r#type: s("type").unwrap_or_else(|| "text".into()),
        text: s("text"),
        data: s("data"),
        media_type: s("mediaType"),
        content_ref: s("contentRef"),
    }
}

impl ContentStore {
    /// The store under `home`'s root.
    pub fn new(home_root: &Path) -> Self {
        ContentStore {
            root: home_root.join("tool-content"),
            counter: AtomicU64::new(0),
        }
    }

    fn dir(&self, session_id: &str) -> PathBuf {
        self.root.join(hex(session_id))
    }

    /// Keeps `blocks` (with image bytes) of `call_id`; drops the oldest beyond
    /// [`KEPT_RESULTS`]. Blocking (file system): call off the async workers.
    pub fn put(
        &self,
        session_id: &str,
        call_id: &str,
        blocks: &[pb::ContentBlock],
    ) -> anyhow::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.dir(session_id);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        let stamp = format!(
            "{:020}{:06}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros())
                .unwrap_or_default(),
            self.counter.fetch_add(1, Ordering::Relaxed) % 1_000_000
        );
        let body = serde_json::json!({
            "callId": call_id,
            "content": blocks.iter().map(block_json).collect::<Vec<_>>(),
        });
        let path = dir.join(format!("{stamp}-{}.json", hex(call_id)));
        snowpea_common::home::write_private(&path, body.to_string().as_bytes())?;
        let mut names: Vec<String> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
            .collect();
        if names.len() > KEPT_RESULTS {
            names.sort();
            for old in &names[..names.len() - KEPT_RESULTS] {
                let _ = std::fs::remove_file(dir.join(old));
            }
        }
        Ok(())
    }

    /// The kept blocks of `call_id`, newest first when a call id repeats; `None` when not
    /// kept (never stored, or pushed out by newer results).
    pub fn get(&self, session_id: &str, call_id: &str) -> Option<Vec<pb::ContentBlock>> {
        let suffix = format!("-{}.json", hex(call_id));
        let mut names: Vec<String> = std::fs::read_dir(self.dir(session_id))
            .ok()?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(&suffix))
            .collect();
        names.sort();
        let name = names.pop()?;
        let text = std::fs::read_to_string(self.dir(session_id).join(name)).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        Some(v.get("content")?.as_array()?.iter().map(block_of).collect())
    }

    /// Deletes a session's kept content (the session was deleted).
    pub fn remove_session(&self, session_id: &str) {
        let _ = std::fs::remove_dir_all(self.dir(session_id));
    }
}
