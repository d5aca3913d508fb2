//! The `lsp_*` tools (upstream-behaviour §9: seven tools): ask the file's language server.
//! Offered when LSP is on; with LSP off (`lsp.enabled: false`) or for a session whose tools
//! run over ssh or in a container they are listed `inactive` and a call fails with
//! `tool_inactive`. Lines and characters are 1-based in arguments and results.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::client::{path_of, uri_of};
use super::Lsp;
use crate::backend::BackendKind;
use crate::tools::{args, paths, Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use snowpea_session_llm::provider::ToolSpec;

/// Longest wait for one LSP request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Most result lines a tool returns.
const MAX_RESULTS: usize = 200;

/// Which `lsp_*` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// `lsp_definition`.
    Definition,
    /// `lsp_references`.
    References,
    /// `lsp_hover`.
    Hover,
    /// `lsp_symbols` (the file's symbols).
    Symbols,
    /// `lsp_diagnostics`.
    Diagnostics,
    /// `lsp_rename_preview` (the edits a rename would make, not applied).
    RenamePreview,
    /// `lsp_workspace_symbols`.
    WorkspaceSymbols,
}

/// One `lsp_*` tool.
#[derive(Debug, Clone)]
pub struct LspTool {
    which: Which,
    lsp: Arc<Lsp>,
}

/// Every `lsp_*` tool over `lsp`.
pub fn all(lsp: &Arc<Lsp>) -> Vec<Arc<dyn Tool>> {
    [
        Which::Definition,
        Which::References,
        Which::Hover,
        Which::Symbols,
        Which::Diagnostics,
        Which::RenamePreview,
        Which::WorkspaceSymbols,
    ]
    .into_iter()
    .map(|which| {
        Arc::new(LspTool {
            which,
            lsp: lsp.clone(),
        }) as Arc<dyn Tool>
    })
    .collect()
}

/// Why the `lsp_*` tools are inactive for a session with `backend` in `workdir`, if they are.
pub fn inactive_reason(lsp: &Lsp, backend: BackendKind, workdir: &Path) -> Option<String> {
    if backend != BackendKind::Local {
        return Some(format!(
            "LSP runs on the daemon host only; this session's tools run on the {} backend",
            backend.as_str()
        ));
    }
    (!lsp.enabled(workdir)).then(|| "LSP is turned off (settings lsp.enabled: false)".into())
}

fn position(args: &Value) -> Result<(u64, u64), String> {
    let line = args::optional_u64(args, "line")?.ok_or("missing required argument `line`")?;
    let ch =
        args::optional_u64(args, "character")?.ok_or("missing required argument `character`")?;
    if line == 0 || ch == 0 {
        return Err("arguments `line` and `character` are 1-based".into());
    }
    Ok((line - 1, ch - 1))
}

fn loc_text(workdir: &Path, uri: &str, range: &Value) -> String {
    let path = path_of(uri)
        .map(|p| paths::display_path(workdir, &p))
        .unwrap_or_else(|| uri.to_owned());
    let line = range["start"]["line"].as_u64().unwrap_or(0) + 1;
    let ch = range["start"]["character"].as_u64().unwrap_or(0) + 1;
    format!("{path}:{line}:{ch}")
}

fn locations(workdir: &Path, v: &Value) -> Vec<String> {
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        Value::Null => vec![],
        other => vec![other],
    };
    items
        .into_iter()
        .filter_map(|l| {
            let uri = l["uri"].as_str().or(l["targetUri"].as_str())?;
            let range = if l["range"].is_object() {
                &l["range"]
            } else {
                &l["targetSelectionRange"]
            };
            Some(loc_text(workdir, uri, range))
        })
        .collect()
}

fn symbol_kind(k: &Value) -> String {
    let kind = k.as_u64().unwrap_or(0);
    const NAMES: [&str; 27] = [
        "?",
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum member",
        "struct",
        "event",
        "operator",
        "type parameter",
    ];
    NAMES.get(kind as usize).unwrap_or(&"?").to_string()
}

fn symbols(workdir: &Path, v: &Value, depth: usize, out: &mut Vec<String>) {
    let Some(items) = v.as_array() else { return };
    for s in items {
        let name = s["name"].as_str().unwrap_or("?");
        let kind = symbol_kind(&s["kind"]);
        let at = if s["location"].is_object() {
            loc_text(
                workdir,
                s["location"]["uri"].as_str().unwrap_or(""),
                &s["location"]["range"],
            )
        } else {
            format!(
                "line {}",
                s["range"]["start"]["line"].as_u64().unwrap_or(0) + 1
            )
        };
        out.push(format!("{}{name} ({kind}) {at}", "  ".repeat(depth)));
        symbols(workdir, &s["children"], depth + 1, out);
    }
}

fn hover_text(v: &Value) -> String {
    match &v["contents"] {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("value")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        Value::Array(a) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| x["value"].as_str().unwrap_or("").to_owned())
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn rename_edits(workdir: &Path, v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |uri: &str, edits: &Value| {
        for e in edits.as_array().into_iter().flatten() {
            out.push(format!(
                "{} → {}",
                loc_text(workdir, uri, &e["range"]),
                e["newText"].as_str().unwrap_or("")
            ));
        }
    };
    if let Some(changes) = v["changes"].as_object() {
        for (uri, edits) in changes {
            push(uri, edits);
        }
    }
    for dc in v["documentChanges"].as_array().into_iter().flatten() {
        if let Some(uri) = dc["textDocument"]["uri"].as_str() {
            push(uri, &dc["edits"]);
        }
    }
    out
}

impl LspTool {
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<String, String> {
        if let Some(why) = inactive_reason(&self.lsp, ctx.backend.kind(), &ctx.workdir) {
            return Err(format!("tool_inactive: {why}"));
        }
        let raw = args::required_str(&args, "path")?;
        let resolved =
            paths::resolve(&ctx.workdir, raw).map_err(|e| format!("argument `path`: {e}"))?;
        let path = resolved.path.clone();
        let clients = self.lsp.clients_for(&ctx.workdir, &path).await;
        let Some((client, lang)) = clients.into_iter().next() else {
            return Err(format!(
                "no language server serves `{}` (none installed or all disabled; see lsp.catalog)",
                resolved.display
            ));
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read `{}`: {e}", resolved.display))?;
        let since = client.sync(&path, &lang, &text);
        let doc = json!({"uri": uri_of(&path)});
        let wd = ctx.workdir.as_path();
        let lines: Vec<String> = match self.which {
            Which::Definition | Which::References | Which::Hover | Which::RenamePreview => {
                let (line, ch) = position(&args)?;
                let mut params =
                    json!({"textDocument": doc, "position": {"line": line, "character": ch}});
                let method = match self.which {
                    Which::Definition => "textDocument/definition",
                    Which::References => {
                        params["context"] = json!({"includeDeclaration": true});
                        "textDocument/references"
                    }
                    Which::Hover => "textDocument/hover",
                    _ => {
                        params["newName"] = json!(args::required_str(&args, "newName")?);
                        "textDocument/rename"
                    }
                };
                let v = client.request(method, params, REQUEST_TIMEOUT).await?;
                match self.which {
                    Which::Hover => vec![hover_text(&v)]
                        .into_iter()
                        .filter(|s| !s.is_empty())
                        .collect(),
                    Which::RenamePreview => rename_edits(wd, &v),
                    _ => locations(wd, &v),
                }
            }
            Which::Symbols => {
                let v = client
                    .request(
                        "textDocument/documentSymbol",
                        json!({"textDocument": doc}),
                        REQUEST_TIMEOUT,
                    )
                    .await?;
                let mut out = Vec::new();
                symbols(wd, &v, 0, &mut out);
                out
            }
            Which::WorkspaceSymbols => {
                let query = args::optional_str(&args, "query")?.unwrap_or("");
                let v = client
                    .request("workspace/symbol", json!({"query": query}), REQUEST_TIMEOUT)
                    .await?;
                let mut out = Vec::new();
                symbols(wd, &v, 0, &mut out);
                out
            }
            Which::Diagnostics => {
                let d = client
                    .diagnostics(&path, since, Duration::from_secs(5))
                    .await
                    .unwrap_or_default();
                let r = super::manager::report(&resolved.display, &d);
                return Ok(r.text.trim_start().to_owned());
            }
        };
        if lines.is_empty() {
            return Ok("(no results)".into());
        }
        let more = lines.len().saturating_sub(MAX_RESULTS);
        let mut text = lines
            .into_iter()
            .take(MAX_RESULTS)
            .collect::<Vec<_>>()
            .join("\n");
        if more > 0 {
            text.push_str(&format!("\n[truncated: {more} more]"));
        }
        Ok(text)
    }
}

impl Tool for LspTool {
    fn name(&self) -> &'static str {
        match self.which {
            Which::Definition => "lsp_definition",
            Which::References => "lsp_references",
            Which::Hover => "lsp_hover",
            Which::Symbols => "lsp_symbols",
            Which::Diagnostics => "lsp_diagnostics",
            Which::RenamePreview => "lsp_rename_preview",
            Which::WorkspaceSymbols => "lsp_workspace_symbols",
        }
    }

    fn spec(&self) -> ToolSpec {
        let pos = json!({
            "path": {"type": "string", "description": "File, relative to the working directory."},
            "line": {"type": "integer", "minimum": 1, "description": "Line (1-based)."},
            "character": {"type": "integer", "minimum": 1, "description": "Column (1-based, UTF-16 units)."}
        });
        let (description, mut props, required): (&str, Value, Vec<&str>) = match self.which {
            Which::Definition => ("Where the symbol at a position is defined (language server).", pos, vec!["path", "line", "character"]),
            Which::References => ("Every reference to the symbol at a position (language server).", pos, vec!["path", "line", "character"]),
            Which::Hover => ("Type and documentation of the symbol at a position (language server).", pos, vec!["path", "line", "character"]),
            Which::Symbols => ("The symbols (functions, types, …) of a file, nested (language server).", json!({"path": pos["path"]}), vec!["path"]),
            Which::Diagnostics => ("The language server's errors and warnings for a file.", json!({"path": pos["path"]}), vec!["path"]),
            Which::RenamePreview => ("The edits renaming the symbol at a position would make; nothing is changed.", pos, vec!["path", "line", "character", "newName"]),
            Which::WorkspaceSymbols => ("Symbols of the whole project matching a query, from the server of `path`'s language.", json!({"path": pos["path"], "query": {"type": "string", "description": "Text the symbol names contain."}}), vec!["path"]),
        };
        if self.which == Which::RenamePreview {
            props["newName"] = json!({"type": "string", "description": "The new name."});
        }
        ToolSpec {
            name: self.name().into(),
            description: description.into(),
            parameters: json!({"type": "object", "properties": props, "required": required, "additionalProperties": false}),
        }
    }

    fn permission(&self) -> Permission {
        Permission::Read
    }

    fn category(&self) -> &'static str {
        "lsp"
    }

    fn plan(&self, args: &Value, workdir: &Path) -> Result<ToolPlan, String> {
        let raw = args::required_str(args, "path")?;
        let resolved = paths::resolve(workdir, raw).map_err(|e| format!("argument `path`: {e}"))?;
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: if resolved.outside_workdir {
                vec![resolved.path.clone()]
            } else {
                vec![]
            },
            summary: format!("{} {}", self.name(), args::one_line(&resolved.display, 200)),
        })
    }

    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let this = self.clone();
        Box::pin(async move {
            match this.call(args, ctx).await {
                Ok(text) => ToolOutput {
                    ok: true,
                    content: text,
                    meta: Value::Null,
                    diff: None,
                },
                Err(e) => {
                    let mut out = ToolOutput::error(e.clone());
                    if e.starts_with("tool_inactive") {
                        out.meta = json!({"code": "tool_inactive"});
                    }
                    out
                }
            }
        })
    }
}
