//! What `/plan`, `/accept`, `/auto` and `/mode` share: switching the session's permission
//! mode through `session.setMode`'s component call (so `mode.changed` and `sessions.changed`
//! are emitted exactly as for the method).

use serde_json::json;

use super::{Call, Commands, Failure, Outcome, Reply};

/// The current mode as a status reply.
pub fn status(call: &Call) -> Outcome {
    let mode = call.session.mode().as_str();
    Ok(Reply::done(
        format!("mode: {mode}"),
        json!({ "mode": mode }),
    ))
}

/// Switches to `mode`.
pub async fn switch(cx: &Commands, call: &Call, mode: &str) -> Outcome {
    let before = call.session.mode().as_str();
    let after = cx
        .sessions
        .set_mode(&call.session.id, mode)
        .await
        .map_err(Failure::from_error)?;
    Ok(Reply::done(
        format!("mode: {before} → {}", after.as_str()),
        json!({ "mode": after.as_str(), "previous": before }),
    ))
}

/// `/plan`, `/accept`, `/auto`: bare switches; `status` reports.
pub async fn mode_command(cx: &Commands, call: &Call, mode: &str) -> Outcome {
    call.args.only_options(&[]).map_err(Failure::args)?;
    match call.args.sub() {
        None => switch(cx, call, mode).await,
        Some("status") => status(call),
        Some(other) => Err(Failure::args(format!(
            "/{mode} takes no argument but status (got {other:?})"
        ))),
    }
}
