//! The language-server table (`lsp.catalog`; upstream-behaviour §9): the built-in servers
//! and the settings that change it, read from the effective settings of a workdir:
//! * `lsp.enabled` (default true): false turns LSP off (no servers, `lsp_*` tools inactive);
//! * `lsp.disabled`: ids of servers not to start;
//! * `lsp.servers`: `{ "<id>": { "command": [argv…], "extensions": [".x"], "languageIds":
//!   ["x"], "rootMarkers": ["file"], "disabled": bool } }` adds a server or overrides fields
//!   of a built-in one;
//! * `lsp.diagnosticsWaitSeconds` (default 5, at most 120): the wait for diagnostics after an edit.
//!
//! A server's binary is looked up on `PATH` and spawned from its argv, never through a shell.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One language server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerDef {
    /// Id (`rust-analyzer`, `pyright`, …).
    pub id: String,
    /// LSP language ids it serves (the first is used for `didOpen`).
    pub language_ids: Vec<String>,
    /// File extensions it serves, with the dot (`.rs`).
    pub extensions: Vec<String>,
    /// Files or directories whose directory is a project root, nearest first.
    pub root_markers: Vec<String>,
    /// Program and arguments.
    pub command: Vec<String>,
    /// How a person installs it.
    pub install_hint: Option<String>,
    /// Off unless a setting turns it on (`ty`, `ruff`).
    pub disabled: bool,
}

fn def(
    id: &str,
    langs: &[&str],
    exts: &[&str],
    markers: &[&str],
    cmd: &[&str],
    hint: &str,
    disabled: bool,
) -> ServerDef {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    ServerDef {
        id: id.into(),
        language_ids: v(langs),
        extensions: v(exts),
        root_markers: v(markers),
        command: v(cmd),
        install_hint: Some(hint.into()),
        disabled,
    }
}

/// The built-in servers, in catalog order.
pub fn builtin() -> Vec<ServerDef> {
    const JS: &[&str] = &[".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts"];
    const JS_LANGS: &[&str] = &[
        "typescript",
        "typescriptreact",
        "javascript",
        "javascriptreact",
    ];
    const JS_ROOT: &[&str] = &[
        "package-lock.json",
        "bun.lockb",
        "bun.lock",
        "pnpm-lock.yaml",
        "yarn.lock",
        "package.json",
    ];
    const PY_ROOT: &[&str] = &[
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
        "Pipfile",
        "pyrightconfig.json",
    ];
    vec![
        def(
            "typescript",
            JS_LANGS,
            JS,
            JS_ROOT,
            &["typescript-language-server", "--stdio"],
            "npm install -g typescript-language-server typescript",
            false,
        ),
        def(
            "deno",
            &["typescript", "javascript"],
            &[".ts", ".tsx", ".js", ".jsx", ".mjs"],
            &["deno.json", "deno.jsonc"],
            &["deno", "lsp"],
            "install Deno from deno.com",
            false,
        ),
        def(
            "vue",
            &["vue"],
            &[".vue"],
            JS_ROOT,
            &["vue-language-server", "--stdio"],
            "npm install -g @vue/language-server",
            false,
        ),
        def(
            "eslint",
            JS_LANGS,
            JS,
            JS_ROOT,
            &["vscode-eslint-language-server", "--stdio"],
            "npm install -g vscode-langservers-extracted",
            false,
        ),
        def(
            "biome",
            JS_LANGS,
            JS,
            &["biome.json", "biome.jsonc"],
            &["biome", "lsp-proxy"],
            "npm install -g @biomejs/biome",
            false,
        ),
        def(
            "oxlint",
            JS_LANGS,
            JS,
            &[".oxlintrc.json"],
            &["oxc_language_server"],
            "npm install -g oxlint",
            false,
        ),
        def(
            "gopls",
            &["go"],
            &[".go"],
            &["go.work", "go.mod", "go.sum"],
            &["gopls"],
            "go install golang.org/x/tools/gopls@latest",
            false,
        ),
        def(
            "ruby-lsp",
            &["ruby"],
            &[".rb", ".rake", ".gemspec", ".ru"],
            &["Gemfile"],
            &["ruby-lsp"],
            "gem install ruby-lsp",
            false,
        ),
        def(
            "pyright",
            &["python"],
            &[".py", ".pyi"],
            PY_ROOT,
            &["pyright-langserver", "--stdio"],
            "npm install -g pyright",
            false,
        ),
        def(
            "ty",
            &["python"],
            &[".py", ".pyi"],
            PY_ROOT,
            &["ty", "server"],
            "pip install ty",
            true,
        ),
        def(
            "ruff",
            &["python"],
            &[".py", ".pyi"],
            &["pyproject.toml", "ruff.toml", ".ruff.toml"],
            &["ruff", "server"],
            "pip install ruff",
            true,
        ),
        def(
            "elixir-ls",
            &["elixir"],
            &[".ex", ".exs"],
            &["mix.exs", "mix.lock"],
            &["elixir-ls"],
            "install elixir-ls from its releases",
            false,
        ),
        def(
            "zls",
            &["zig"],
            &[".zig", ".zon"],
            &["build.zig"],
            &["zls"],
            "install zls from its releases",
            false,
        ),
        def(
            "csharp",
            &["csharp"],
            &[".cs"],
            &[".sln", ".csproj", "global.json"],
            &["csharp-ls"],
            "dotnet tool install --global csharp-ls",
            false,
        ),
        def(
            "fsharp",
            &["fsharp"],
            &[".fs", ".fsi", ".fsx", ".fsscript"],
            &[".sln", ".fsproj", "global.json"],
            &["fsautocomplete"],
            "dotnet tool install --global fsautocomplete",
            false,
        ),
        def(
            "sourcekit",
            &["swift", "objective-c"],
            &[".swift", ".objc", ".objcpp"],
            &["Package.swift"],
            &["sourcekit-lsp"],
            "install the Swift toolchain",
            false,
        ),
        def(
            "rust-analyzer",
            &["rust"],
            &[".rs"],
            &["Cargo.toml", "Cargo.lock"],
            &["rust-analyzer"],
            "rustup component add rust-analyzer",
            false,
        ),
        def(
            "clangd",
            &["c", "cpp"],
            &[
                ".c", ".cpp", ".cc", ".cxx", ".c++", ".h", ".hpp", ".hh", ".hxx", ".h++",
            ],
            &[
                "compile_commands.json",
                "compile_flags.txt",
                ".clangd",
                "CMakeLists.txt",
                "Makefile",
            ],
            &["clangd", "--background-index"],
            "apt-get install clangd",
            false,
        ),
        def(
            "svelte",
            &["svelte"],
            &[".svelte"],
            JS_ROOT,
            &["svelteserver", "--stdio"],
            "npm install -g svelte-language-server",
            false,
        ),
        def(
            "astro",
            &["astro"],
            &[".astro"],
            JS_ROOT,
            &["astro-ls", "--stdio"],
            "npm install -g @astrojs/language-server",
            false,
        ),
    ]
}

/// The table in force for one workdir.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// False: LSP is off (`lsp.enabled: false`).
    pub enabled: bool,
    /// Every server, built-in ones first; `disabled` already reflects `lsp.disabled`.
    pub servers: Vec<ServerDef>,
    /// `lsp.diagnosticsWaitSeconds`: how long an edit waits for diagnostics, when set.
    pub diagnostics_wait: Option<std::time::Duration>,
}

fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    v.and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect()
    })
}

impl Catalog {
    /// The table of a settings object (the effective settings of a workdir).
    pub fn from_settings(settings: &Value) -> Catalog {
        let get = |k: &str| snowpea_common::settings::get(settings, k);
        let enabled = get("lsp.enabled").and_then(Value::as_bool).unwrap_or(true);
        let mut servers = builtin();
        if let Some(extra) = get("lsp.servers").and_then(Value::as_object) {
            for (id, cfg) in extra {
                let pos = servers.iter().position(|s| &s.id == id);
                let mut s = match pos {
                    Some(i) => servers[i].clone(),
                    None => ServerDef {
                        id: id.clone(),
                        language_ids: vec![],
                        extensions: vec![],
                        root_markers: vec![],
                        command: vec![],
                        install_hint: None,
                        disabled: false,
                    },
                };
                if let Some(c) = strings(cfg.get("command")).filter(|c| !c.is_empty()) {
                    s.command = c;
                }
                if let Some(e) = strings(cfg.get("extensions")) {
                    s.extensions = e;
                }
                if let Some(l) = strings(cfg.get("languageIds")) {
                    s.language_ids = l;
                }
                if let Some(m) = strings(cfg.get("rootMarkers")) {
                    s.root_markers = m;
                }
                if let Some(d) = cfg.get("disabled").and_then(Value::as_bool) {
                    s.disabled = d;
                }
                if s.command.is_empty() {
                    continue;
                }
                match pos {
                    Some(i) => servers[i] = s,
                    None => servers.push(s),
                }
            }
        }
        if let Some(off) = strings(get("lsp.disabled")) {
            for s in servers.iter_mut() {
                if off.contains(&s.id) {
                    s.disabled = true;
                }
            }
        }
        let diagnostics_wait = get("lsp.diagnosticsWaitSeconds")
            .and_then(Value::as_f64)
            .filter(|s| *s > 0.0 && *s <= 120.0)
            .map(std::time::Duration::from_secs_f64);
        Catalog {
            enabled,
            servers,
            diagnostics_wait,
        }
    }

    /// The enabled servers for `path` (by extension).
    pub fn for_file(&self, path: &Path) -> Vec<&ServerDef> {
        if !self.enabled {
            return vec![];
        }
        let Some(ext) = path
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
        else {
            return vec![];
        };
        self.servers
            .iter()
            .filter(|s| !s.disabled && s.extensions.contains(&ext))
            .collect()
    }
}

/// The program `name` on `PATH` (or `name` itself when it has a `/`), if executable.
pub fn which(name: &str, path_var: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return executable(&p).then_some(p);
    }
    let path = path_var
        .map(str::to_owned)
        .or_else(|| std::env::var("PATH").ok())?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| executable(p))
}

/// The project root of `file` for `server`: the nearest ancestor directory holding one of
/// its markers, not above `workdir` (when `file` is inside it); else `workdir`.
pub fn root_for(server: &ServerDef, file: &Path, workdir: &Path) -> PathBuf {
    let inside = file.starts_with(workdir);
    let mut dir = file.parent();
    while let Some(d) = dir {
        if server.root_markers.iter().any(|m| d.join(m).exists()) {
            return d.to_path_buf();
        }
        if inside && d == workdir {
            break;
        }
        dir = d.parent();
    }
    workdir.to_path_buf()
}
