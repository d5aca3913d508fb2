//! The README and docs/OPERATIONS.md as a new user follows them (issue 25 items 1, 3, 6):
//! `scripts/install.sh` into a temp prefix leaves a runnable `snowpea` with its services
//! beside it, the README's start line plus `snowpea run "hello"` streams the demo model's
//! answer, a lone `snowpea` names the binary it misses, `snowpea-bench --help` only prints
//! help, and every practical `snowpea …` command line of the two documents exits 0 against
//! a real suite on a temp home.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use snowpea_e2e::bin_dir;

/// Bound of one documented command (`timeout(1)`), in seconds.
const COMMAND_TIMEOUT_SECS: &str = "120";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `sh -c line` in the repository with `bin` first on PATH and `home` as SNOWPEA_HOME,
/// bounded by [`COMMAND_TIMEOUT_SECS`].
fn sh(line: &str, bin: &Path, home: &Path) -> Output {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("timeout")
        .args([COMMAND_TIMEOUT_SECS, "sh", "-c", line])
        .current_dir(repo())
        .env("PATH", path)
        .env("SNOWPEA_HOME", home)
        .env("SNOWPEA_STOP_GRACE_MS", "2000")
        .env_remove("SNOWPEA_BIN_DIR")
        .env_remove("SNOWPEA_PROVIDER")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// Stops the suite of `home` when dropped.
struct StopOnDrop(PathBuf, PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = sh("snowpea supervisor stop", &self.0, &self.1);
    }
}

#[test]
fn install_then_the_readme_start_line_and_run_stream_the_demo_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("prefix");
    let target = bin_dir().parent().unwrap().to_path_buf();
    let out = Command::new(repo().join("scripts/install.sh"))
        .args(["--debug", "--no-build", "--prefix"])
        .arg(&prefix)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let bin = prefix.join("bin");
    for b in [
        "snowpea",
        "snowpea-gateway",
        "snowpea-svc-session",
        "snowpea-svc-memory",
        "snowpea-svc-scheduler",
        "snowpea-svc-mcp",
        "snowpea-svc-audio",
        "snowpea-svc-chat",
    ] {
        assert!(bin.join(b).exists(), "{b} installed: {}", text(&out));
    }

    // The README's first command, without the build it starts with.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let first = readme
        .lines()
        .find(|l| l.starts_with("scripts/install.sh && "))
        .expect("the README's first command installs and starts");
    let start = first.trim_start_matches("scripts/install.sh && ");
    let home = tmp.path().join("home");
    let _stop = StopOnDrop(bin.clone(), home.clone());
    let out = sh(start, &bin, &home);
    assert!(out.status.success(), "{start}\n{}", text(&out));

    let out = sh("snowpea run \"hello\"", &bin, &home);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Hello from Snowpea"),
        "{}",
        text(&out)
    );
    let out = sh("snowpea run \"list the files\"", &bin, &home);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("▸ list_dir"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_lone_snowpea_names_the_missing_binary_where_it_looked_and_snowpea_bin_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let lone = tmp.path().join("lone");
    std::fs::create_dir(&lone).unwrap();
    std::fs::copy(bin_dir().join("snowpea"), lone.join("snowpea")).unwrap();
    let home = tmp.path().join("home");
    let _stop = StopOnDrop(lone.clone(), home.clone());
    let out = sh("snowpea supervisor start", &lone, &home);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("not found in {}", lone.display())),
        "{}",
        text(&out)
    );
    assert!(
        err.contains("snowpea-svc-") || err.contains("snowpea-gateway"),
        "{err}"
    );
    assert!(err.contains("SNOWPEA_BIN_DIR"), "{err}");
    assert!(
        !err.contains("snowpea: snowpea"),
        "no doubled prefix: {err}"
    );
}

#[test]
fn snowpea_bench_help_prints_help_instead_of_running() {
    let out = Command::new(env!("CARGO_BIN_EXE_snowpea-bench"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Usage: snowpea-bench"), "{stdout}");
    assert!(
        !stdout.contains("cold start:"),
        "the benchmark ran: {stdout}"
    );
}

/// The `snowpea …` lines of the ```sh blocks of `doc`, with `# comments` and `[optional]`
/// parts removed; lines with placeholders (`…`, `<…>`) or that delete files are left out.
fn documented_commands(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in doc.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = t == "```sh";
            continue;
        }
        if !in_sh || !t.starts_with("snowpea ") {
            continue;
        }
        let mut cmd = String::new();
        let mut depth = 0;
        for ch in t.split(" #").next().unwrap_or_default().chars() {
            match ch {
                '[' => depth += 1,
                ']' => depth -= 1,
                c if depth == 0 => cmd.push(c),
                _ => {}
            }
        }
        let cmd = cmd.split_whitespace().collect::<Vec<_>>().join(" ");
        if cmd.contains('…') || cmd.contains('<') || cmd.contains("rm -rf") {
            continue;
        }
        out.push(cmd);
    }
    out
}

#[test]
fn every_documented_snowpea_command_works_as_written() {
    let mut commands = Vec::new();
    for doc in ["README.md", "docs/OPERATIONS.md"] {
        commands.extend(documented_commands(
            &std::fs::read_to_string(repo().join(doc)).unwrap(),
        ));
    }
    assert!(commands.len() >= 12, "{commands:?}");
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let bin = bin_dir();
    let _stop = StopOnDrop(bin.clone(), home.clone());
    let demo = format!(
        "SNOWPEA_PROVIDER=fake:{}/examples/demo.json snowpea supervisor start",
        repo().display()
    );
    for cmd in &commands {
        // Each command finds the suite running, as after the README's first command.
        if !cmd.starts_with("snowpea supervisor start") {
            let out = sh(&demo, &bin, &home);
            assert!(out.status.success(), "{demo}\n{}", text(&out));
        }
        let out = sh(cmd, &bin, &home);
        assert!(out.status.success(), "{cmd}\n{}", text(&out));
    }
}

/// The Markdown documents a reader of the repository gets: the READMEs and `docs/*.md`.
fn reader_docs() -> Vec<PathBuf> {
    let mut docs = vec![repo().join("README.md"), repo().join("sdk/README.md")];
    let mut in_docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    in_docs.sort();
    docs.extend(in_docs);
    docs.into_iter().filter(|p| p.exists()).collect()
}

/// `(line number, phrase)` of every "issue 14"-style reference in `text` ("issue", "issues",
/// any case, then an optional `#` and a number).
fn issue_numbers(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lower = line.to_lowercase();
        let mut from = 0;
        while let Some(i) = lower[from..].find("issue") {
            let at = from + i;
            let before_ok = at == 0 || !lower[..at].ends_with(|c: char| c.is_alphanumeric());
            let rest = lower[at + "issue".len()..].trim_start_matches('s');
            let rest = rest.strip_prefix(' ').unwrap_or("");
            let rest = rest.trim_start_matches('#');
            if before_ok && rest.starts_with(|c: char| c.is_ascii_digit()) {
                found.push((n + 1, line[at..].chars().take(20).collect()));
            }
            from = at + "issue".len();
        }
    }
    found
}

/// The targets of the Markdown links `[text](target)` of `text`, with their line numbers
/// (code blocks and `code spans` hold no links).
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for prose in line.split('`').step_by(2) {
            let mut rest = prose;
            while let Some(i) = rest.find("](") {
                let after = &rest[i + 2..];
                let Some(end) = after.find(')') else { break };
                found.push((n + 1, after[..end].to_owned()));
                rest = &after[end..];
            }
        }
    }
    found
}

/// Issue 39 item 7: a reader of the docs has the repository, not the tracker or the files
/// around it — no internal issue numbers, and every relative link (and every `../` path)
/// stays inside the repository and names a file that exists.
#[test]
fn docs_name_no_internal_issue_numbers_and_link_only_inside_the_repository() {
    let root = std::fs::canonicalize(repo()).unwrap();
    let mut problems = Vec::new();
    for doc in reader_docs() {
        let name = doc.strip_prefix(repo()).unwrap().display().to_string();
        let body = std::fs::read_to_string(&doc).unwrap();
        for (line, phrase) in issue_numbers(&body) {
            problems.push(format!("{name}:{line}: internal issue number {phrase:?}"));
        }
        let dir = doc.parent().unwrap();
        for (line, target) in link_targets(&body) {
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            match std::fs::canonicalize(dir.join(path)) {
                Ok(p) if p.starts_with(&root) => {}
                Ok(p) => problems.push(format!(
                    "{name}:{line}: link {target} leaves the repository ({})",
                    p.display()
                )),
                Err(_) => problems.push(format!("{name}:{line}: link {target} names no file")),
            }
        }
        // A path in backticks that climbs out of the document's folder must stay inside.
        for (n, l) in body.lines().enumerate() {
            for quoted in l.split('`').skip(1).step_by(2) {
                if quoted.starts_with("../") && !inside(&root, &dir.join(quoted)) {
                    problems.push(format!(
                        "{name}:{}: a path outside the repository: {quoted}",
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Whether `path`, with its `..` resolved by name (it need not exist), is under `root`.
fn inside(root: &Path, path: &Path) -> bool {
    let mut parts: Vec<std::path::Component> = Vec::new();
    let base = std::fs::canonicalize(repo()).unwrap();
    let rel = path.strip_prefix(repo()).unwrap_or(path);
    let joined = base.join(rel);
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::CurDir => {}
            other => parts.push(other),
        }
    }
    parts.iter().collect::<PathBuf>().starts_with(root)
}

#[test]
fn the_docs_checks_find_what_they_look_for() {
    let root = std::fs::canonicalize(repo()).unwrap();
    assert!(inside(&root, &repo().join("sdk/../target/debug")));
    assert!(!inside(&root, &repo().join("docs/../../shared/DESIGN.md")));
    assert_eq!(
        issue_numbers("see issue 14, Issues #15 and the tissue 3; issue-free"),
        vec![
            (1, "issue 14, Issues #15".to_owned()),
            (1, "Issues #15 and the t".to_owned())
        ]
    );
    assert_eq!(
        link_targets("[a](docs/X.md) and [b](../shared/DESIGN.md#x), not `[c](uri)`"),
        vec![
            (1, "docs/X.md".to_owned()),
            (1, "../shared/DESIGN.md#x".to_owned())
        ]
    );
}
