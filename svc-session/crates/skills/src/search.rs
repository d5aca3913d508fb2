//! Where `skill.search` looks and how `skill.install` resolves names:
//!
//! * **Marketplaces**, registered in `$SNOWPEA_HOME/marketplaces.json` as
//!   `{"<name>": "<path or URL>"}` (or `{"<name>": {"source": "<path or URL>"}}`), each
//!   pointing at a Claude Code `marketplace.json` (or the folder holding
//!   `.claude-plugin/marketplace.json` / `marketplace.json`): `{plugins: [{name, description,
//!   source}]}` where `source` is a path relative to the marketplace, a URL, or
//!   `{source: "github", repo: "o/r"}` / `{source: "url", url}`.
//! * **The registry** at settings `skills.registry.url`: `GET <url>/search?q=<query>` answers
//!   `{skills: [{id, name, summary, installSpec, downloads, rating}], notIncluded: [{label,
//!   reason}]}`, and `GET <url>/skills/<id>` answers `{installSpec}` (or `{source}`).
//!
//! A source that cannot be read (missing file, HTTP error, timeout of [`FETCH_TIMEOUT`]) is
//! reported in `unavailable` as `"<label>: <reason>"`, never as an error of the call.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use snowpea_proto::session::v1 as pb;

use snowpea_session_error::{Error, Result};

/// Longest wait for one marketplace or registry answer.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest marketplace or registry document read, in bytes.
pub const MAX_DOC_BYTES: usize = 4 * 1024 * 1024;

/// The marketplaces and registry of one home.
#[derive(Debug, Clone)]
pub struct Sources {
    /// `$SNOWPEA_HOME/marketplaces.json`.
    pub marketplaces_file: PathBuf,
    /// settings `skills.registry.url`, if set.
    pub registry_url: Option<String>,
}

/// One registered marketplace.
#[derive(Debug, Clone)]
struct Marketplace {
    name: String,
    location: String,
}

async fn fetch(location: &str) -> std::result::Result<(Value, Option<PathBuf>), String> {
    if location.starts_with("http://") || location.starts_with("https://") {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
        let resp = client
            .get(location)
            .send()
            .await
            .map_err(|e| format!("{}", e.without_url()))?;
        if !resp.status().is_success() {
            return Err(format!("HTTP {}", resp.status().as_u16()));
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| e.without_url().to_string())?;
        if bytes.len() > MAX_DOC_BYTES {
            return Err(format!("larger than {MAX_DOC_BYTES} bytes"));
        }
        let v = serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))?;
        return Ok((v, None));
    }
    let mut path = PathBuf::from(location.strip_prefix("file://").unwrap_or(location));
    if path.is_dir() {
        path = [".claude-plugin/marketplace.json", "marketplace.json"]
            .iter()
            .map(|p| path.join(p))
            .find(|p| p.is_file())
            .ok_or_else(|| "no marketplace.json in that folder".to_string())?;
    }
    let text = tokio::fs::read_to_string(&path)
        .await
        .map_err(|e| e.to_string())?;
    if text.len() > MAX_DOC_BYTES {
        return Err(format!("larger than {MAX_DOC_BYTES} bytes"));
    }
    let v = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    // The marketplace root: the folder above `.claude-plugin/`, else the file's folder.
    let dir = path.parent().map(|p| {
        if p.file_name().and_then(|n| n.to_str()) == Some(".claude-plugin") {
            p.parent().unwrap_or(p).to_path_buf()
        } else {
            p.to_path_buf()
        }
    });
    Ok((v, dir))
}

fn plugin_source(entry: &Value, base: Option<&Path>) -> Option<String> {
    match entry.get("source")? {
        Value::String(s) if s.starts_with("./") || s.starts_with("../") || !s.contains(':') => {
            base.map(|b| b.join(s).to_string_lossy().into_owned())
        }
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => match o.get("source").and_then(Value::as_str) {
            Some("github") => o
                .get("repo")
                .and_then(Value::as_str)
                .map(|r| format!("github:{r}")),
            Some("url") | Some("git") => o.get("url").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        },
        _ => None,
    }
}

impl Sources {
    fn marketplaces(&self) -> std::result::Result<Vec<Marketplace>, String> {
        let text = match std::fs::read_to_string(&self.marketplaces_file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e.to_string()),
        };
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Object(m) = v else {
            return Err("must be an object of name → location".into());
        };
        Ok(m.into_iter()
            .filter_map(|(name, v)| {
                let location = match &v {
                    Value::String(s) => Some(s.clone()),
                    Value::Object(o) => o
                        .get("source")
                        .or_else(|| o.get("url"))
                        .or_else(|| o.get("path"))
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    _ => None,
                }?;
                Some(Marketplace { name, location })
            })
            .collect())
    }

    /// `skill.search`: every marketplace's plugins and the registry's answer matching
    /// `query` (case-insensitive, over name and summary; an empty query matches all).
    /// `installed` says whether a plugin of that name is installed.
    pub async fn search(
        &self,
        query: &str,
        installed: &(dyn Fn(&str) -> bool + Send + Sync),
    ) -> pb::SkillSearchResult {
        let q = query.trim().to_lowercase();
        let matches = |name: &str, summary: &str| {
            q.is_empty() || name.to_lowercase().contains(&q) || summary.to_lowercase().contains(&q)
        };
        let mut out = pb::SkillSearchResult::default();
        match self.marketplaces() {
            Err(e) => out.unavailable.push(format!("marketplaces.json: {e}")),
            Ok(list) => {
                for m in list {
                    match fetch(&m.location).await {
                        Err(e) => out.unavailable.push(format!("{}: {e}", m.name)),
                        Ok((doc, _)) => {
                            for p in doc
                                .get("plugins")
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                            {
                                let Some(name) = p.get("name").and_then(Value::as_str) else {
                                    continue;
                                };
                                let summary = p
                                    .get("description")
                                    .and_then(Value::as_str)
                                    .unwrap_or_default();
                                if !matches(name, summary) {
                                    continue;
                                }
                                out.skills.push(pb::Skill {
                                    name: name.to_owned(),
                                    summary: summary.to_owned(),
                                    kind: "plugin".into(),
                                    source: format!("marketplace:{}", m.name),
                                    install_spec: format!("{}/{name}", m.name),
                                    installed: installed(name),
                                    id: format!("{}/{name}", m.name),
                                    ..Default::default()
                                });
                            }
                        }
                    }
                }
            }
        }
        if let Some(url) = &self.registry_url {
            let base = url.trim_end_matches('/');
            let mut u = match url::Url::parse(&format!("{base}/search")) {
                Ok(u) => u,
                Err(e) => {
                    out.unavailable.push(format!("registry: bad URL: {e}"));
                    return out;
                }
            };
            u.query_pairs_mut().append_pair("q", query);
            match fetch(u.as_str()).await {
                Err(e) => out.unavailable.push(format!("registry: {e}")),
                Ok((doc, _)) => {
                    for s in doc
                        .get("skills")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let Some(name) = s.get("name").and_then(Value::as_str) else {
                            continue;
                        };
                        let str_of = |k: &str| {
                            s.get(k)
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned()
                        };
                        let id = str_of("id");
                        out.skills.push(pb::Skill {
                            name: name.to_owned(),
                            summary: str_of("summary"),
                            kind: Some(str_of("kind"))
                                .filter(|k| {
                                    ["skill", "agent", "command", "plugin"].contains(&k.as_str())
                                })
                                .unwrap_or_else(|| "skill".into()),
                            source: "registry".into(),
                            install_spec: Some(str_of("installSpec"))
                                .filter(|s| !s.is_empty())
                                .unwrap_or_else(|| format!("registry:{id}")),
                            installed: installed(name),
                            downloads: s.get("downloads").and_then(Value::as_i64).unwrap_or(0),
                            rating: s.get("rating").and_then(Value::as_f64).unwrap_or(0.0),
                            id,
                        });
                    }
                    for n in doc
                        .get("notIncluded")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        if let Some(label) = n.get("label").and_then(Value::as_str) {
                            out.not_included
                                .push(pb::skill_search_result::NotIncludedItem {
                                    label: label.to_owned(),
                                    reason: n
                                        .get("reason")
                                        .and_then(Value::as_str)
                                        .unwrap_or_default()
                                        .to_owned(),
                                });
                        }
                    }
                }
            }
        }
        out
    }

    /// The install source of `<marketplace>/<plugin>`.
    pub async fn marketplace_source(&self, market: &str, plugin: &str) -> Result<String> {
        let list = self
            .marketplaces()
            .map_err(|e| Error::invalid("params.source", format!("marketplaces.json: {e}")))?;
        let Some(m) = list.into_iter().find(|m| m.name == market) else {
            return Err(Error::invalid(
                "params.source",
                format!("no marketplace named {market} is registered"),
            ));
        };
        let (doc, base) = fetch(&m.location)
            .await
            .map_err(|e| Error::invalid("params.source", format!("{market}: {e}")))?;
        let entry = doc
            .get("plugins")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("name").and_then(Value::as_str) == Some(plugin))
            .ok_or_else(|| {
                Error::invalid("params.source", format!("{market} has no plugin {plugin}"))
            })?;
        plugin_source(entry, base.as_deref()).ok_or_else(|| {
            Error::invalid(
                "params.source",
                format!("{market}/{plugin}: its source is not one this daemon can install"),
            )
        })
    }

    /// The install source of `registry:<id>`.
    pub async fn registry_source(&self, id: &str) -> Result<String> {
        let Some(url) = &self.registry_url else {
            return Err(Error::invalid(
                "params.source",
                "no registry is configured (settings skills.registry.url)",
            ));
        };
        let mut u = url::Url::parse(&format!("{}/skills/", url.trim_end_matches('/')))
            .map_err(|e| Error::invalid("params.source", format!("bad registry URL: {e}")))?;
        u.path_segments_mut()
            .map_err(|_| Error::invalid("params.source", "bad registry URL"))?
            .pop_if_empty()
            .push(id);
        let (doc, _) = fetch(u.as_str())
            .await
            .map_err(|e| Error::invalid("params.source", format!("registry: {e}")))?;
        doc.get("installSpec")
            .or_else(|| doc.get("source"))
            .and_then(Value::as_str)
            .filter(|s| !s.starts_with("registry:"))
            .map(str::to_owned)
            .ok_or_else(|| {
                Error::invalid(
                    "params.source",
                    format!("registry has no install source for {id}"),
                )
            })
    }
}
