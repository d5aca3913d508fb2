//! The model settings a suite was started with, and how the caller's differ (issue 39
//! item 1). The daemon reads `SNOWPEA_PROVIDER` and the vendors' API key / endpoint
//! variables ([`MODEL_VARS`]) only when it starts, so a command that finds the suite already
//! running must tell the user when the model they asked for is not the one it runs.
//!
//! The supervisor records its own values in `run/model-env.json` (0600, written before
//! `daemon.json`, see [`crate::supervise`]): `SNOWPEA_PROVIDER` as it is (a script path or a
//! vendor name, no secret), every other variable only as a fingerprint — the first 16 hex
//! digits of SHA-256 over the home's token, the name and the value — so the file tells
//! "the same key" from "another key" without holding one. A variable the caller did not
//! set is not compared: `snowpea supervisor start` in a plain shell keeps whatever the suite
//! runs with.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use snowpea_common::home::Home;

/// The variable selecting the provider: `fake:<script.json>` or a vendor name.
pub const PROVIDER_VAR: &str = "SNOWPEA_PROVIDER";

/// Every environment variable that picks or configures a model when the daemon starts
/// (`SNOWPEA_PROVIDER`, then the key and endpoint variables of svc-session's provider presets,
/// `svc-session/src/provider/presets.rs`).
pub const MODEL_VARS: &[&str] = &[
    PROVIDER_VAR,
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "MOONSHOT_API_KEY",
    "KIMI_API_KEY",
    "DASHSCOPE_API_KEY",
    "QWEN_API_KEY",
    "ZAI_API_KEY",
    "GLM_API_KEY",
    "MINIMAX_API_KEY",
    "OLLAMA_HOST",
];

/// The largest fake-provider script [`check_fake_script`] reads (the scripts of the
/// repository are a few KiB).
pub const MAX_SCRIPT_BYTES: u64 = 8 * 1024 * 1024;

/// One recorded variable: `SNOWPEA_PROVIDER`'s value, or another variable's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    /// The value itself (`SNOWPEA_PROVIDER` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// 16 hex digits of SHA-256(token ‖ 0 ‖ name ‖ 0 ‖ value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// The model variables of one environment (the suite's, or a caller's), the non-empty
/// ones only. Serialized as `run/model-env.json`: `{"vars": {"<NAME>": {value|fingerprint}}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelEnv {
    /// Recorded variables by name.
    pub vars: BTreeMap<String, Recorded>,
}

/// How one variable of the caller differs from the suite's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The variable.
    pub name: String,
    /// The suite's value (`SNOWPEA_PROVIDER` only), `None` when it was not set there or is
    /// a secret.
    pub suite_value: Option<String>,
    /// True when the suite was started without the variable.
    pub unset_in_suite: bool,
    /// The caller's value (`SNOWPEA_PROVIDER` only).
    pub caller_value: Option<String>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.caller_value, &self.suite_value, self.unset_in_suite) {
            (Some(here), _, true) => {
                write!(f, "{}={here} here; the suite runs without it", self.name)
            }
            (Some(here), Some(there), false) => {
                write!(f, "{}={here} here; the suite runs with {there}", self.name)
            }
            (_, _, true) => write!(f, "{} is set here; the suite runs without it", self.name),
            _ => write!(f, "{} here differs from the suite's", self.name),
        }
    }
}

impl ModelEnv {
    /// The model variables `env` returns, fingerprinted with `token`.
    pub fn capture(env: &dyn Fn(&str) -> Option<String>, token: &str) -> ModelEnv {
        let vars = MODEL_VARS
            .iter()
            .filter_map(|name| {
                let value = env(name).filter(|v| !v.trim().is_empty())?;
                let recorded = if *name == PROVIDER_VAR {
                    Recorded {
                        value: Some(value.trim().to_owned()),
                        fingerprint: None,
                    }
                } else {
                    Recorded {
                        value: None,
                        fingerprint: Some(fingerprint(token, name, &value)),
                    }
                };
                Some(((*name).to_owned(), recorded))
            })
            .collect();
        ModelEnv { vars }
    }

    /// The model variables of this process's environment, fingerprinted with `home`'s token;
    /// a usable `fake:` script path made absolute, as `start` hands it to the suite.
    pub fn of_process(home: &Home) -> ModelEnv {
        let token = home.read_token().unwrap_or_default();
        let cwd = std::env::current_dir().unwrap_or_default();
        ModelEnv::capture(
            &|k| {
                let v = std::env::var(k).ok()?;
                if k == PROVIDER_VAR {
                    return Some(check_fake_script(&v, &cwd).unwrap_or(v));
                }
                Some(v)
            },
            &token,
        )
    }

    /// `run/model-env.json` of `home`.
    pub fn path(home: &Home) -> PathBuf {
        home.run_dir().join("model-env.json")
    }

    /// Writes the record (atomically, 0600).
    pub fn write(&self, home: &Home) -> anyhow::Result<()> {
        let bytes = serde_json::to_vec_pretty(self)?;
        snowpea_common::home::write_private(&Self::path(home), &bytes)
    }

    /// The running suite's record; `None` when there is none (a suite of an older build) or
    /// it does not parse.
    pub fn read(home: &Home) -> Option<ModelEnv> {
        let bytes = std::fs::read(Self::path(home)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// `SNOWPEA_PROVIDER`, when set.
    pub fn provider(&self) -> Option<&str> {
        self.vars.get(PROVIDER_VAR)?.value.as_deref()
    }

    /// True when no model variable is set.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// How the caller's variables (`self`) differ from the suite's: every variable set here
    /// that the suite lacks or has with another value.
    pub fn differences(&self, suite: &ModelEnv) -> Vec<Difference> {
        self.vars
            .iter()
            .filter_map(|(name, here)| {
                let there = suite.vars.get(name);
                if there == Some(here) {
                    return None;
                }
                Some(Difference {
                    name: name.clone(),
                    suite_value: there.and_then(|t| t.value.clone()),
                    unset_in_suite: there.is_none(),
                    caller_value: here.value.clone(),
                })
            })
            .collect()
    }

    /// The command that restarts the suite of `home_arg` (`--home DIR` when the caller
    /// gave one) with these variables: `SNOWPEA_PROVIDER` spelled out, secrets as `…`.
    pub fn restart_command(&self, home_arg: Option<&Path>) -> String {
        let home = home_arg
            .map(|h| format!(" --home {}", shell_word(&h.display().to_string())))
            .unwrap_or_default();
        let assignments: Vec<String> = self
            .vars
            .iter()
            .map(|(name, r)| match &r.value {
                Some(v) => format!("{name}={}", shell_word(v)),
                None => format!("{name}=…"),
            })
            .collect();
        let env = if assignments.is_empty() {
            String::new()
        } else {
            format!("{} ", assignments.join(" "))
        };
        format!("snowpea supervisor stop{home} && {env}snowpea supervisor start{home}")
    }
}

/// The message for a caller whose model variables differ from the running suite's: what
/// differs, and the command that applies them.
pub fn mismatch_message(
    differences: &[Difference],
    caller: &ModelEnv,
    home_arg: Option<&Path>,
) -> String {
    let mut text = String::from(
        "the running suite was started with other model settings than this shell's, and the \
         daemon reads them only when it starts:\n",
    );
    for d in differences {
        text.push_str(&format!("  {d}\n"));
    }
    text.push_str(&format!(
        "Restart it to use them:\n  {}",
        caller.restart_command(home_arg)
    ));
    text
}

/// `fp` of one variable (see the module doc).
fn fingerprint(token: &str, name: &str, value: &str) -> String {
    let mut h = Sha256::new();
    h.update(token.as_bytes());
    h.update([0]);
    h.update(name.as_bytes());
    h.update([0]);
    h.update(value.as_bytes());
    hex::encode(&h.finalize()[..8])
}

/// `s` cut to 64 characters (what an error echoes of a name it was given).
fn clip(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// `s` as one shell word (quoted when it holds anything but safe characters).
fn shell_word(s: &str) -> String {
    shlex::try_quote(s)
        .map(|q| q.into_owned())
        .unwrap_or_else(|_| s.to_owned())
}

/// Checks a `SNOWPEA_PROVIDER=fake:<script>` before a suite is started with it: the file
/// exists, is at most [`MAX_SCRIPT_BYTES`], and is a JSON object holding only `steps` (an
/// array of objects) and `default` (an object) — svc-session checks each step when it
/// loads the script. Returns the value with the script's path made absolute (the daemon
/// does not run in the caller's directory), or why it cannot be used. Any other value
/// (a vendor name) is returned as it is.
pub fn check_fake_script(spec: &str, cwd: &Path) -> Result<String, String> {
    let Some(raw) = spec.trim().strip_prefix("fake:") else {
        return Ok(spec.to_owned());
    };
    let raw = raw.trim();
    let fix = "e.g. SNOWPEA_PROVIDER=fake:$PWD/examples/demo.json";
    if raw.is_empty() {
        return Err(format!("{PROVIDER_VAR}=fake: names no script ({fix})"));
    }
    let path = cwd.join(raw);
    let meta = std::fs::metadata(&path).map_err(|e| {
        format!(
            "{PROVIDER_VAR}={spec}: cannot read {}: {e} ({fix})",
            path.display()
        )
    })?;
    if !meta.is_file() {
        return Err(format!(
            "{PROVIDER_VAR}={spec}: {} is not a file ({fix})",
            path.display()
        ));
    }
    if meta.len() > MAX_SCRIPT_BYTES {
        return Err(format!(
            "{PROVIDER_VAR}={spec}: {} is {} bytes, more than a script may be ({MAX_SCRIPT_BYTES})",
            path.display(),
            meta.len()
        ));
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{PROVIDER_VAR}={spec}: cannot read {}: {e}", path.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{PROVIDER_VAR}={spec}: {} is not JSON: {e}", path.display()))?;
    let Some(obj) = doc.as_object() else {
        return Err(format!(
            "{PROVIDER_VAR}={spec}: {} must hold a JSON object {{\"steps\": […], \"default\": {{…}}}}",
            path.display()
        ));
    };
    for (key, value) in obj {
        let ok = match key.as_str() {
            "steps" => value
                .as_array()
                .is_some_and(|steps| steps.iter().all(serde_json::Value::is_object)),
            "default" => value.is_object() || value.is_null(),
            _ => false,
        };
        if !ok {
            return Err(format!(
                "{PROVIDER_VAR}={spec}: {}: `{}` {}",
                path.display(),
                clip(key),
                if matches!(key.as_str(), "steps" | "default") {
                    "must be an array of step objects (steps) or one step object (default)"
                } else {
                    "is not a field of a script (steps, default)"
                }
            ));
        }
    }
    let absolute = std::fs::canonicalize(&path).unwrap_or(path);
    Ok(format!("fake:{}", absolute.display()))
}

#[cfg(test)]
#[path = "model_env_tests.rs"]
mod tests;
