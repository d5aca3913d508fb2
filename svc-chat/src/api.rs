//! `gateway.bind`, `gateway.list`, `gateway.unbind`, `gateway.sync` (protocol 1.25.0; upstream
//! §7): the logic behind `rpc.rs`.

use std::sync::Arc;

use serde_json::{json, Value};
use snowpea_proto::chat::v1::gateway_list_result::Binding;
use snowpea_proto::chat::v1::{
    GatewayBindParams, GatewayBindResult, GatewayListResult, GatewaySyncResult,
};

use crate::binding::{self, Platform, SETTINGS_REF_PREFIX};
use crate::chat::Chat;
use crate::error::ChatError;
use crate::store::BindingRow;

/// Longest `channelId` / `userId` accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// The `gateway.*` logic.
#[derive(Debug, Clone)]
pub struct GatewayApi {
    /// The hub.
    pub chat: Arc<Chat>,
}

fn optional_id(field: &str, v: Option<String>) -> Result<Option<String>, ChatError> {
    match v.map(|s| s.trim().to_owned()) {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) if s.len() > MAX_ID_BYTES => Err(ChatError::invalid(
            field,
            format!("at most {MAX_ID_BYTES} bytes"),
        )),
        Some(s) if s.chars().any(char::is_control) => Err(ChatError::invalid(
            field,
            "must not contain control characters",
        )),
        Some(s) => Ok(Some(s)),
    }
}

impl GatewayApi {
    /// `gateway.bind`: validates every field (errors name it: `params.platform`,
    /// `params.target…`, `params.credentialsRef`, `params.channelId`, `params.userId`), then
    /// asks svc-session whether a `session` / `agent` target exists ([`crate::targets`]).
    /// Binding the same credential, channel, target and `userId` again answers the existing
    /// `bindingId` (nothing added); the same credential and channel with another target, or
    /// another `credentialsRef` holding an already bound bot token, is `invalid_params`
    /// (`params.channelId` / `params.credentialsRef`): one bot token, one connection.
    pub async fn bind(&self, p: GatewayBindParams) -> Result<GatewayBindResult, ChatError> {
        let platform = Platform::parse(&p.platform).ok_or_else(|| {
            ChatError::invalid(
                "platform",
                format!(
                    "unknown platform {:?}; use telegram, discord or slack",
                    binding::clip(&p.platform)
                ),
            )
        })?;
        let target = p
            .target
            .as_ref()
            .map(snowpea_proto::wkt::from_struct)
            .ok_or_else(|| ChatError::invalid("target", "is required"))?;
        let target = binding::validate_target(&target)?;
        if p.credentials_ref.starts_with(SETTINGS_REF_PREFIX) {
            return Err(ChatError::invalid(
                "credentialsRef",
                "settings: credentials belong to gateway.sync's automatic bindings",
            ));
        }
        let credential =
            binding::resolve_credential(&self.chat.home, platform, &p.credentials_ref)?;
        let row = BindingRow {
            binding_id: snowpea_common::ids::new_id("gw-"),
            platform: platform.key().to_owned(),
            credentials_ref: p.credentials_ref.clone(),
            target,
            channel_id: optional_id("channelId", p.channel_id)?,
            user_id: optional_id("userId", p.user_id)?,
            source: "manual".into(),
            created_ms: snowpea_common::time::now_ms(),
        };
        // A target that does not exist is the first thing to say (then the duplicates).
        crate::targets::check_new(&self.chat, &row).await?;
        let _serialised = self.chat.bind_lock.lock().await;
        if let Some(existing) = self.same_binding(platform, &credential, &row)? {
            return Ok(GatewayBindResult {
                binding_id: existing,
            });
        }
        self.insert(row.clone()).await?;
        Ok(GatewayBindResult {
            binding_id: row.binding_id,
        })
    }

    /// `gateway.bind`'s duplicate check against the existing bindings of `platform`:
    /// * the same `credentialsRef` and `channelId` with the same target and `userId` is the
    ///   same binding: its id is answered (idempotent, nothing added);
    /// * the same `credentialsRef` and `channelId` with another target or `userId` is
    ///   `invalid_params` on `channelId` (an inbound message can go to one binding only);
    /// * another `credentialsRef` holding the same bot token is `invalid_params` on
    ///   `credentialsRef`: one bot token has one platform connection (two Telegram pollers
    ///   on one token take each other's updates), so it must be bound under the same name.
    fn same_binding(
        &self,
        platform: Platform,
        credential: &binding::Credential,
        new: &BindingRow,
    ) -> Result<Option<String>, ChatError> {
        let existing = self.chat.bindings();
        for b in existing.iter().filter(|b| b.platform == new.platform) {
            if b.credentials_ref == new.credentials_ref {
                if b.channel_id != new.channel_id {
                    continue;
                }
                if b.target == new.target && b.user_id == new.user_id {
                    return Ok(Some(b.binding_id.clone()));
                }
                let chat = match &new.channel_id {
                    Some(c) => format!("channel {:?}", binding::clip(c)),
                    None => "every chat (no channelId)".to_owned(),
                };
                return Err(ChatError::invalid(
                    "channelId",
                    format!(
                        "{chat} of credential {:?} is already bound by {} to {} (userId {}); \
                         gateway.unbind it first or bind another channelId",
                        binding::clip(&new.credentials_ref),
                        b.binding_id,
                        binding::target_label(&b.target),
                        b.user_id
                            .as_deref()
                            .map(binding::clip)
                            .unwrap_or_else(|| "none".into()),
                    ),
                ));
            }
            let same_token =
                binding::resolve_credential(&self.chat.home, platform, &b.credentials_ref)
                    .is_ok_and(|c| c.token == credential.token);
            if same_token {
                let hint = if b.credentials_ref.starts_with(SETTINGS_REF_PREFIX) {
                    format!(
                        "it is settings.gateway.{}'s token, used by the automatic binding {}",
                        platform.key(),
                        b.binding_id
                    )
                } else {
                    format!(
                        "binding {} already uses this bot token as {:?}: bind with \
                         credentialsRef {:?}",
                        b.binding_id,
                        binding::clip(&b.credentials_ref),
                        binding::clip(&b.credentials_ref)
                    )
                };
                return Err(ChatError::invalid(
                    "credentialsRef",
                    format!(
                        "{:?} is the same {} bot as another binding's credential and one bot \
                         token has one connection; {hint}",
                        binding::clip(&new.credentials_ref),
                        platform.key()
                    ),
                ));
            }
        }
        Ok(None)
    }

    async fn insert(&self, row: BindingRow) -> Result<(), ChatError> {
        let store = self.chat.store.clone();
        let r = row.clone();
        snowpea_common::db::blocking("gateway.bind", move || store.insert_binding(&r)).await??;
        self.chat.added(row);
        Ok(())
    }

    /// `gateway.list`.
    pub fn list(&self) -> GatewayListResult {
        GatewayListResult {
            bindings: self
                .chat
                .bindings()
                .iter()
                .map(|b| Binding {
                    binding_id: b.binding_id.clone(),
                    channel_id: b.channel_id.clone(),
                    credentials_ref: b.credentials_ref.clone(),
                    platform: b.platform.clone(),
                    source: b.source.clone(),
                    state: self.chat.state_of(b).to_owned(),
                    target: binding::target_label(&b.target),
                    user_id: b.user_id.clone(),
                })
                .collect(),
        }
    }

    /// `gateway.unbind`.
    pub async fn unbind(&self, binding_id: String) -> Result<(), ChatError> {
        let store = self.chat.store.clone();
        let id = binding_id.clone();
        let existed =
            snowpea_common::db::blocking("gateway.unbind", move || store.delete_binding(&id))
                .await??;
        if !existed {
            return Err(ChatError::NotFound(binding_id));
        }
        self.chat.removed(&binding_id);
        Ok(())
    }

    /// `gateway.sync`: one automatic binding per platform whose
    /// `settings.gateway.<platform>` is `enabled` with a usable token; hand-made bindings are
    /// never touched (only a connection that could not start is tried again).
    pub async fn sync(&self) -> Result<GatewaySyncResult, ChatError> {
        let _serialised = self.chat.bind_lock.lock().await;
        let settings = snowpea_common::settings::load_file(&self.chat.home.settings_path())
            .unwrap_or(Value::Null);
        let mut result = GatewaySyncResult::default();
        for platform in Platform::ALL {
            let entry = settings.pointer(&format!("/gateway/{}", platform.key()));
            let credentials_ref = format!("{SETTINGS_REF_PREFIX}{}", platform.key());
            let wanted = entry.is_some_and(|e| {
                e.get("enabled").and_then(Value::as_bool) == Some(true)
                    && binding::resolve_credential(&self.chat.home, platform, &credentials_ref)
                        .is_ok()
            });
            let existing: Vec<BindingRow> = self
                .chat
                .bindings()
                .into_iter()
                .filter(|b| b.source == "auto" && b.platform == platform.key())
                .collect();
            let name = platform.key().to_owned();
            match (wanted, existing.is_empty()) {
                (true, false) => result.kept.push(name),
                (true, true) => {
                    let entry = entry.cloned().unwrap_or(Value::Null);
                    let id_of = |k: &str| {
                        entry.get(k).and_then(|v| match v {
                            Value::String(s) if !s.is_empty() => Some(s.clone()),
                            Value::Number(n) => Some(n.to_string()),
                            _ => None,
                        })
                    };
                    let row = BindingRow {
                        binding_id: snowpea_common::ids::new_id("gw-"),
                        platform: name.clone(),
                        credentials_ref,
                        target: auto_target(&self.chat, &entry),
                        channel_id: id_of("channelId"),
                        user_id: id_of("userId"),
                        source: "auto".into(),
                        created_ms: snowpea_common::time::now_ms(),
                    };
                    self.insert(row).await?;
                    result.added.push(name);
                }
                (false, false) => {
                    for b in existing {
                        self.unbind(b.binding_id).await?;
                    }
                    result.removed.push(name);
                }
                (false, true) => {}
            }
        }
        // A binding whose credential could not be read before gets another try.
        self.chat.reconcile_connections();
        Ok(result)
    }
}

/// The target of an automatic binding: a new session per chat in
/// `settings.gateway.<platform>.workdir` (else the user's home) with its `mode`.
fn auto_target(chat: &Chat, entry: &Value) -> Value {
    let workdir = entry
        .get("workdir")
        .and_then(Value::as_str)
        .filter(|w| std::path::Path::new(w).is_absolute())
        .map(str::to_owned)
        .or_else(|| std::env::var("HOME").ok().filter(|h| h.starts_with('/')))
        .unwrap_or_else(|| chat.home.root().display().to_string());
    let mut ns = json!({ "workdir": workdir });
    if let Some(m) = entry
        .get("mode")
        .and_then(Value::as_str)
        .filter(|m| binding::MODES.contains(m))
    {
        ns["mode"] = json!(m);
    }
    json!({ "new_session": ns })
}
