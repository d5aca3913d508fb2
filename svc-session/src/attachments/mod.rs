//! The `Attachments` component (spec `session.prompt{attachments}`, `message.user.
//! attachments`, `session.attachments`; issue 16 "What the user attaches").
//!
//! * A prompt's attachments are checked before anything happens (`invalid_params` naming
//!   `params.attachments[i].<field>`): at most [`MAX_ATTACHMENTS`], a known `kind` (or one
//!   inferred: `data` with an `image/*` type → image, `url` → page, `text` → text, else
//!   file), base64 `data`, at most [`MAX_BYTES`] each, an existing absolute `path`.
//! * The bytes of file and image attachments (from `data`, or read from `path`: `byPath`)
//!   are stored owner-only under `$SNOWPEA_HOME/attachments/<sessionId>/` before the prompt
//!   is answered, and indexed (`index.jsonl`) for `session.attachments`.
//! * The model gets images as vision input on the user message ([`Prepared::images`]) and
//!   text, page and (UTF-8) file contents as delimited blocks after the prompt
//!   ([`Prepared::context`], capped at [`MAX_TEXT`] each); `message.user.attachments` lists
//!   `{kind, name, title, url}` without the bytes.
//! * Images reach the model in the turn they were attached, and again in later turns of the
//!   session: the history replay ([`crate::turn::history::rebuild_with`]) reads each earlier
//!   prompt's stored images back ([`Attachments::images_of_turn`]), newest first, up to
//!   [`REPLAY_MAX_IMAGES`] images and [`REPLAY_MAX_BYTES`] (base64) in all; older ones, and
//!   all of them for a model without vision, are a `[image <name> attached earlier; not
//!   sent again]` line instead. Text blocks are kept as the model was given them.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::{Deserialize, Serialize};
use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use snowpea_session_error::{Error, Result};
use snowpea_session_llm::provider::ToolImage;

/// Most attachments of one prompt.
pub const MAX_ATTACHMENTS: usize = 20;
/// Largest attachment, in bytes (decoded).
pub const MAX_BYTES: usize = 20 * 1024 * 1024;
/// Text of one attachment given to the model, in bytes.
pub const MAX_TEXT: usize = 256 * 1024;

/// Most images of earlier prompts sent again with a later call of the session.
pub const REPLAY_MAX_IMAGES: usize = 8;
/// Most bytes (base64) of images of earlier prompts sent again with a later call.
pub const REPLAY_MAX_BYTES: usize = 16 * 1024 * 1024;

/// What one prompt's attachments give the turn.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    /// `message.user.attachments`.
    pub listed: Vec<pb::message_user_event::Attachment>,
    /// Delimited blocks appended to the prompt for the model.
    pub context: String,
    /// Images for the user message (vision input).
    pub images: Vec<ToolImage>,
}

/// One line of a session's `index.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    name: String,
    mime: String,
    size: u64,
    path: String,
    message_id: Option<String>,
    by_path: bool,
}

/// The attachments component (module doc).
#[derive(Debug, Clone)]
pub struct Attachments {
    home: Home,
}

fn field(i: usize, f: &str) -> String {
    format!("params.attachments[{i}].{f}")
}

fn safe_name(name: &str) -> String {
    let n: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    if n.trim_matches(['.', '_']).is_empty() {
        "attachment".into()
    } else {
        n
    }
}

fn cut(text: &str) -> (&str, bool) {
    if text.len() <= MAX_TEXT {
        return (text, false);
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

impl Attachments {
    /// The component over `home`.
    pub fn new(home: Home) -> Self {
        Attachments { home }
    }

    /// `$SNOWPEA_HOME/attachments/<sessionId>/`.
    pub fn dir(&self, session_id: &str) -> PathBuf {
        self.home.root().join("attachments").join(session_id)
    }

    /// Checks, stores and prepares `list` for turn `turn_id` of `session_id` (module doc).
    pub fn prepare(
        &self,
        session_id: &str,
        turn_id: &str,
        list: &[pb::session_prompt_params::Attachment],
    ) -> Result<Prepared> {
        if list.len() > MAX_ATTACHMENTS {
            return Err(Error::invalid(
                "params.attachments",
                format!("at most {MAX_ATTACHMENTS} attachments, got {}", list.len()),
            ));
        }
        // Check everything first: a refused prompt stores nothing.
        let mut checked = Vec::new();
        for (i, a) in list.iter().enumerate() {
            checked.push(check(i, a)?);
        }
        let mut out = Prepared::default();
        let dir = self.dir(session_id);
        for (i, (a, kind, bytes)) in checked.into_iter().enumerate() {
            let name = a
                .name
                .clone()
                .or_else(|| {
                    a.path
                        .as_deref()
                        .and_then(|p| Path::new(p).file_name())
                        .map(|n| n.to_string_lossy().into_owned())
                })
                .or_else(|| a.title.clone())
                .unwrap_or_else(|| format!("attachment {}", i + 1));
            let mime = a.mime_type.clone().unwrap_or_else(|| {
                mime_guess::from_path(&name)
                    .first()
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| {
                        if kind == "text" || kind == "page" {
                            "text/plain".into()
                        } else {
                            "application/octet-stream".into()
                        }
                    })
            });
            if let Some(bytes) = &bytes {
                let stored = format!("{turn_id}-{i}-{}", safe_name(&name));
                let path = dir.join(&stored);
                self.store(&dir, &path, bytes).map_err(Error::Internal)?;
                self.index(
                    &dir,
                    &Stored {
                        name: name.clone(),
                        mime: mime.clone(),
                        size: bytes.len() as u64,
                        path: path.to_string_lossy().into_owned(),
                        message_id: Some(turn_id.to_owned()),
                        by_path: a.data.is_none() && a.path.is_some(),
                    },
                )
                .map_err(Error::Internal)?;
            }
            match kind {
                "image" => {
                    let data = base64::engine::general_purpose::STANDARD
                        .encode(bytes.as_deref().unwrap_or_default());
                    out.images.push(ToolImage {
                        mime_type: mime.clone(),
                        data,
                    });
                }
                "file" => {
                    let bytes = bytes.unwrap_or_default();
                    match std::str::from_utf8(&bytes) {
                        Ok(text) => {
                            let (text, truncated) = cut(text);
                            out.context.push_str(&format!(
                                "\n\n<attachment kind=\"file\" name=\"{name}\"{}>\n{text}\n</attachment>",
                                if truncated { " truncated=\"true\"" } else { "" }
                            ));
                        }
                        Err(_) => out.context.push_str(&format!(
                            "\n\n<attachment kind=\"file\" name=\"{name}\" mime=\"{mime}\" size=\"{}\">(binary; stored, not shown)</attachment>",
                            bytes.len()
                        )),
                    }
                }
                _ => {
                    let body = a
                        .selection
                        .iter()
                        .chain(a.text.iter())
                        .chain(a.snapshot.iter())
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("\n\n");
                    let (body, truncated) = cut(&body);
                    let url = a
                        .url
                        .as_deref()
                        .map(|u| format!(" url=\"{u}\""))
                        .unwrap_or_default();
                    let title = a
                        .title
                        .as_deref()
                        .map(|t| format!(" title=\"{t}\""))
                        .unwrap_or_default();
                    out.context.push_str(&format!(
                        "\n\n<attachment kind=\"{kind}\" name=\"{name}\"{title}{url}{}>\n{body}\n</attachment>",
                        if truncated { " truncated=\"true\"" } else { "" }
                    ));
                }
            }
            out.listed.push(pb::message_user_event::Attachment {
                kind: kind.to_owned(),
                name,
                title: a.title.clone(),
                url: a.url.clone(),
            });
        }
        Ok(out)
    }

    fn store(&self, dir: &Path, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        snowpea_common::home::write_private(path, bytes)
    }

    fn index(&self, dir: &Path, s: &Stored) -> anyhow::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(dir.join("index.jsonl"))?;
        writeln!(f, "{}", serde_json::to_string(s)?)?;
        Ok(())
    }

    /// The images attached to the prompt of `turn_id` (its stored originals, named), for the
    /// history replay of later turns. A missing or unreadable file is left out (logged).
    pub fn images_of_turn(&self, session_id: &str, turn_id: &str) -> Vec<(String, ToolImage)> {
        let dir = self.dir(session_id);
        let Ok(text) = std::fs::read_to_string(dir.join("index.jsonl")) else {
            return vec![];
        };
        text.lines()
            .filter_map(|l| serde_json::from_str::<Stored>(l).ok())
            .filter(|s| s.message_id.as_deref() == Some(turn_id) && s.mime.starts_with("image/"))
            // Only files this component stored for the session (never a path elsewhere).
            .filter(|s| Path::new(&s.path).parent() == Some(dir.as_path()))
            .filter_map(|s| match std::fs::read(&s.path) {
                Ok(bytes) => Some((
                    s.name,
                    ToolImage {
                        mime_type: s.mime,
                        data: base64::engine::general_purpose::STANDARD.encode(bytes),
                    },
                )),
                Err(e) => {
                    tracing::warn!(session_id, turn_id, error = %e, "attached image not readable; not sent again");
                    None
                }
            })
            .collect()
    }

    /// `session.attachments`: this session's stored attachments, oldest first.
    pub fn list(&self, session_id: &str) -> Result<pb::SessionAttachmentsResult> {
        let text = match std::fs::read_to_string(self.dir(session_id).join("index.jsonl")) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(Error::Internal(e.into())),
        };
        let attachments = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Stored>(l).ok())
            .map(|s| pb::SessionAttachment {
                by_path: s.by_path,
                message_id: s.message_id,
                mime: s.mime,
                name: s.name,
                path: s.path,
                size: s.size as i64,
            })
            .collect();
        Ok(pb::SessionAttachmentsResult { attachments })
    }

    /// Removes a deleted session's attachments.
    pub fn delete_session(&self, session_id: &str) {
        if let Err(e) = std::fs::remove_dir_all(self.dir(session_id)) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(session_id, error = %e, "attachments not removed");
            }
        }
    }
}

type Checked<'a> = (
    &'a pb::session_prompt_params::Attachment,
    &'static str,
    Option<Vec<u8>>,
);

/// Checks attachment `i` and loads its bytes (file and image kinds).
fn check(i: usize, a: &pb::session_prompt_params::Attachment) -> Result<Checked<'_>> {
    let is_image_type = a
        .mime_type
        .as_deref()
        .is_some_and(|m| m.starts_with("image/"));
    let kind: &'static str = match a.kind.trim() {
        "file" => "file",
        "image" => "image",
        "text" => "text",
        "page" => "page",
        "" if a.url.is_some() => "page",
        "" if a.data.is_some() && is_image_type => "image",
        "" if a.text.is_some() => "text",
        "" => "file",
        other => {
            return Err(Error::invalid(
                &field(i, "kind"),
                format!("must be file, image, text or page, not {other:?}"),
            ))
        }
    };
    let bytes = match kind {
        "file" | "image" => Some(match (&a.data, &a.path) {
            (Some(d), _) => {
                if d.len() > MAX_BYTES / 3 * 4 + 4 {
                    return Err(Error::invalid(
                        &field(i, "data"),
                        format!("larger than {MAX_BYTES} bytes"),
                    ));
                }
                base64::engine::general_purpose::STANDARD
                    .decode(d.trim())
                    .map_err(|e| Error::invalid(&field(i, "data"), format!("not base64: {e}")))?
            }
            (None, Some(p)) => {
                let path = Path::new(p);
                if !path.is_absolute() {
                    return Err(Error::invalid(
                        &field(i, "path"),
                        "must be an absolute path",
                    ));
                }
                let meta = std::fs::metadata(path)
                    .map_err(|e| Error::invalid(&field(i, "path"), format!("{p}: {e}")))?;
                if !meta.is_file() || meta.len() as usize > MAX_BYTES {
                    return Err(Error::invalid(
                        &field(i, "path"),
                        format!("{p} is not a file of at most {MAX_BYTES} bytes"),
                    ));
                }
                std::fs::read(path)
                    .map_err(|e| Error::invalid(&field(i, "path"), format!("{p}: {e}")))?
            }
            (None, None) => {
                return Err(Error::invalid(
                    &field(i, "data"),
                    format!("a {kind} attachment needs data or path"),
                ))
            }
        }),
        _ => {
            if a.text.is_none() && a.snapshot.is_none() && a.selection.is_none() && a.url.is_none()
            {
                return Err(Error::invalid(
                    &field(i, "text"),
                    format!("a {kind} attachment needs text, snapshot, selection or url"),
                ));
            }
            None
        }
    };
    if kind == "image" {
        let mime = a.mime_type.as_deref().unwrap_or_default();
        if !ToolImage::SUPPORTED
            .iter()
            .any(|t| t.eq_ignore_ascii_case(mime))
        {
            return Err(Error::invalid(
                &field(i, "mimeType"),
                format!(
                    "an image must be one of {}, not {mime:?}",
                    ToolImage::SUPPORTED.join(", ")
                ),
            ));
        }
    }
    Ok((a, kind, bytes))
}

#[cfg(test)]
#[path = "attachments_tests.rs"]
mod tests;
