//! `$SNOWPEA_HOME/credentials.json` (mode 0600): the provider secrets `provider.configure`
//! and `provider.loginWeb` store, kept out of `settings.json` so a settings screen, a log or
//! an event never carries them.
//!
//! Shape: `{"providers": {"<vendor>": {"apiKey"?, "accessToken"?, "refreshToken"?,
//! "expiresAt"? (unix seconds), "authMethod"? ("api_key" | "oauth"), "loginMethod"?}}, …}`.
//! Other top-level keys (e.g. chat-gateway credentials named by `credentialsRef`) are kept as
//! they are on every write. A missing file is empty; a malformed one is an error naming the
//! file and is never overwritten. Writes are atomic (temp file + rename, 0600) and serialised
//! in the process.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The stored secrets of one vendor. `Debug` masks every secret.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    /// API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// OAuth access token (sent as `Authorization: Bearer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<String>,
    /// OAuth refresh token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// `oauth` when the access token is the credential in use (a stored API key is then
    /// ignored), else `api_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_method: Option<String>,
    /// The `provider.loginWeb` method that produced the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_method: Option<String>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = |v: &Option<String>| v.as_ref().map(|_| "***");
        f.debug_struct("Credential")
            .field("api_key", &m(&self.api_key))
            .field("access_token", &m(&self.access_token))
            .field("refresh_token", &m(&self.refresh_token))
            .field("expires_at", &self.expires_at)
            .field("auth_method", &self.auth_method)
            .finish()
    }
}

/// Seconds before `expiresAt` from which a token counts as expired (upstream: 60 s).
pub const EXPIRY_MARGIN_SECS: i64 = 60;

impl Credential {
    /// True when the OAuth token is the credential in use.
    pub fn is_oauth(&self) -> bool {
        self.auth_method.as_deref() == Some("oauth")
            || (self.api_key.is_none() && self.access_token.is_some())
    }

    /// The secret a call sends and whether it is an OAuth bearer token: the access token
    /// for an OAuth login (a stored API key is then ignored), else the API key.
    pub fn secret(&self) -> Option<(String, bool)> {
        if self.is_oauth() {
            self.access_token.clone().map(|t| (t, true))
        } else {
            self.api_key.clone().map(|k| (k, false))
        }
    }

    /// True when the credential in use is an OAuth token within [`EXPIRY_MARGIN_SECS`] of its
    /// expiry at `now` (unix seconds).
    pub fn is_expired(&self, now: i64) -> bool {
        self.is_oauth()
            && self
                .expires_at
                .is_some_and(|at| at.saturating_sub(EXPIRY_MARGIN_SECS) <= now)
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.api_key.is_none() && self.access_token.is_none() && self.refresh_token.is_none()
    }
}

/// The vendor → credential map of one read.
pub type CredentialMap = BTreeMap<String, Credential>;

/// The credentials file of a home.
#[derive(Debug, Clone)]
pub struct CredentialStore {
    path: PathBuf,
}

impl CredentialStore {
    /// The store at `path` (normally `$SNOWPEA_HOME/credentials.json`).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        CredentialStore { path: path.into() }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every stored provider credential. Errors name the file (unreadable or malformed).
    pub fn load(&self) -> anyhow::Result<CredentialMap> {
        providers_of(&read_doc(&self.path)?, &self.path)
    }

    /// Read-modify-write of the provider credentials: `edit` changes the map; entries left
    /// empty are dropped; other top-level keys of the file are kept. An error of `edit`
    /// writes nothing.
    pub fn update<T>(
        &self,
        edit: impl FnOnce(&mut CredentialMap) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        static WRITE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _guard = WRITE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let mut doc = read_doc(&self.path)?;
        let mut map = providers_of(&doc, &self.path)?;
        let out = edit(&mut map)?;
        map.retain(|_, c| !c.is_empty());
        doc.insert("providers".into(), serde_json::to_value(&map)?);
        let mut bytes = serde_json::to_vec_pretty(&Value::Object(doc))?;
        bytes.push(b'\n');
        snowpea_common::home::write_private(&self.path, &bytes)?;
        Ok(out)
    }
}

fn read_doc(path: &Path) -> anyhow::Result<Map<String, Value>> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(Map::new()),
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => anyhow::bail!("{}: must be a JSON object", path.display()),
            // serde_json's message quotes no input, so no secret leaks into it.
            Err(e) => anyhow::bail!("{}: {e}", path.display()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(e) => anyhow::bail!("{}: {e}", path.display()),
    }
}

/// The `providers` map of the file. A wrongly typed entry is an error naming the entry but
/// not quoting serde's message, which would quote the offending value (a token pasted into
/// the wrong field).
fn providers_of(doc: &Map<String, Value>, path: &Path) -> anyhow::Result<CredentialMap> {
    match doc.get("providers") {
        None | Some(Value::Null) => Ok(CredentialMap::new()),
        Some(Value::Object(entries)) => entries
            .iter()
            .map(|(vendor, v)| {
                serde_json::from_value::<Credential>(v.clone())
                    .map(|c| (vendor.clone(), c))
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "{}: providers.{vendor} must be an object whose apiKey, accessToken, \
                             refreshToken, authMethod and loginMethod are strings and expiresAt \
                             is unix seconds",
                            path.display()
                        )
                    })
            })
            .collect(),
        Some(_) => anyhow::bail!("{}: providers must be an object", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn round_trip_keeps_other_keys_and_is_owner_only() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("credentials.json");
        std::fs::write(&path, r#"{"telegram": {"token": "t-1"}}"#).unwrap();
        let store = CredentialStore::new(&path);
        store
            .update(|m| {
                m.insert(
                    "openai".into(),
                    Credential {
                        api_key: Some("sk-1".into()),
                        ..Default::default()
                    },
                );
                m.insert("empty".into(), Credential::default());
                Ok(())
            })
            .unwrap();
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(doc["telegram"]["token"], "t-1");
        assert_eq!(doc["providers"]["openai"]["apiKey"], "sk-1");
        assert!(doc["providers"].get("empty").is_none());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            store.load().unwrap()["openai"].api_key.as_deref(),
            Some("sk-1")
        );
        assert!(!format!("{:?}", store.load().unwrap()).contains("sk-1"));
    }

    #[test]
    fn a_malformed_file_is_an_error_and_is_left_alone() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("credentials.json");
        std::fs::write(&path, b"{broken").unwrap();
        let store = CredentialStore::new(&path);
        assert!(store.load().is_err());
        assert!(store.update(|_| Ok(())).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"{broken");
    }

    #[test]
    fn a_wrongly_typed_entry_is_an_error_that_quotes_no_value() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("credentials.json");
        // A token pasted into the wrong field.
        let bad = r#"{"providers": {"openai": {"expiresAt": "sk-PASTED-SECRET-1"}}}"#;
        std::fs::write(&path, bad).unwrap();
        let store = CredentialStore::new(&path);
        let err = format!("{:#}", store.load().unwrap_err());
        assert!(!err.contains("sk-PASTED-SECRET-1"), "{err}");
        assert!(err.contains("providers.openai"), "{err}");
        let err = format!("{:#}", store.update(|_| Ok(())).unwrap_err());
        assert!(!err.contains("sk-PASTED-SECRET-1"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), bad);
    }

    #[test]
    fn oauth_wins_over_a_key_and_expires_with_a_margin() {
        let c = Credential {
            api_key: Some("k".into()),
            access_token: Some("at".into()),
            expires_at: Some(1_000),
            auth_method: Some("oauth".into()),
            ..Default::default()
        };
        assert_eq!(c.secret(), Some(("at".into(), true)));
        assert!(!c.is_expired(900));
        assert!(c.is_expired(941));
        let k = Credential {
            api_key: Some("k".into()),
            expires_at: Some(0),
            ..Default::default()
        };
        assert_eq!(k.secret(), Some(("k".into(), false)));
        assert!(!k.is_expired(10_000));
    }
}
