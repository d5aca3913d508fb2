//! What a binding is made of: the platform key, the validated target and the credential it
//! names (protocol `gateway.bind`; upstream §7).
//!
//! Credentials are resolved from `$SNOWPEA_HOME/credentials.json` (a top-level key named by
//! `credentialsRef`, or `gateway.<credentialsRef>`: a token string, or an object
//! `{token}` / Slack's `{appToken, botToken}`), else from the environment variable named
//! `credentialsRef` (Slack: `"<appToken> <botToken>"`), else, for the automatic bindings of
//! `gateway.sync` (`credentialsRef` = `settings:gateway.<platform>`), from
//! `settings.gateway.<platform>.token` (+ `botToken` for Slack). A [`Credential`] never
//! prints its secrets (`Debug` masks them).

use std::path::Path;

use serde_json::{json, Value};

use crate::error::ChatError;

/// The chat platforms (protocol `gateway.bind` `platform`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Platform {
    /// Telegram Bot API, long polling.
    Telegram,
    /// Discord REST + gateway websocket.
    Discord,
    /// Slack Socket Mode.
    Slack,
}

impl Platform {
    /// Every platform, in the order `gateway.sync` reports them.
    pub const ALL: [Platform; 3] = [Platform::Telegram, Platform::Discord, Platform::Slack];

    /// Parses the protocol key.
    pub fn parse(s: &str) -> Option<Platform> {
        match s {
            "telegram" => Some(Platform::Telegram),
            "discord" => Some(Platform::Discord),
            "slack" => Some(Platform::Slack),
            _ => None,
        }
    }

    /// The protocol key.
    pub fn key(self) -> &'static str {
        match self {
            Platform::Telegram => "telegram",
            Platform::Discord => "discord",
            Platform::Slack => "slack",
        }
    }
}

/// The permission modes a `new_session` target may ask for.
pub const MODES: [&str; 3] = ["plan", "accept", "auto"];

/// Validates a `gateway.bind` target and returns it normalised (one key). Errors name the
/// field (`target`, `target.agent`, `target.new_session.workdir`, …).
pub fn validate_target(target: &Value) -> Result<Value, ChatError> {
    let obj = target
        .as_object()
        .ok_or_else(|| ChatError::invalid("target", "must be an object"))?;
    const KEYS: &str =
        "{\"agent\": name}, {\"session\": id} or {\"new_session\": {\"workdir\", \"mode\"}}";
    if obj.len() != 1 {
        return Err(ChatError::invalid(
            "target",
            format!("must have exactly one of {KEYS}"),
        ));
    }
    let (key, value) = obj.iter().next().expect("one key");
    match key.as_str() {
        "agent" | "session" => {
            let s = value
                .as_str()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    ChatError::invalid(&format!("target.{key}"), "must be a non-empty string")
                })?;
            if s.len() > 256 {
                return Err(ChatError::invalid(
                    &format!("target.{key}"),
                    "at most 256 bytes",
                ));
            }
            Ok(json!({ key.as_str(): s }))
        }
        "new_session" => {
            let ns = value.as_object().ok_or_else(|| {
                ChatError::invalid("target.new_session", "must be an object {workdir, mode}")
            })?;
            for k in ns.keys() {
                if k != "workdir" && k != "mode" {
                    return Err(ChatError::invalid(
                        &format!("target.new_session.{k}"),
                        "unknown field (workdir, mode)",
                    ));
                }
            }
            let workdir = ns
                .get("workdir")
                .and_then(Value::as_str)
                .filter(|w| !w.is_empty())
                .ok_or_else(|| {
                    ChatError::invalid("target.new_session.workdir", "must be an absolute path")
                })?;
            if !Path::new(workdir).is_absolute() {
                return Err(ChatError::invalid(
                    "target.new_session.workdir",
                    "must be an absolute path",
                ));
            }
            let mut out = json!({ "workdir": workdir });
            match ns.get("mode") {
                None | Some(Value::Null) => {}
                Some(Value::String(m)) if MODES.contains(&m.as_str()) => {
                    out["mode"] = json!(m);
                }
                Some(_) => {
                    return Err(ChatError::invalid(
                        "target.new_session.mode",
                        "must be one of plan, accept, auto",
                    ))
                }
            }
            Ok(json!({ "new_session": out }))
        }
        other => Err(ChatError::invalid(
            &format!("target.{}", clip(other)),
            format!("unknown target; use one of {KEYS}"),
        )),
    }
}

/// The target as `gateway.list` shows it: `agent:<name>`, `session:<id>` or
/// `new_session:<workdir>`.
pub fn target_label(target: &Value) -> String {
    if let Some(a) = target.get("agent").and_then(Value::as_str) {
        format!("agent:{a}")
    } else if let Some(s) = target.get("session").and_then(Value::as_str) {
        format!("session:{s}")
    } else if let Some(w) = target
        .get("new_session")
        .and_then(|n| n.get("workdir"))
        .and_then(Value::as_str)
    {
        format!("new_session:{w}")
    } else {
        target.to_string()
    }
}

/// A platform credential. `Debug` never shows the secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// The bot token (Telegram, Discord) or Slack's app-level token (`xapp-…`).
    pub token: String,
    /// Slack's bot token (`xoxb-…`) for the Web API; `None` elsewhere.
    pub bot_token: Option<String>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("token", &"***")
            .field("bot_token", &self.bot_token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Prefix of the `credentialsRef` of automatic bindings: the token is in the settings.
pub const SETTINGS_REF_PREFIX: &str = "settings:gateway.";

/// Resolves `credentials_ref` for `platform` (see the module doc). Errors name
/// `credentialsRef` and never contain a secret.
pub fn resolve_credential(
    home: &snowpea_common::home::Home,
    platform: Platform,
    credentials_ref: &str,
) -> Result<Credential, ChatError> {
    let field = "credentialsRef";
    if credentials_ref.trim().is_empty() {
        return Err(ChatError::invalid(field, "must name a credential"));
    }
    if let Some(p) = credentials_ref.strip_prefix(SETTINGS_REF_PREFIX) {
        let settings =
            snowpea_common::settings::load_file(&home.settings_path()).unwrap_or(Value::Null);
        let entry = settings.get("gateway").and_then(|g| g.get(p));
        let Some(entry) = entry else {
            return Err(ChatError::invalid(
                field,
                format!("settings.gateway.{} has no usable token", clip(p)),
            ));
        };
        return credential_of(platform, entry).map_err(|why| {
            ChatError::invalid(
                field,
                format!("settings.gateway.{} has no usable token: {why}", clip(p)),
            )
        });
    }
    let path = home.root().join("credentials.json");
    if let Ok(text) = std::fs::read_to_string(&path) {
        if let Ok(doc) = serde_json::from_str::<Value>(&text) {
            let entry = doc
                .get(credentials_ref)
                .or_else(|| doc.get("gateway").and_then(|g| g.get(credentials_ref)));
            if let Some(entry) = entry {
                return credential_of(platform, entry).map_err(|why| {
                    ChatError::invalid(
                        field,
                        format!(
                            "credentials.json entry {:?} has no usable {} token: {why}",
                            clip(credentials_ref),
                            platform.key()
                        ),
                    )
                });
            }
        }
    }
    if is_env_name(credentials_ref) {
        if let Ok(v) = std::env::var(credentials_ref) {
            if !v.trim().is_empty() {
                return credential_of(platform, &Value::String(v)).map_err(|why| {
                    ChatError::invalid(
                        field,
                        format!(
                            "environment variable {} has no usable {} token: {why}",
                            clip(credentials_ref),
                            platform.key()
                        ),
                    )
                });
            }
        }
    }
    Err(ChatError::invalid(
        field,
        format!(
            "no credential {:?}: add it to credentials.json or set the environment variable",
            clip(credentials_ref)
        ),
    ))
}

fn is_env_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A credential from a token string or object; `Err(why)` when unusable for the platform
/// (never containing the secret). A Slack-shaped credential (an `{appToken, botToken}`
/// object or a `"<appToken> <botToken>"` string) is refused for Telegram and Discord, whose
/// credential is one token (a string or `{token}`).
fn credential_of(platform: Platform, entry: &Value) -> Result<Credential, String> {
    let nonempty = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let slack_shaped = match entry {
        Value::String(s) => s.split_whitespace().count() > 1,
        Value::Object(o) => o.contains_key("appToken") || o.contains_key("botToken"),
        _ => false,
    };
    let (token, bot) = match entry {
        Value::String(s) => {
            let mut parts = s.split_whitespace();
            (
                parts.next().map(str::to_owned),
                parts.next().map(str::to_owned),
            )
        }
        Value::Object(_) => (
            nonempty(entry.get("token")).or_else(|| nonempty(entry.get("appToken"))),
            nonempty(entry.get("botToken")),
        ),
        _ => (None, None),
    };
    match platform {
        Platform::Slack => match (token, bot) {
            (Some(token), Some(bot)) => Ok(Credential {
                token,
                bot_token: Some(bot),
            }),
            _ => Err(
                "slack needs an app token and a bot token: {\"appToken\": \"xapp-…\", \
                 \"botToken\": \"xoxb-…\"} or \"<appToken> <botToken>\""
                    .into(),
            ),
        },
        Platform::Telegram | Platform::Discord if slack_shaped => Err(format!(
            "is a Slack credential (appToken + botToken); {} needs one bot token: a string \
             or {{\"token\": …}}",
            platform.key()
        )),
        Platform::Telegram | Platform::Discord => match token {
            Some(token) => Ok(Credential {
                token,
                bot_token: None,
            }),
            None => Err(format!(
                "{} needs one bot token: a string or {{\"token\": …}}",
                platform.key()
            )),
        },
    }
}

/// At most 64 characters of a caller's string, for messages.
pub fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
#[path = "binding_tests.rs"]
mod tests;
