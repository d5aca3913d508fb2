//! File tools: `read_file`, `write_file`, `edit_file`, `list_dir`.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use similar::{ChangeTag, TextDiff};

use super::args::{self, floor_char_boundary};
use super::paths::{self, ResolvedPath};
use super::{run_blocking, FileDiff, Permission, Tool, ToolContext, ToolOutput, ToolPlan, Writes};
use crate::backend::Backend;
use snowpea_session_llm::provider::ToolSpec;

/// Bytes looked at to decide whether a file is binary (a NUL byte in them means binary).
const SNIFF_BYTES: usize = 8192;
/// Most entries `list_dir` reports.
const MAX_DIR_ENTRIES: usize = 1000;
/// Largest diff text kept in a [`FileDiff`]; beyond it the diff is cut with a marker.
const MAX_DIFF_BYTES: usize = 1 << 20;
/// Longest time `similar` may spend on one diff before it settles for a coarser one.
const DIFF_TIMEOUT: Duration = Duration::from_secs(5);

/// Resolves the path argument `field` (or `default` when absent) and plans a call.
fn plan_path(
    args: &Value,
    workdir: &Path,
    field: &str,
    default: Option<&str>,
    permission: Permission,
    tool: &str,
) -> Result<(ToolPlan, ResolvedPath), String> {
    let raw = match default {
        Some(default) => args::optional_str(args, field)?.unwrap_or(default),
        None => args::required_str(args, field)?,
    };
    let resolved = paths::resolve(workdir, raw).map_err(|e| format!("argument `{field}`: {e}"))?;
    let plan = ToolPlan {
        permission,
        outside_workdir: if resolved.outside_workdir {
            vec![resolved.path.clone()]
        } else {
            vec![]
        },
        summary: format!("{tool} {}", args::one_line(&resolved.display, 200)),
    };
    Ok((plan, resolved))
}

/// The file named by the `path` argument, resolved as the tool will write it.
fn writes_path(args: &Value, workdir: &Path) -> Writes {
    match args::required_str(args, "path").map(|raw| paths::resolve(workdir, raw)) {
        Ok(Ok(resolved)) => Writes::Files(vec![resolved.path]),
        _ => Writes::Nothing,
    }
}

/// True when the bytes look binary (contain a NUL byte).
fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0)
}

/// The largest cut `<= max` of `bytes` that does not split a UTF-8 sequence.
fn utf8_cut(bytes: &[u8], max: usize) -> usize {
    if max >= bytes.len() {
        return bytes.len();
    }
    let mut cut = max;
    // Step back over at most 3 continuation bytes to the start of the split character.
    for _ in 0..3 {
        if cut > 0 && (bytes[cut] & 0b1100_0000) == 0b1000_0000 {
            cut -= 1;
        } else {
            break;
        }
    }
    cut
}

/// Reads an existing text file for editing: refuses directories and binary files.
fn read_text(backend: &dyn Backend, resolved: &ResolvedPath) -> Result<Vec<u8>, String> {
    let display = &resolved.display;
    let meta = backend
        .metadata(&resolved.path)
        .map_err(|e| io_message(display, &e))?;
    if meta.is_dir {
        return Err(format!("`{display}` is a directory, not a file"));
    }
    let bytes =
        crate::backend::read_all(backend, &resolved.path).map_err(|e| io_message(display, &e))?;
    if looks_binary(&bytes) {
        return Err(format!(
            "`{display}` is a binary file ({} bytes); refusing to treat it as text",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// A readable message for an I/O error on `display`.
fn io_message(display: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("`{display}` does not exist"),
        std::io::ErrorKind::PermissionDenied => format!("permission denied: `{display}`"),
        _ => format!("`{display}`: {e}"),
    }
}

/// Writes `bytes` to `path` atomically: a temp file next to it, fsync, rename over.
/// Keeps the permissions of a file that is replaced.
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let old_permissions = fs::metadata(path).ok().map(|m| m.permissions());
    let tmp: PathBuf = parent.join(format!(
        ".{name}.snowpea-{}-{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        if let Some(perms) = old_permissions {
            file.set_permissions(perms)?;
        }
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A unified diff of `old` → `new` for `display` (`old = None`: the file is new).
pub fn make_diff(display: &str, old: Option<&str>, new: &str) -> FileDiff {
    let before = old.unwrap_or("");
    let diff = TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(before, new);
    let (mut added, mut removed) = (0u64, 0u64);
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let sep = if display.starts_with('/') { "" } else { "/" };
    let mut text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a{sep}{display}"), &format!("b{sep}{display}"))
        .to_string();
    if text.len() > MAX_DIFF_BYTES {
        let cut = floor_char_boundary(&text, MAX_DIFF_BYTES);
        let more = text.len() - cut;
        text.truncate(cut);
        text.push_str(&format!("\n[diff truncated: {more} bytes more]\n"));
    }
    FileDiff {
        path: display.to_string(),
        diff: text,
        added,
        removed,
        created: old.is_none(),
    }
}

/// Writes `new` over `resolved` (creating parents), returning the tool output with its diff.
fn write_with_diff(
    backend: &dyn Backend,
    resolved: &ResolvedPath,
    old: Option<&str>,
    new: &str,
    verb: &str,
) -> ToolOutput {
    let display = &resolved.display;
    if let Some(parent) = resolved.path.parent() {
        if let Err(e) = backend.create_dir_all(parent) {
            return ToolOutput::error(format!("cannot create the directory for `{display}`: {e}"));
        }
    }
    if let Err(e) = backend.write_atomic(&resolved.path, new.as_bytes()) {
        return ToolOutput::error(format!("cannot write `{display}`: {e}"));
    }
    let diff = make_diff(display, old, new);
    let content = if diff.created {
        format!(
            "Created `{display}` ({} bytes, {} lines).",
            new.len(),
            diff.added
        )
    } else {
        format!(
            "{verb} `{display}` ({} bytes): +{} -{} lines.",
            new.len(),
            diff.added,
            diff.removed
        )
    };
    ToolOutput {
        ok: true,
        content,
        meta: json!({
            "path": display,
            "bytes": new.len(),
            "created": diff.created,
            "added": diff.added,
            "removed": diff.removed,
        }),
        diff: Some(diff),
    }
}

/// `read_file{path, offset?, limit?}`: a text file's contents, capped.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

impl ReadFile {
    fn read(
        backend: &dyn Backend,
        resolved: &ResolvedPath,
        offset: Option<u64>,
        limit: Option<u64>,
        cap: usize,
    ) -> ToolOutput {
        let display = &resolved.display;
        let meta = match backend.metadata(&resolved.path) {
            Ok(m) => m,
            Err(e) => return ToolOutput::error(io_message(display, &e)),
        };
        if meta.is_dir {
            return ToolOutput::error(format!(
                "`{display}` is a directory; use list_dir to see what it holds"
            ));
        }
        let size = meta.len;
        let mut file = match backend.open(&resolved.path) {
            Ok(f) => f,
            Err(e) => return ToolOutput::error(io_message(display, &e)),
        };
        let mut sniff = Vec::with_capacity(SNIFF_BYTES);
        if let Err(e) = (&mut file).take(SNIFF_BYTES as u64).read_to_end(&mut sniff) {
            return ToolOutput::error(io_message(display, &e));
        }
        if looks_binary(&sniff) {
            return ToolOutput::error(format!(
                "`{display}` is a binary file ({size} bytes); read_file only shows text files"
            ));
        }
        let reader = BufReader::new(std::io::Cursor::new(sniff).chain(file));
        let ranged = offset.is_some() || limit.is_some();
        let result = if ranged {
            Self::read_lines(reader, offset.unwrap_or(1).max(1), limit, cap)
        } else {
            Self::read_head(reader, size, cap).map(Ok)
        };
        let (mut text, more) = match result {
            Ok(Ok(r)) => r,
            Ok(Err(msg)) => return ToolOutput::error(msg),
            Err(e) => return ToolOutput::error(io_message(display, &e)),
        };
        if more > 0 {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[truncated: {more} bytes more; use offset/limit to read further]"
            ));
        } else if text.is_empty() {
            text = if ranged {
                "(no lines in that range)".into()
            } else {
                "(empty file)".into()
            };
        }
        ToolOutput {
            ok: true,
            content: text,
            meta: json!({ "path": display, "bytes": size, "truncated": more > 0 }),
            diff: None,
        }
    }

    /// The first `cap` bytes; returns the text and how many bytes were left out.
    fn read_head(reader: impl Read, size: u64, cap: usize) -> std::io::Result<(String, u64)> {
        let mut buf = Vec::new();
        reader.take(cap as u64 + 4).read_to_end(&mut buf)?;
        let cut = utf8_cut(&buf, cap);
        let total = size.max(buf.len() as u64);
        let more = total - cut as u64;
        Ok((String::from_utf8_lossy(&buf[..cut]).into_owned(), more))
    }

    /// Lines `offset..offset+limit` (1-based), capped at `cap` bytes; the inner `Err` is an
    /// offset past the end of the file.
    fn read_lines(
        mut reader: impl BufRead,
        offset: u64,
        limit: Option<u64>,
        cap: usize,
    ) -> std::io::Result<Result<(String, u64), String>> {
        let mut line = Vec::new();
        let mut number = 0u64;
        let mut out: Vec<u8> = Vec::new();
        let mut more = 0u64;
        let mut full = false;
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            number += 1;
            if number < offset {
                continue;
            }
            if limit.is_some_and(|l| number - offset >= l) {
                break;
            }
            if full {
                more += line.len() as u64;
                continue;
            }
            let room = cap - out.len();
            if line.len() <= room {
                out.extend_from_slice(&line);
            } else {
                let cut = utf8_cut(&line, room);
                out.extend_from_slice(&line[..cut]);
                more += (line.len() - cut) as u64;
                full = true;
            }
        }
        if number < offset && offset > 1 {
            return Ok(Err(format!(
                "offset {offset} is past the end of the file ({number} lines)"
            )));
        }
        Ok(Ok((String::from_utf8_lossy(&out).into_owned(), more)))
    }
}

impl Tool for ReadFile {
    fn name(&self) -> &'static str {
        "read_file"
    }

    fn permission(&self) -> Permission {
        Permission::Read
    }

    fn category(&self) -> &'static str {
        "files"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: "Read a text file. `path` is relative to the working directory. Returns the file's \
                          text; long output is cut with a `[truncated: N bytes more]` marker, in which case \
                          use `offset`/`limit` to read a range of lines. Binary files are refused."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "File path, relative to the working directory." },
                    "offset": { "type": "integer", "minimum": 1, "description": "First line to return (1-based)." },
                    "limit": { "type": "integer", "minimum": 1, "description": "Maximum number of lines to return." }
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, args: &Value, workdir: &Path) -> Result<ToolPlan, String> {
        args::optional_u64(args, "offset")?;
        args::optional_u64(args, "limit")?;
        plan_path(args, workdir, "path", None, self.permission(), self.name()).map(|(plan, _)| plan)
    }

    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(run_blocking(move || {
            let parsed = (|| {
                let offset = args::optional_u64(&args, "offset")?;
                let limit = args::optional_u64(&args, "limit")?;
                let (_, resolved) = plan_path(
                    &args,
                    &ctx.workdir,
                    "path",
                    None,
                    ReadFile.permission(),
                    "read_file",
                )?;
                Ok::<_, String>((resolved, offset, limit))
            })();
            match parsed {
                Ok((resolved, offset, limit)) => Self::read(
                    ctx.backend.as_ref(),
                    &resolved,
                    offset,
                    limit,
                    ctx.output_cap.max(1),
                ),
                Err(e) => ToolOutput::error(e),
            }
        }))
    }
}

/// `write_file{path, content}`: creates or replaces a file (parents created, atomic).
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

impl Tool for WriteFile {
    fn name(&self) -> &'static str {
        "write_file"
    }

    fn permission(&self) -> Permission {
        Permission::Write
    }

    fn category(&self) -> &'static str {
        "files"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: "Create a file or replace its whole content. `path` is relative to the working \
                          directory; missing parent directories are created. Prefer edit_file for changing \
                          part of an existing file."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "File path, relative to the working directory." },
                    "content": { "type": "string", "description": "The complete new content of the file." }
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, args: &Value, workdir: &Path) -> Result<ToolPlan, String> {
        args::required_str(args, "content")?;
        plan_path(args, workdir, "path", None, self.permission(), self.name()).map(|(plan, _)| plan)
    }

    fn writes(&self, args: &Value, workdir: &Path) -> Writes {
        writes_path(args, workdir)
    }

    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(run_blocking(move || {
            let content = match args::required_str(&args, "content") {
                Ok(c) => c,
                Err(e) => return ToolOutput::error(e),
            };
            let resolved = match plan_path(
                &args,
                &ctx.workdir,
                "path",
                None,
                WriteFile.permission(),
                "write_file",
            ) {
                Ok((_, r)) => r,
                Err(e) => return ToolOutput::error(e),
            };
            let backend = ctx.backend.as_ref();
            let old = match backend.symlink_metadata(&resolved.path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return ToolOutput::error(io_message(&resolved.display, &e)),
                Ok(m) if m.is_dir => {
                    return ToolOutput::error(format!(
                        "`{}` is a directory, not a file",
                        resolved.display
                    ))
                }
                Ok(_) => match crate::backend::read_all(backend, &resolved.path) {
                    Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
                    Err(e) => return ToolOutput::error(io_message(&resolved.display, &e)),
                },
            };
            write_with_diff(backend, &resolved, old.as_deref(), content, "Wrote")
        }))
    }
}

/// `edit_file{path, old, new, replaceAll?}`: exact string replacement in a text file.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

/// Arguments of `edit_file`, checked.
struct EditArgs<'a> {
    old: &'a str,
    new: &'a str,
    replace_all: bool,
}

impl EditFile {
    fn parse(args: &Value) -> Result<EditArgs<'_>, String> {
        let old = args::required_str(args, "old")?;
        let new = args::required_str(args, "new")?;
        let replace_all = args::optional_bool(args, "replaceAll")?.unwrap_or(false);
        if old.is_empty() {
            return Err(
                "argument `old` must not be empty (use write_file to create a file)".into(),
            );
        }
        if old == new {
            return Err(
                "arguments `old` and `new` are identical; there is nothing to change".into(),
            );
        }
        Ok(EditArgs {
            old,
            new,
            replace_all,
        })
    }

    fn edit(backend: &dyn Backend, resolved: &ResolvedPath, edit: &EditArgs<'_>) -> ToolOutput {
        let display = &resolved.display;
        let bytes = match read_text(backend, resolved) {
            Ok(b) => b,
            Err(e) => return ToolOutput::error(e),
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return ToolOutput::error(format!(
                "`{display}` is not valid UTF-8; edit_file only edits UTF-8 text"
            ));
        };
        let (mut old, mut new) = (edit.old.to_string(), edit.new.to_string());
        let mut count = text.matches(old.as_str()).count();
        if count == 0 && text.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
            // The file uses CRLF line endings and the model wrote LF: match in the file's style.
            let (crlf_old, crlf_new) = (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"));
            let crlf_count = text.matches(crlf_old.as_str()).count();
            if crlf_count > 0 {
                (old, new, count) = (crlf_old, crlf_new, crlf_count);
            }
        }
        if count == 0 {
            return ToolOutput::error(format!(
                "`old` was not found in `{display}`; it must match the file exactly, including whitespace \
                 and indentation (read the file again to check)"
            ));
        }
        if count > 1 && !edit.replace_all {
            return ToolOutput::error(format!(
                "`old` occurs {count} times in `{display}`; include more surrounding text to make it unique, \
                 or set replaceAll to replace every occurrence"
            ));
        }
        let updated = if edit.replace_all {
            text.replace(old.as_str(), &new)
        } else {
            text.replacen(old.as_str(), &new, 1)
        };
        let mut out = write_with_diff(backend, resolved, Some(&text), &updated, "Edited");
        if out.ok {
            out.content = format!(
                "Edited `{display}`: replaced {count} occurrence{} (+{} -{} lines).",
                if count == 1 { "" } else { "s" },
                out.diff.as_ref().map_or(0, |d| d.added),
                out.diff.as_ref().map_or(0, |d| d.removed),
            );
            if let Value::Object(m) = &mut out.meta {
                m.insert("replacements".into(), json!(count));
            }
        }
        out
    }
}

impl Tool for EditFile {
    fn name(&self) -> &'static str {
        "edit_file"
    }

    fn permission(&self) -> Permission {
        Permission::Write
    }

    fn category(&self) -> &'static str {
        "files"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: "Edit a text file by exact string replacement: replace `old` with `new`. `old` must \
                          match the file exactly (whitespace and indentation included) and occur exactly \
                          once, unless `replaceAll` is true, which replaces every occurrence."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "File path, relative to the working directory." },
                    "old": { "type": "string", "description": "The exact text to replace (non-empty)." },
                    "new": { "type": "string", "description": "The text to put in its place." },
                    "replaceAll": { "type": "boolean", "description": "Replace every occurrence (default false)." }
                },
                "required": ["path", "old", "new"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, args: &Value, workdir: &Path) -> Result<ToolPlan, String> {
        let (plan, _) = plan_path(args, workdir, "path", None, self.permission(), self.name())?;
        Self::parse(args)?;
        Ok(plan)
    }

    fn writes(&self, args: &Value, workdir: &Path) -> Writes {
        writes_path(args, workdir)
    }

    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(run_blocking(move || {
            let resolved = match plan_path(
                &args,
                &ctx.workdir,
                "path",
                None,
                EditFile.permission(),
                "edit_file",
            ) {
                Ok((_, r)) => r,
                Err(e) => return ToolOutput::error(e),
            };
            match Self::parse(&args) {
                Ok(edit) => Self::edit(ctx.backend.as_ref(), &resolved, &edit),
                Err(e) => ToolOutput::error(e),
            }
        }))
    }
}

/// `list_dir{path?}`: a directory's entries, sorted; directories end in `/`, files show sizes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

impl ListDir {
    fn list(backend: &dyn Backend, resolved: &ResolvedPath, cap: usize) -> ToolOutput {
        let display = &resolved.display;
        let reader = match backend.read_dir(&resolved.path) {
            Ok(r) => r,
            Err(e)
                if e.kind() == std::io::ErrorKind::NotADirectory
                    || backend.metadata(&resolved.path).is_ok_and(|m| !m.is_dir) =>
            {
                return ToolOutput::error(format!(
                    "`{display}` is a file, not a directory; use read_file"
                ))
            }
            Err(e) => return ToolOutput::error(io_message(display, &e)),
        };
        let mut entries: Vec<(String, String)> = Vec::new();
        for entry in reader {
            let name = entry.name.clone();
            let is_link = entry.is_symlink;
            // Follow symlinks to say what they point at.
            let target_meta = backend.metadata(&entry.path).ok();
            let line = match (&target_meta, is_link) {
                (Some(m), false) if m.is_dir => format!("{name}/"),
                (Some(m), false) => format!("{name}  ({} bytes)", m.len),
                (_, true) => {
                    let target = backend
                        .read_link(&entry.path)
                        .map(|t| t.to_string_lossy().into_owned())
                        .unwrap_or_else(|_| "?".into());
                    match &target_meta {
                        Some(m) if m.is_dir => format!("{name}/ -> {target}"),
                        Some(m) => format!("{name} -> {target}  ({} bytes)", m.len),
                        None => format!("{name} -> {target}  (broken link)"),
                    }
                }
                (None, false) => name.clone(),
            };
            entries.push((name, line));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let total = entries.len();
        let mut content = String::new();
        let mut shown = 0usize;
        for (_, line) in &entries {
            if shown >= MAX_DIR_ENTRIES || content.len() + line.len() + 1 > cap {
                break;
            }
            content.push_str(line);
            content.push('\n');
            shown += 1;
        }
        let truncated = shown < total;
        if truncated {
            content.push_str(&format!("[truncated: {} more entries]\n", total - shown));
        }
        if total == 0 {
            content.push_str("(empty directory)\n");
        }
        ToolOutput {
            ok: true,
            content: content.trim_end().to_string(),
            meta: json!({ "path": display, "entries": total, "truncated": truncated }),
            diff: None,
        }
    }
}

impl Tool for ListDir {
    fn name(&self) -> &'static str {
        "list_dir"
    }

    fn permission(&self) -> Permission {
        Permission::Read
    }

    fn category(&self) -> &'static str {
        "files"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description:
                "List a directory: entries sorted by name, directories with a trailing `/`, files \
                          with their size in bytes. `path` defaults to the working directory."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "Directory, relative to the working directory (default `.`)." }
                },
                "required": [],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, args: &Value, workdir: &Path) -> Result<ToolPlan, String> {
        plan_path(
            args,
            workdir,
            "path",
            Some("."),
            self.permission(),
            self.name(),
        )
        .map(|(plan, _)| plan)
    }

    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(run_blocking(move || {
            match plan_path(
                &args,
                &ctx.workdir,
                "path",
                Some("."),
                ListDir.permission(),
                "list_dir",
            ) {
                Ok((_, resolved)) => {
                    Self::list(ctx.backend.as_ref(), &resolved, ctx.output_cap.max(64))
                }
                Err(e) => ToolOutput::error(e),
            }
        }))
    }
}

#[cfg(test)]
#[path = "fs_tests.rs"]
mod tests;
