//! `/export [md|json|txt|html] [--out=<relative path>]` (low_write): writes the session's
//! transcript (user prompts and assistant answers, from the stored events) to a file in the
//! workdir, by default `.snowpea/exports/<sessionId>-<UTC time>.<format>` (0600). The path
//! must stay inside the workdir.

use std::path::{Component, Path};

use serde_json::{json, Value};

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/export`.
pub struct Export;

const FORMATS: &[&str] = &["md", "json", "txt", "html"];

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders `(role, text)` pairs.
pub fn render(format: &str, title: &str, msgs: &[(String, String)]) -> String {
    match format {
        "json" => serde_json::to_string_pretty(&json!({
            "title": title,
            "messages": msgs.iter().map(|(r, t)| json!({"role": r, "text": t})).collect::<Vec<_>>(),
        }))
        .unwrap_or_default(),
        "md" => {
            let mut out = format!("# {title}\n");
            for (r, t) in msgs {
                out.push_str(&format!("\n## {r}\n\n{t}\n"));
            }
            out
        }
        "html" => {
            let mut out = format!(
                "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title></head><body>\n<h1>{0}</h1>\n",
                html_escape(title)
            );
            for (r, t) in msgs {
                out.push_str(&format!(
                    "<section class=\"{0}\"><h2>{0}</h2><pre>{1}</pre></section>\n",
                    html_escape(r),
                    html_escape(t)
                ));
            }
            out.push_str("</body></html>\n");
            out
        }
        _ => {
            let mut out = format!("{title}\n");
            for (r, t) in msgs {
                out.push_str(&format!("\n[{r}]\n{t}\n"));
            }
            out
        }
    }
}

impl Builtin for Export {
    fn name(&self) -> &'static str {
        "export"
    }
    fn summary(&self) -> &'static str {
        "Write the transcript to a file (md, json, txt or html)"
    }
    fn usage(&self) -> &'static str {
        "/export [md|json|txt|html] [--out=<path in the workdir>]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        FORMATS
    }
    fn risk(&self) -> Risk {
        Risk::LowWrite
    }
    fn bare_is_read(&self) -> bool {
        false
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let a = &call.args;
            a.only_options(&["out"]).map_err(Failure::args)?;
            let format = a.sub().unwrap_or("md");
            if !FORMATS.contains(&format) {
                return Err(Failure::args(format!(
                    "format must be md, json, txt or html, not {format:?}"
                )));
            }
            let workdir = call.session.workdir();
            let rel = match a.options.get("out") {
                Some(o) => {
                    let p = Path::new(o);
                    if p.components()
                        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
                    {
                        return Err(Failure::args(
                            "--out must be a relative path inside the workdir",
                        ));
                    }
                    p.to_path_buf()
                }
                None => {
                    let stamp = jiff::Timestamp::now()
                        .strftime("%Y%m%dT%H%M%SZ")
                        .to_string();
                    Path::new(".snowpea/exports")
                        .join(format!("{}-{stamp}.{format}", call.session.id))
                }
            };
            let rows = cx
                .log
                .of_kinds(&call.session.id, &["message.user", "message.done"])
                .await
                .map_err(Failure::from_error)?;
            let mut msgs = Vec::new();
            for (kind, p) in rows {
                let text = p
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let role = if kind == "message.user" {
                    "user".to_owned()
                } else {
                    p.get("role")
                        .and_then(Value::as_str)
                        .unwrap_or("assistant")
                        .to_owned()
                };
                if role == "assistant" && text.is_empty() {
                    continue;
                }
                msgs.push((role, text));
            }
            let r = call.session.row();
            let title = r
                .title
                .clone()
                .unwrap_or_else(|| format!("Session {}", r.id));
            let body = render(format, &title, &msgs);
            let path = workdir.join(&rel);
            let bytes = body.len();
            let target = path.clone();
            let root = workdir.clone();
            snowpea_session_skills::blocking(move || {
                if let Some(dir) = target.parent() {
                    std::fs::create_dir_all(dir).map_err(anyhow::Error::from)?;
                    // A symlinked folder must not lead the file out of the workdir.
                    let real = std::fs::canonicalize(dir).map_err(anyhow::Error::from)?;
                    let root = std::fs::canonicalize(&root).map_err(anyhow::Error::from)?;
                    if !real.starts_with(&root) {
                        return Err(snowpea_session_error::Error::invalid(
                            "params.args",
                            "--out leads outside the workdir through a symlink",
                        ));
                    }
                }
                if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(snowpea_session_error::Error::invalid(
                        "params.args",
                        "--out names a symlink",
                    ));
                }
                snowpea_common::home::write_private(&target, body.as_bytes())?;
                Ok(())
            })
            .await
            .map_err(Failure::from_error)?;
            Ok(Reply::done(
                format!("exported {} messages to {}", msgs.len(), path.display()),
                json!({"path": path, "format": format, "bytes": bytes, "messages": msgs.len()}),
            ))
        })
    }
}
