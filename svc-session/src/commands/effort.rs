//! `/effort [status|low|medium|high|max|inherit]`: bare or `status` reports the session's
//! effective reasoning effort, where it comes from and the tiers its model offers (read); a
//! tier pins it and `inherit` clears the pin (medium_write). Setting is `session.setEffort`
//! itself ([`crate::models::Models::set_effort`]): clamped to the model's tiers, announced
//! with `model.changed`, effective from the next model call.

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};
use snowpea_session_llm::effort;

/// `/effort`.
pub struct Effort;

impl Builtin for Effort {
    fn name(&self) -> &'static str {
        "effort"
    }
    fn summary(&self) -> &'static str {
        "Show or set the reasoning effort (session.setEffort)"
    }
    fn usage(&self) -> &'static str {
        "/effort [status|low|medium|high|max|inherit]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status", "low", "medium", "high", "max", "inherit"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            call.args.only_options(&[]).map_err(Failure::args)?;
            if call.args.words.len() > 1 {
                return Err(Failure::args(format!(
                    "/effort takes one level, got {:?}; usage: {}",
                    call.args.words.join(" "),
                    self.usage()
                )));
            }
            let (verb, e) = match call.args.sub() {
                None | Some("status" | "current") => {
                    let (_, _, e) = cx
                        .peers
                        .models
                        .now_in_effect(&call.session)
                        .map_err(Failure::from_error)?;
                    ("", e)
                }
                Some(level) => {
                    let pin = match level {
                        "inherit" => None,
                        l => Some(effort::parse(l).ok_or_else(|| {
                            Failure::args(format!(
                                "unknown effort level {l:?}: use low, medium, high, max or inherit"
                            ))
                        })?),
                    };
                    cx.peers
                        .models
                        .set_effort(pb::SessionSetEffortParams {
                            session_id: call.session.id.clone(),
                            effort: pin.map(str::to_owned),
                        })
                        .await
                        .map_err(Failure::from_error)?;
                    let (_, _, e) = cx
                        .peers
                        .models
                        .now_in_effect(&call.session)
                        .map_err(Failure::from_error)?;
                    ("set · ", e)
                }
            };
            let offered = if e.efforts.is_empty() {
                "the model offers no effort levels".to_owned()
            } else {
                format!("offered: {}", e.efforts.join(", "))
            };
            Ok(Reply::done(
                format!(
                    "{verb}effort: {} (from {}) · {offered}",
                    e.effort.unwrap_or("none"),
                    e.source
                ),
                json!({
                    "effort": e.effort,
                    "effortSource": e.source,
                    "efforts": e.efforts,
                    "pinned": e.pinned,
                }),
            ))
        })
    }
}
