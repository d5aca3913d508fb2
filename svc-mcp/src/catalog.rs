//! The curated MCP presets of `mcp.catalog` (issue 6), in display order. Each preset is a
//! ready `.mcp.json` entry (`entry`) plus what the user must supply or have installed
//! (`needs`); `mcp.add{preset}` copies the entry before applying the explicit fields.

use serde_json::{json, Value};

/// One preset.
#[derive(Debug, Clone)]
pub struct Preset {
    /// Catalog id (`mcp.add{preset}`).
    pub id: &'static str,
    /// Display name.
    pub label: &'static str,
    /// One line on what it offers.
    pub description: &'static str,
    /// Project page.
    pub homepage: &'static str,
    /// stdio, http or sse.
    pub transport: &'static str,
    /// What the user must provide: runtimes (`node`, `uv`), env vars (`env:GITHUB_…`),
    /// arguments (`arg:…`).
    pub needs: &'static [&'static str],
    /// The `.mcp.json` entry.
    pub entry: fn() -> Value,
}

/// Every preset, in display order.
pub fn presets() -> &'static [Preset] {
    PRESETS
}

/// The preset with `id`.
pub fn find(id: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.id == id)
}

const PRESETS: &[Preset] = &[
    Preset {
        id: "filesystem",
        label: "Filesystem",
        description: "Read, write, search and move files inside the directories you allow.",
        homepage: "https://github.com/modelcontextprotocol/servers/tree/main/src/filesystem",
        transport: "stdio",
        needs: &["node", "arg:allowed directories (appended to args)"],
        entry: || json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"]}),
    },
    Preset {
        id: "fetch",
        label: "Fetch",
        description: "Fetch a web page and convert it to markdown for the model.",
        homepage: "https://github.com/modelcontextprotocol/servers/tree/main/src/fetch",
        transport: "stdio",
        needs: &["uv (uvx)"],
        entry: || json!({"command": "uvx", "args": ["mcp-server-fetch"]}),
    },
    Preset {
        id: "memory",
        label: "Memory (knowledge graph)",
        description: "A persistent knowledge graph of entities, relations and observations.",
        homepage: "https://github.com/modelcontextprotocol/servers/tree/main/src/memory",
        transport: "stdio",
        needs: &["node"],
        entry: || json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}),
    },
    Preset {
        id: "everything",
        label: "Everything (reference/test server)",
        description:
            "The MCP reference server exercising every protocol feature; for testing clients.",
        homepage: "https://github.com/modelcontextprotocol/servers/tree/main/src/everything",
        transport: "stdio",
        needs: &["node"],
        entry: || json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]}),
    },
    Preset {
        id: "github",
        label: "GitHub",
        description: "Issues, pull requests, code search and repository files on GitHub.",
        homepage: "https://github.com/github/github-mcp-server",
        transport: "http",
        needs: &["header:Authorization (Bearer <GitHub personal access token>)"],
        entry: || json!({"type": "http", "url": "https://api.githubcopilot.com/mcp/"}),
    },
    Preset {
        id: "playwright",
        label: "Playwright browser",
        description: "Drive a real browser: navigate, click, fill forms, take snapshots.",
        homepage: "https://github.com/microsoft/playwright-mcp",
        transport: "stdio",
        needs: &[
            "node",
            "a Playwright browser (npx playwright install chromium)",
        ],
        entry: || json!({"command": "npx", "args": ["-y", "@playwright/mcp@latest"]}),
    },
    Preset {
        id: "git",
        label: "Git",
        description: "Read and search a local git repository: log, diff, show, status.",
        homepage: "https://github.com/modelcontextprotocol/servers/tree/main/src/git",
        transport: "stdio",
        needs: &["uv (uvx)", "arg:--repository <path>"],
        entry: || json!({"command": "uvx", "args": ["mcp-server-git"]}),
    },
    Preset {
        id: "time",
        label: "Time",
        description: "Current time and time-zone conversions.",
        homepage: "https://github.com/modelcontextprotocol/servers/tree/main/src/time",
        transport: "stdio",
        needs: &["uv (uvx)"],
        entry: || json!({"command": "uvx", "args": ["mcp-server-time"]}),
    },
    Preset {
        id: "sequential-thinking",
        label: "Sequential thinking",
        description: "A scratchpad tool for step-by-step problem solving.",
        homepage:
            "https://github.com/modelcontextprotocol/servers/tree/main/src/sequentialthinking",
        transport: "stdio",
        needs: &["node"],
        entry: || json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-sequential-thinking"]}),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerEntry;

    #[test]
    fn every_preset_is_a_valid_entry_without_findings() {
        let mut ids = std::collections::HashSet::new();
        for p in presets() {
            assert!(ids.insert(p.id), "duplicate id {}", p.id);
            let entry: ServerEntry = serde_json::from_value((p.entry)()).unwrap();
            assert_eq!(entry.transport().as_str(), p.transport, "{}", p.id);
            let findings = crate::validate::validate(p.id, &entry).unwrap();
            assert!(findings.is_empty(), "{}: {findings:?}", p.id);
        }
        for id in [
            "filesystem",
            "fetch",
            "memory",
            "everything",
            "github",
            "playwright",
        ] {
            assert!(find(id).is_some(), "{id}");
        }
    }
}
