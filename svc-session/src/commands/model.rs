//! `/model [name]`: bare or `status`/`current` reports the session's model (read);
//! switching needs `session.setModel`, which is not in this build (`not_implemented`).

use serde_json::json;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/model`.
pub struct Model;

impl Builtin for Model {
    fn name(&self) -> &'static str {
        "model"
    }
    fn summary(&self) -> &'static str {
        "Show the session's model (switching needs session.setModel)"
    }
    fn usage(&self) -> &'static str {
        "/model [status|<model>]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["status", "current"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn run<'a>(&'a self, _cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            match call.args.sub() {
                None | Some("status" | "current") => {
                    let r = call.session.row();
                    let model = r.model.clone().or(r.model_in_use.clone());
                    let provider = r.provider.clone().or(r.provider_in_use.clone());
                    Ok(Reply::done(
                        format!(
                            "model: {} (provider {})",
                            model.as_deref().unwrap_or("default"),
                            provider.as_deref().unwrap_or("default")
                        ),
                        json!({"model": model, "provider": provider}),
                    ))
                }
                Some(_) => Err(Failure::not_implemented(
                    "switching the model needs session.setModel, which is not in this build",
                )),
            }
        })
    }
}
