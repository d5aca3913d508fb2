//! `/model [status|current|<reference>|inherit]`: bare, `status` or `current` reports the
//! model, vendor and effort the session's next model call uses (read); a reference — a
//! profile id, `vendor:model` or a bare vendor — pins the session to it and `inherit`
//! clears the pin (medium_write). Switching is `session.setModel` itself
//! ([`crate::models::Models::set_model`]): the same validation (a reference naming no
//! configured vendor is `invalid_params`), the same `model.changed` event, effective from
//! the next model call.

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/model`.
pub struct Model;

/// The reply of a status form and of a switch.
fn describe(cx: &Commands, call: &Call, verb: &str) -> std::result::Result<Reply, Failure> {
    let (vendor, model, e) = cx
        .peers
        .models
        .now_in_effect(&call.session)
        .map_err(Failure::from_error)?;
    let row = call.session.row();
    let pinned = row.provider.is_some() || row.model.is_some();
    let pin = match (&row.provider, &row.model) {
        (Some(v), Some(m)) => Some(format!("{v}:{m}")),
        (Some(v), None) => Some(v.clone()),
        (None, Some(m)) => Some(m.clone()),
        (None, None) => None,
    };
    Ok(Reply::done(
        format!(
            "{verb}model: {} (provider {}, effort {}){}",
            model.as_deref().unwrap_or("default"),
            vendor.as_deref().unwrap_or("default"),
            e.effort.unwrap_or("none"),
            match &pin {
                Some(p) => format!(" · pinned to {p}"),
                None => " · not pinned (routing default)".into(),
            }
        ),
        json!({
            "model": model,
            "provider": vendor,
            "pinned": pinned,
            "pin": pin,
            "effort": e.effort,
            "effortSource": e.source,
            "efforts": e.efforts,
        }),
    ))
}

impl Builtin for Model {
    fn name(&self) -> &'static str {
        "model"
    }
    fn summary(&self) -> &'static str {
        "Show the session's model, or pin it to another (session.setModel)"
    }
    fn usage(&self) -> &'static str {
        "/model [status|<profile|vendor:model|vendor>|inherit]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status", "current", "inherit"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            call.args.only_options(&[]).map_err(Failure::args)?;
            match call.args.sub() {
                None | Some("status" | "current") => describe(cx, call, ""),
                Some(reference) => {
                    if call.args.words.len() > 1 {
                        return Err(Failure::args(format!(
                            "/model takes one model reference, got {:?}; usage: {}",
                            call.args.words.join(" "),
                            self.usage()
                        )));
                    }
                    cx.peers
                        .models
                        .set_model(pb::SessionSetModelParams {
                            session_id: call.session.id.clone(),
                            model: Some(reference.to_owned()),
                        })
                        .await
                        .map_err(|e| {
                            let f = Failure::from_error(e);
                            Failure {
                                message: format!("model {reference:?}: {}", f.message),
                                ..f
                            }
                        })?;
                    describe(cx, call, "switched · ")
                }
            }
        })
    }
}
