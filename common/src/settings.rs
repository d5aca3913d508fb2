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

/// A copy with every secret value replaced by a mask showing at most the last 4 characters.
pub fn masked(settings: &Value) -> Value {
    match settings {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let v = if is_secret_key(k) && !v.is_object() {
                        mask_value(v)
                    } else {
                        masked(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(masked).collect()),
        other => other.clone(),
    }
}

fn mask_value(v: &Value) -> Value {
    match v {
        Value::String(s) if s.chars().count() > 8 => {
            let tail: String = s
                .chars()
                .rev()
                .take(4)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            Value::String(format!("****{tail}"))
        }
        Value::String(s) if !s.is_empty() => Value::String("****".into()),
        other => other.clone(),
    }
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
    fn secrets_are_masked() {
        let s = json!({"providers": {"openai": {"apiKey": "sk-1234567890abcd", "model": "m"}}});
        let m = masked(&s);
        assert_eq!(m["providers"]["openai"]["apiKey"], "****abcd");
        assert_eq!(m["providers"]["openai"]["model"], "m");
    }
}
