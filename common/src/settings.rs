//! Settings (`$SNOWPEA_HOME/settings.json` and a project's `.snowpea/settings.json`):
//! load, deep-merge (project over global), dotted-path lookup and secret masking.
//! Secrets are masked whenever settings leave the process and never logged.

use std::path::Path;

use serde_json::{Map, Value};

/// Reads a settings document; a missing file is `{}`, a malformed one is an error naming
/// the file.
pub fn load_file(path: &Path) -> anyhow::Result<Value> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(Value::Object(Map::new())),
        Ok(bytes) => {
            let v: Value = serde_json::from_slice(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            anyhow::ensure!(
                v.is_object(),
                "{}: settings must be a JSON object",
                path.display()
            );
            Ok(v)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Value::Object(Map::new())),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
    }
}

/// Global settings merged with the project's `<workdir>/.snowpea/settings.json` (project wins).
pub fn load_effective(home: &crate::home::Home, workdir: Option<&Path>) -> anyhow::Result<Value> {
    let mut global = load_file(&home.settings_path())?;
    if let Some(w) = workdir {
        let project = load_file(&w.join(".snowpea").join("settings.json"))?;
        deep_merge(&mut global, &project);
    }
    Ok(global)
}

/// Read-modify-write of one settings file (`$SNOWPEA_HOME/settings.json` or a project's
/// `<workdir>/.snowpea/settings.json`): loads the document (missing → `{}`), lets `edit`
/// change it, and writes it back atomically (temp file + rename, mode 0600, the parent
/// directory created 0700 when missing). Keys `edit` does not touch are kept as they were.
///
/// Errors: a malformed file is an error naming it and is **never overwritten**; an error
/// returned by `edit` aborts the write, leaving the file byte-for-byte unchanged. Writers in
/// one process are serialised by a process-wide lock, so two concurrent edits never lose
/// each other's keys. Returns what `edit` returned.
pub fn update_file<T>(
    path: &Path,
    edit: impl FnOnce(&mut Value) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    static WRITE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = WRITE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut doc = load_file(path)?;
    let out = edit(&mut doc)?;
    anyhow::ensure!(
        doc.is_object(),
        "{}: settings must stay a JSON object",
        path.display()
    );
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        }
    }
    let mut bytes = serde_json::to_vec_pretty(&doc)?;
    bytes.push(b'\n');
    crate::home::write_private(path, &bytes)?;
    Ok(out)
}

/// [`update_file`] on tokio's blocking pool, for async callers: the read, the edit, the
/// temp-file write with its fsync and the rename never run on an async worker thread.
/// Same atomicity and errors as [`update_file`]; a panic inside `edit` is an error.
pub async fn update_file_blocking<T: Send + 'static>(
    path: std::path::PathBuf,
    edit: impl FnOnce(&mut Value) -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(|| update_file(&path, edit)))
        .await
        .map_err(|e| anyhow::anyhow!("settings write did not finish: {e}"))?
}

/// Merges `patch` into `base`: objects merge key by key, `null` deletes, anything else replaces.
pub fn deep_merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(k);
                } else if let Some(existing) = b.get_mut(k) {
                    deep_merge(existing, v);
                } else {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

/// Value at a dotted path, e.g. `get(&s, "approvals.timeoutSec")`.
pub fn get<'a>(settings: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(settings, |v, k| v.get(k))
}

/// True for keys whose values are secrets.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "apikey",
        "api_key",
        "token",
        "secret",
        "password",
        "authorization",
        "credentials",
    ]
    .iter()
    .any(|s| k.contains(s))
}

/// What a secret value is replaced with whenever settings leave the owner (`settings.get`,
/// `settings.set` results; protocol 1.25.0 `settings.get`).
pub const MASK: &str = "***";

/// True for a settings field whose value is a secret and is shown as [`MASK`]: api keys,
/// tokens, passwords and secrets in any spelling (`api_key`, `apiKey`, `API-KEY`, `token`,
/// `refresh_token`, `accessToken`, `id_token`, `oauth_token`, `botToken`, `password`,
/// `passwd`, `client_secret`, `secretKey`, `privateKey`, `authorization`, …). The name is
/// compared without case, `_`, `-` and `.`; a plural such as `max_tokens` is not a secret.
pub fn is_secret_field(key: &str) -> bool {
    let k: String = key
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' '))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    const SUFFIXES: &[&str] = &[
        "apikey",
        "token",
        "password",
        "passwd",
        "passphrase",
        "secret",
        "secretkey",
        "accesskey",
        "privatekey",
        "credential",
        "credentials",
    ];
    k == "authorization" || k == "cookie" || SUFFIXES.iter().any(|s| k.ends_with(s))
}

/// True for a field of a settings document whose value is a secret: [`is_secret_field`],
/// and a bare `key` anywhere under `providers` (`providers.<vendor>.key`, the reference's
/// spelling of an API key). `top` is the document's top-level key the field is under.
pub fn is_secret_at(top: Option<&str>, key: &str) -> bool {
    is_secret_field(key) || (key.eq_ignore_ascii_case("key") && top == Some("providers"))
}

/// A copy with every secret value (see [`is_secret_at`]) replaced by [`MASK`]. A
/// secret field holding an object (e.g. `search.credentials`) is walked instead, so the
/// secrets inside it are masked and its other fields stay readable; `null` stays `null`.
pub fn masked(settings: &Value) -> Value {
    fn walk(v: &Value, top: Option<&str>) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| {
                        let top = top.or(Some(k.as_str()));
                        let v = match v {
                            Value::Null | Value::Object(_) => walk(v, top),
                            _ if is_secret_at(top, k) => Value::String(MASK.into()),
                            _ => walk(v, top),
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|x| walk(x, top)).collect()),
            other => other.clone(),
        }
    }
    walk(settings, None)
}

/// The dotted path (e.g. `providers.openai.apiKey`) of the first secret field in `patch`
/// whose value is the mask `"***"` — a client echoing what `settings.get` showed it —
/// or `None`. `settings.set` refuses the whole patch when there is one.
pub fn masked_echo(patch: &Value) -> Option<String> {
    fn top(path: &[String]) -> Option<&str> {
        path.first().map(|t| t.split('[').next().unwrap_or(t))
    }
    fn walk(v: &Value, path: &mut Vec<String>) -> Option<String> {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    path.push(k.clone());
                    let hit = match child {
                        Value::String(s) if s == MASK && is_secret_at(top(path), k) => {
                            Some(path.join("."))
                        }
                        _ => walk(child, path),
                    };
                    path.pop();
                    if hit.is_some() {
                        return hit;
                    }
                }
                None
            }
            Value::Array(a) => a.iter().enumerate().find_map(|(i, child)| {
                let last = path.pop().unwrap_or_default();
                path.push(format!("{last}[{i}]"));
                let hit = walk(child, path);
                path.pop();
                path.push(last);
                hit
            }),
            _ => None,
        }
    }
    walk(patch, &mut Vec::new())
}

/// Top-level keys whose values differ between two settings documents, sorted (the `keys`
/// of `settings.changed`, the `changedKeys` of `system.reloadSettings`).
pub fn changed_keys(old: &Value, new: &Value) -> Vec<String> {
    let empty = Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    let mut keys: Vec<String> = o
        .keys()
        .chain(n.keys())
        .filter(|k| o.get(*k) != n.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_and_lookup() {
        let mut a = json!({"approvals": {"timeoutSec": 300}, "x": 1});
        deep_merge(&mut a, &json!({"approvals": {"timeoutSec": 5}, "x": null}));
        assert_eq!(get(&a, "approvals.timeoutSec"), Some(&json!(5)));
        assert!(a.get("x").is_none());
    }

    #[test]
    fn update_file_keeps_other_keys_and_never_overwrites_a_broken_file() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join(".snowpea").join("settings.json");
        update_file(&p, |v| {
            v["a"] = json!(1);
            Ok(())
        })
        .unwrap();
        update_file(&p, |v| {
            v["b"] = json!({"c": 2});
            Ok(())
        })
        .unwrap();
        assert_eq!(load_file(&p).unwrap(), json!({"a": 1, "b": {"c": 2}}));
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // An edit that fails writes nothing.
        let before = std::fs::read(&p).unwrap();
        assert!(update_file(&p, |v| -> anyhow::Result<()> {
            v["a"] = json!(9);
            anyhow::bail!("refused")
        })
        .is_err());
        assert_eq!(std::fs::read(&p).unwrap(), before);
        // A corrupt file is an error and stays as the user left it.
        std::fs::write(&p, b"{not json").unwrap();
        assert!(update_file(&p, |_| Ok(())).is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"{not json");
    }

    #[test]
    fn secrets_in_every_spelling_are_masked_and_nothing_else() {
        let secrets = [
            "api_key",
            "apiKey",
            "API-KEY",
            "apikey",
            "token",
            "refresh_token",
            "refreshToken",
            "access_token",
            "accessToken",
            "id_token",
            "oauth_token",
            "botToken",
            "password",
            "passwd",
            "client_secret",
            "secretKey",
            "privateKey",
            "Authorization",
        ];
        for k in secrets {
            let s = json!({"providers": {"x": {k: "sk-1234567890abcd", "model": "m"}}});
            let m = masked(&s);
            assert_eq!(m["providers"]["x"][k], MASK, "{k}");
            assert_eq!(m["providers"]["x"]["model"], "m");
            assert!(!m.to_string().contains("sk-1234"), "{k}");
        }
        let s = json!({"agent": {"max_tokens": 16384, "tokenizer": "bpe"}, "token": null,
                       "search": {"credentials": {"brave": {"api_key": "k", "plan": "free"}}},
                       "list": [{"password": 7}]});
        let m = masked(&s);
        assert_eq!(m["agent"], s["agent"]);
        assert_eq!(m["token"], Value::Null);
        assert_eq!(
            m["search"]["credentials"]["brave"],
            json!({"api_key": MASK, "plan": "free"})
        );
        assert_eq!(m["list"][0]["password"], MASK);
        // `key` is a secret under providers only (an allowlist entry's key is not).
        let s = json!({"providers": {"x": {"key": "sk-1"}}, "allowlist": [{"key": "shell:ls"}]});
        let m = masked(&s);
        assert_eq!(m["providers"]["x"]["key"], MASK);
        assert_eq!(m["allowlist"][0]["key"], "shell:ls");
        assert_eq!(
            masked_echo(&json!({"providers": {"x": {"key": "***"}}})),
            Some("providers.x.key".into())
        );
    }

    #[test]
    fn a_masked_echo_is_found_with_its_path() {
        assert_eq!(
            masked_echo(&json!({"providers": {"openai": {"model": "***", "apiKey": "***"}}})),
            Some("providers.openai.apiKey".into())
        );
        assert_eq!(
            masked_echo(&json!({"gateway": {"slack": {"token": "xoxb"}}})),
            None
        );
        assert_eq!(
            masked_echo(&json!({"a": [{"password": "x"}, {"password": "***"}]})),
            Some("a[1].password".into())
        );
    }

    #[test]
    fn changed_keys_are_the_top_level_differences() {
        let a = json!({"a": 1, "b": {"c": 1}, "d": 2});
        let b = json!({"a": 1, "b": {"c": 2}, "e": 3});
        assert_eq!(changed_keys(&a, &b), vec!["b", "d", "e"]);
        assert!(changed_keys(&a, &a).is_empty());
    }
}
