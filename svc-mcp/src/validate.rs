//! Validation of an MCP server entry before it is written or probed (issue 6
//! "Validation").
//!
//! Structural rules answer `mcp_invalid`: the name `^[a-zA-Z0-9_-]{1,64}$`; exactly one of
//! `command` or `url`; argv-style `args` (a shell string is refused); fields of the other
//! transport; ranges of the timeouts; env and header names.
//!
//! Security findings answer `mcp_unsafe` unless `force`, which turns them into `warnings`:
//! * a shell interpreter as the command (`sh`, `bash`, `zsh`, `cmd`, `powershell`, …), or an
//!   interpreter running inline code (`python -c`, `python3.11 -c`, `node20 -e`, `perl -le`,
//!   `awk 'BEGIN{…}'`, …), also behind wrapper commands, which are looked through
//!   recursively ([`crate::wrappers`]: `env -S "bash -c …"`, `nohup`, `timeout 10 bash`,
//!   `nice`, `stdbuf`, `setsid`, `xargs`, …), and wrappers that run a shell command line
//!   (`su -c`, `sudo -s`, `script -c`, `watch`, `npx -c`, …);
//! * `sudo`/`doas`/`su`/`pkexec` (the server would run with elevated privileges);
//! * a download piped into a shell (`curl … | sh`) anywhere in the args;
//! * a world-writable command (or a world-writable, non-sticky directory holding it): anyone
//!   on the machine could swap the program the agent runs;
//! * an `http://` URL that is not loopback (traffic and headers in clear text);
//! * credentials in the URL (`user:pass@`, `?token=`) or in `args` (visible to every user in
//!   the process list; they belong in `env`/`headers`).
//!
//! Findings never quote a secret: they name the argument index or the key.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use crate::config::{ServerEntry, Transport};
use crate::error::{Error, Result};

/// The permission tags of the protocol.
pub const PERMISSIONS: &[&str] = &[
    "read", "write", "exec", "network", "send", "config", "delegate", "secret",
];

/// Longest `command` and `cwd`, in bytes.
pub const MAX_COMMAND_BYTES: usize = 4096;
/// Longest `url`, in bytes.
pub const MAX_URL_BYTES: usize = 8192;
/// Longest single argument, in bytes.
pub const MAX_ARG_BYTES: usize = 32_768;
/// Most arguments.
pub const MAX_ARGS: usize = 1024;
/// Longest env or header name, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// Longest env or header value, in bytes.
pub const MAX_VALUE_BYTES: usize = 32_768;
/// Most env or header entries (each).
pub const MAX_ENTRIES: usize = 256;

/// Largest accepted `timeoutSec`/`toolTimeoutSec` (one day).
pub const MAX_TIMEOUT_SEC: i64 = 86_400;

static NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[a-zA-Z0-9_-]{1,64}$").unwrap());
static ENV_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*$").unwrap());
static HEADER_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$").unwrap());
/// Well-known token shapes (OpenAI/Anthropic, GitHub, Slack, AWS, Google, JWT-ish bearer).
static SECRET_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        \bsk-[A-Za-z0-9_-]{16,} |
        \bgh[pousr]_[A-Za-z0-9]{20,} |
        \bgithub_pat_[A-Za-z0-9_]{20,} |
        \bxox[abprs]-[A-Za-z0-9-]{10,} |
        \bAKIA[0-9A-Z]{16}\b |
        \bAIza[0-9A-Za-z_-]{30,} |
        (?i:\bbearer\s+[A-Za-z0-9._~+/-]{12,})",
    )
    .unwrap()
});
/// A flag that takes a secret, as `--token=x` or `--token x`.
static SECRET_FLAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^--?([a-z0-9]+[-_])*(token|api[-_]?key|apikey|secret|password|passwd|pat|access[-_]?key|private[-_]?key|client[-_]?secret)(=.*)?$").unwrap()
});
static PIPE_TO_SHELL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(curl|wget|fetch|iwr|invoke-webrequest)\b.*\|\s*(sudo\s+)?(sh|bash|zsh|dash|ksh|fish|python3?|node|perl|ruby|iex|invoke-expression)\b").unwrap()
});

/// Shell interpreters, by base name ([`crate::wrappers::base_name`]: `.exe` and version
/// suffixes dropped).
const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "fish",
    "csh",
    "tcsh",
    "ash",
    "busybox",
    "cmd",
    "powershell",
    "pwsh",
];
const SHELL_OPERATORS: &[&str] = &["&&", "||", ";", "|", "$(", "`", ">", "<"];

/// Checks a server name.
pub fn check_name(name: &str) -> Result<()> {
    if NAME.is_match(name) {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "invalid server name {:?}: use 1-64 characters of a-z, A-Z, 0-9, '_' and '-'",
            crate::clip::clip(name)
        )))
    }
}

/// Checks a permission tag.
pub fn check_permission(p: &str) -> Result<()> {
    if PERMISSIONS.contains(&p) {
        Ok(())
    } else {
        Err(Error::Invalid(format!("unknown permission {p:?}")))
    }
}

/// Validates `entry` for server `name`: structural errors are `Err(mcp_invalid)`; the
/// security findings are returned for [`enforce`].
pub fn validate(name: &str, entry: &ServerEntry) -> Result<Vec<String>> {
    check_name(name)?;
    check_sizes(entry)?;
    check_characters(entry)?;
    let command = entry.command.as_deref().filter(|c| !c.trim().is_empty());
    let url = entry.url.as_deref().filter(|u| !u.trim().is_empty());
    match (command, url) {
        (Some(_), Some(_)) => {
            return Err(Error::Invalid(
                "give exactly one of command (stdio) or url (http/sse), not both".into(),
            ))
        }
        (None, None) => {
            return Err(Error::Invalid(
                "give exactly one of command (stdio) or url (http/sse)".into(),
            ))
        }
        _ => {}
    }
    if let Some(kind) = entry.kind.as_deref() {
        let ok = matches!(
            kind,
            "stdio" | "http" | "sse" | "streamable-http" | "streamableHttp" | "streamable_http"
        );
        if !ok {
            return Err(Error::Invalid(format!(
                "unknown type {kind:?}: use stdio, http or sse"
            )));
        }
    }
    let transport = entry.transport();
    match (transport, command.is_some()) {
        (Transport::Stdio, false) => {
            return Err(Error::Invalid("type stdio needs a command".into()))
        }
        (Transport::Http | Transport::Sse, true) => {
            return Err(Error::Invalid(format!(
                "type {} needs a url, not a command",
                transport.as_str()
            )))
        }
        _ => {}
    }
    for (field, v) in [
        ("timeoutSec", entry.timeout_sec),
        ("toolTimeoutSec", entry.tool_timeout_sec),
    ] {
        if let Some(v) = v {
            if !(1..=MAX_TIMEOUT_SEC).contains(&v) {
                return Err(Error::Invalid(format!(
                    "{field} must be between 1 and {MAX_TIMEOUT_SEC} seconds"
                )));
            }
        }
    }
    if let Some(filter) = &entry.tools {
        for t in filter.include.iter().chain(filter.exclude.iter()).flatten() {
            if t.trim().is_empty() {
                return Err(Error::Invalid(
                    "tools.include/exclude hold tool names, not empty strings".into(),
                ));
            }
        }
    }
    let mut findings = Vec::new();
    if let Some(command) = command {
        validate_stdio(entry, command, &mut findings)?;
    } else if let Some(url) = url {
        validate_remote(entry, url, &mut findings)?;
    }
    Ok(findings)
}

/// Characters no field can carry: NUL anywhere (an argv, env or path cannot hold it), CR/LF
/// and other control characters in a header value or the URL (a header line would be split
/// or refused; a URL parser drops them silently). The error names the field, never quoting
/// a secret value.
fn check_characters(entry: &ServerEntry) -> Result<()> {
    let nul = |field: &str, v: &str| {
        if v.contains('\0') {
            Err(Error::Invalid(format!("{field} contains a NUL character")))
        } else {
            Ok(())
        }
    };
    if let Some(c) = &entry.command {
        nul("command", c)?;
    }
    for (i, a) in entry.args.iter().flatten().enumerate() {
        nul(&format!("args[{i}]"), a)?;
    }
    for (k, v) in entry.env.iter().flatten() {
        nul(&format!("env key {k:?}"), k)?;
        nul(&format!("env.{k}"), v)?;
    }
    if let Some(c) = &entry.cwd {
        nul("cwd", c)?;
    }
    if let Some(k) = &entry.kind {
        nul("type", k)?;
    }
    if let Some(f) = &entry.tools {
        for t in f.include.iter().chain(f.exclude.iter()).flatten() {
            nul("tools.include/exclude", t)?;
        }
    }
    if entry
        .url
        .as_deref()
        .is_some_and(|u| u.chars().any(char::is_control))
    {
        return Err(Error::Invalid(
            "url contains a control character (CR, LF, NUL, …)".into(),
        ));
    }
    for (k, v) in entry.headers.iter().flatten() {
        if k.chars().any(char::is_control) {
            return Err(Error::Invalid(format!(
                "header name {k:?} contains a control character"
            )));
        }
        if v.chars().any(|c| c.is_control() && c != '\t') {
            return Err(Error::Invalid(format!(
                "headers.{k}: the value contains CR, LF, NUL or another control character, which an HTTP header cannot carry"
            )));
        }
    }
    Ok(())
}

/// Size caps (issue 6: a 3 MB entry was written, and its error broadcast on every restart).
/// The error names the field and the limit, never quoting the value.
fn check_sizes(entry: &ServerEntry) -> Result<()> {
    let cap = |field: &str, v: &str, max: usize| {
        if v.len() > max {
            Err(Error::Invalid(format!(
                "{field} is too long ({} bytes; at most {max})",
                v.len()
            )))
        } else {
            Ok(())
        }
    };
    if let Some(c) = &entry.command {
        cap("command", c, MAX_COMMAND_BYTES)?;
    }
    if let Some(c) = &entry.cwd {
        cap("cwd", c, MAX_COMMAND_BYTES)?;
    }
    if let Some(u) = &entry.url {
        cap("url", u, MAX_URL_BYTES)?;
    }
    if let Some(args) = &entry.args {
        if args.len() > MAX_ARGS {
            return Err(Error::Invalid(format!(
                "args has {} entries; at most {MAX_ARGS}",
                args.len()
            )));
        }
        for (i, a) in args.iter().enumerate() {
            cap(&format!("args[{i}]"), a, MAX_ARG_BYTES)?;
        }
    }
    for (field, map) in [("env", &entry.env), ("headers", &entry.headers)] {
        let Some(map) = map else { continue };
        if map.len() > MAX_ENTRIES {
            return Err(Error::Invalid(format!(
                "{field} has {} entries; at most {MAX_ENTRIES}",
                map.len()
            )));
        }
        for (k, v) in map {
            cap(&format!("{field} key"), k, MAX_KEY_BYTES)?;
            cap(&format!("{field}.{k}"), v, MAX_VALUE_BYTES)?;
        }
    }
    Ok(())
}

/// `mcp_unsafe` when there are findings and no `force`; with `force` the findings become
/// the `warnings` of the result.
pub fn enforce(findings: Vec<String>, force: bool) -> Result<Vec<String>> {
    if findings.is_empty() || force {
        return Ok(findings);
    }
    Err(Error::Unsafe {
        message: format!("refused without force: {}", findings.join("; ")),
        findings,
    })
}

fn validate_stdio(entry: &ServerEntry, command: &str, findings: &mut Vec<String>) -> Result<()> {
    if entry.headers.as_ref().is_some_and(|h| !h.is_empty()) {
        return Err(Error::Invalid(
            "headers are for http/sse servers; a stdio server takes env".into(),
        ));
    }
    if command.contains(char::is_whitespace) && !Path::new(command).exists() {
        return Err(Error::Invalid(format!(
            "command {:?} looks like a shell string: put the executable in command and each argument in args",
            first_word(command)
        )));
    }
    let args = entry.args.as_deref().unwrap_or_default();
    // Wrappers (`env -S …`, `nohup`, `timeout 10 …`, `sudo …`) hide the real program.
    let run = crate::wrappers::unwrap(command, args);
    for w in &run.elevated {
        push_once(
            findings,
            format!("runs the server with elevated privileges ({w})"),
        );
    }
    let via = if run.wrappers.is_empty() {
        String::new()
    } else {
        format!(" behind {}", run.wrappers.join(" "))
    };
    let program = run.program.as_str();
    let base = crate::wrappers::base_name(program);
    let is_shell = SHELLS.contains(&base.as_str());
    let inline = crate::wrappers::runs_inline_code(&base, &run.args);
    if let Some(line) = &run.shell_line {
        findings.push(format!(
            "command runs a shell command line ({line}{via}): the server's real command is hidden from review"
        ));
    } else if is_shell {
        let inline = inline
            || run.args.iter().any(|a| {
                a.eq_ignore_ascii_case("/c")
                    || a.eq_ignore_ascii_case("/k")
                    || a.eq_ignore_ascii_case("-command")
                    || a.eq_ignore_ascii_case("-c")
                    || a.eq_ignore_ascii_case("-encodedcommand")
            });
        findings.push(if inline {
            format!("command is a shell interpreter ({program}){via} running an inline script (-c): the server's real command is hidden from review")
        } else {
            format!("command is a shell interpreter ({program}){via}")
        });
    } else if inline {
        findings.push(format!(
            "{program}{via} runs inline code from args instead of a script or package"
        ));
    }
    // Code handed to a shell or an interpreter is judged above (mcp_unsafe), not as a
    // mistaken shell string.
    if !is_shell && !inline && run.shell_line.is_none() {
        for (i, a) in args.iter().enumerate() {
            if looks_like_shell_string(a) {
                return Err(Error::Invalid(format!(
                    "args[{i}] looks like a shell string: args are argv items, one per element, with no shell operators"
                )));
            }
        }
    }
    if args.iter().any(|a| PIPE_TO_SHELL.is_match(a)) {
        findings
            .push("args download a script and pipe it into an interpreter (curl … | sh)".into());
    }
    secret_args(args, findings);
    if let Some(env) = &entry.env {
        for k in env.keys() {
            if !ENV_NAME.is_match(k) {
                return Err(Error::Invalid(format!(
                    "env key {k:?} is not a valid variable name"
                )));
            }
        }
    }
    let mut programs = vec![command];
    if run.command != command {
        programs.push(run.command.as_str());
    }
    for p in programs {
        if let Some(path) = resolve_command(p, entry.cwd.as_deref()) {
            if let Some(why) = world_writable(&path) {
                findings.push(format!(
                    "command {} {why}: anyone on this machine can replace it",
                    path.display()
                ));
            }
        }
    }
    Ok(())
}

fn first_word(s: &str) -> &str {
    s.split_whitespace().next().unwrap_or(s)
}

fn push_once(findings: &mut Vec<String>, f: String) {
    if !findings.contains(&f) {
        findings.push(f);
    }
}

/// An argv item that is really a whole command line: several words starting with a flag
/// (`"-y @scope/pkg /tmp"`), or words joined by shell operators (`"a && b"`).
fn looks_like_shell_string(a: &str) -> bool {
    if a.contains("$(") || a.contains('`') {
        return true;
    }
    let words: Vec<&str> = a.split_whitespace().collect();
    if words.len() < 2 {
        return false;
    }
    if words[0].starts_with('-')
        && !a.contains('=')
        && words[1..]
            .iter()
            .any(|w| w.starts_with('-') || w.starts_with('@') || w.starts_with('/'))
    {
        return true;
    }
    words.iter().any(|w| SHELL_OPERATORS.contains(w))
}

fn secret_args(args: &[String], findings: &mut Vec<String>) {
    let mut flagged = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if SECRET_VALUE.is_match(a) {
            flagged.push(i);
            continue;
        }
        if let Some(c) = SECRET_FLAG.captures(a) {
            let inline = c.get(3).is_some_and(|m| m.as_str().len() > 1);
            if inline {
                flagged.push(i);
            } else if args.get(i + 1).is_some_and(|n| !n.starts_with('-')) {
                flagged.push(i + 1);
            }
        }
    }
    flagged.dedup();
    for i in flagged {
        findings.push(format!(
            "args[{i}] looks like a secret: args are visible in the process list; pass it in env instead"
        ));
    }
}

fn resolve_command(command: &str, cwd: Option<&str>) -> Option<PathBuf> {
    if command.contains('/') {
        let p = PathBuf::from(command);
        let p = match (p.is_absolute(), cwd) {
            (false, Some(c)) => Path::new(c).join(p),
            _ => p,
        };
        return p.exists().then_some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(command))
            .find(|p| p.is_file())
    })
}

fn world_writable(path: &Path) -> Option<&'static str> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.permissions().mode() & 0o002 != 0 {
        return Some("is world-writable");
    }
    let dir = std::fs::metadata(path.parent()?).ok()?;
    let mode = dir.permissions().mode();
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Some("lies in a world-writable directory");
    }
    None
}

fn validate_remote(entry: &ServerEntry, raw: &str, findings: &mut Vec<String>) -> Result<()> {
    if entry.args.as_ref().is_some_and(|a| !a.is_empty())
        || entry.env.as_ref().is_some_and(|e| !e.is_empty())
        || entry.cwd.is_some()
    {
        return Err(Error::Invalid(
            "args, env and cwd are for stdio servers; an http/sse server takes url and headers"
                .into(),
        ));
    }
    let url =
        url::Url::parse(raw).map_err(|e| Error::Invalid(format!("url is not a valid URL: {e}")))?;
    match url.scheme() {
        "https" => {}
        "http" => {
            if !is_loopback(&url) {
                findings.push(format!(
                    "url uses plain http:// to a non-loopback host ({}): requests and headers travel unencrypted",
                    url.host_str().unwrap_or("?")
                ));
            }
        }
        other => {
            return Err(Error::Invalid(format!(
                "url scheme {other:?} is not http or https"
            )))
        }
    }
    if url.password().is_some() || !url.username().is_empty() {
        findings.push("url carries credentials (user:password@): put them in headers".into());
    }
    for (k, v) in url.query_pairs() {
        if crate::secrets::is_secret_key(&k) || SECRET_VALUE.is_match(&v) {
            findings.push(format!(
                "url query parameter {k:?} looks like a secret: put it in headers"
            ));
        }
    }
    if let Some(h) = &entry.headers {
        for k in h.keys() {
            if !HEADER_NAME.is_match(k) {
                return Err(Error::Invalid(format!(
                    "header name {k:?} is not a valid HTTP header name"
                )));
            }
        }
    }
    Ok(())
}

/// True for `localhost`, `127.0.0.0/8` and `::1`.
pub fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => {
            d.eq_ignore_ascii_case("localhost") || d.to_ascii_lowercase().ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
