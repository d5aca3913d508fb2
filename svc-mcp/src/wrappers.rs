//! What a stdio command line really runs (issue 6, the `mcp_unsafe` checks): wrapper
//! commands are looked through, recursively, so `env -S "bash -c '…'"`, `nohup bash -c …`,
//! `timeout 10 bash` or `sudo -u x nice -n 5 python3 -c …` are judged by the program they
//! finally run.
//!
//! Wrappers known here, with their options: `env` (incl. `-S`/`--split-string`, `-i`, `-u`,
//! `-C`, `VAR=value`), `nohup`, `timeout`, `nice`, `ionice`, `stdbuf`, `setsid`, `sudo`,
//! `doas`, `pkexec`, `su`, `runuser`, `sg`, `command`, `exec`, `xargs`, `chrt`, `taskset`,
//! `unbuffer`, `time`, `nocache`, `flock`, `prlimit`, `chroot`, `setpriv`, `unshare`,
//! `nsenter`, `firejail`, `systemd-run`, `strace`, `chpst`, `caffeinate`, `catchsegv`,
//! `watch`, `script`, and `npx -c`. Some of them run a *shell command line* instead of an
//! argv (`su -c`, `sudo -s`, `script -c`, `flock -c`, `watch` without `-x`, `sg`,
//! `systemd-run --shell`, `npx -c`, `chroot` without a command): [`Run::shell_line`].
//!
//! Interpreters are recognised with a version in their name too (`python3.11`, `node20`,
//! `perl5.36`, `ruby3.2`, `bash5`): [`base_name`].

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

/// How deep wrappers are looked through (`env nohup env …`).
const MAX_DEPTH: usize = 16;

/// A command line after its wrappers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Run {
    /// The program finally run, as written (a path or a name).
    pub command: String,
    /// Its lowercase basename (`python3.11`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The wrappers looked through, outermost first.
    pub wrappers: Vec<String>,
    /// A wrapper that runs a shell command line (`su -c`, `sudo -s`, `watch`, …), described.
    pub shell_line: Option<String>,
    /// Wrappers that raise privileges (`sudo`, `doas`, `su`, `pkexec`).
    pub elevated: Vec<String>,
}

/// Lowercase basename of a command, without `.exe`.
pub fn basename(command: &str) -> String {
    let name = Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command)
        .to_ascii_lowercase();
    match name.strip_suffix(".exe") {
        Some(n) => n.to_owned(),
        None => name,
    }
}

/// Interpreters and shells whose versioned names (`python3.11`) mean the same program.
const VERSIONED_BASES: &[&str] = &[
    "python",
    "pypy",
    "node",
    "nodejs",
    "perl",
    "ruby",
    "php",
    "lua",
    "luajit",
    "deno",
    "bun",
    "rscript",
    "bash",
    "zsh",
    "ksh",
    "mksh",
    "dash",
    "fish",
    "tcsh",
    "csh",
    "ash",
    "pwsh",
    "powershell",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "tclsh",
    "wish",
    "osascript",
];

static VERSIONED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([a-z][a-z_]*?)-?[0-9]+(?:\.[0-9]+)*[a-z]?$").expect("a valid regex")
});

/// The base name of a program: `python3.11` → `python`, `node20` → `node`, `perl5.36` →
/// `perl`; anything else unchanged (after [`basename`]).
pub fn base_name(program: &str) -> String {
    let p = basename(program);
    if let Some(c) = VERSIONED.captures(&p) {
        if VERSIONED_BASES.contains(&&c[1]) {
            return c[1].to_owned();
        }
    }
    p
}

/// What a wrapper does with the command it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Runs its command as an argv.
    Plain,
    /// `env`: `-S STRING` splits STRING into the command line.
    Env,
    /// Runs its command with other privileges.
    Elevates,
    /// `su`: always a shell (`-c` command line, or an interactive one).
    Su,
    /// `runuser`: `-u USER cmd…` is an argv; `-c`, or no `-u`, is a shell.
    Runuser,
    /// A shell command line only when one of `shell_opts` is given.
    ShellWith,
    /// A shell command line unless one of `shell_opts` (the argv switch) is given.
    ShellUnless,
    /// Runs a shell when it has no command (`chroot DIR`).
    ShellWithout,
    /// `script`: `-c CMD` is a shell command line; without it, an interactive shell.
    Script,
    /// `npx`: not a wrapper, but `-c`/`--call` is a shell command line.
    Npx,
}

/// A wrapper command and its option syntax.
struct Wrapper {
    names: &'static [&'static str],
    /// Short options taking a value (attached or the next argument).
    short_values: &'static str,
    /// Long options taking the next argument when written without `=`.
    long_values: &'static [&'static str],
    /// Positional arguments before the command (`timeout 10 cmd`).
    positionals: usize,
    /// `VAR=value` words may precede the command.
    assignments: bool,
    /// `-10` (nice's old syntax) is an option.
    numeric: bool,
    kind: Kind,
    /// Options (short letters or long names) that switch the shell behaviour of `kind`.
    shell_opts: &'static [&'static str],
}

const fn w(names: &'static [&'static str], kind: Kind) -> Wrapper {
    Wrapper {
        names,
        short_values: "",
        long_values: &[],
        positionals: 0,
        assignments: false,
        numeric: false,
        kind,
        shell_opts: &[],
    }
}

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        short_values: "uCSaP",
        long_values: &["unset", "chdir", "split-string", "argv0"],
        assignments: true,
        ..w(&["env"], Kind::Env)
    },
    w(&["nohup", "nocache", "catchsegv", "unbuffer"], Kind::Plain),
    Wrapper {
        short_values: "ks",
        long_values: &["kill-after", "signal"],
        positionals: 1,
        ..w(&["timeout"], Kind::Plain)
    },
    Wrapper {
        short_values: "n",
        long_values: &["adjustment"],
        numeric: true,
        ..w(&["nice"], Kind::Plain)
    },
    Wrapper {
        short_values: "cnpPu",
        long_values: &["class", "classdata", "pid", "pgid", "uid"],
        ..w(&["ionice"], Kind::Plain)
    },
    Wrapper {
        short_values: "ioe",
        long_values: &["input", "output", "error"],
        ..w(&["stdbuf"], Kind::Plain)
    },
    w(&["setsid"], Kind::Plain),
    Wrapper {
        short_values: "ugCDprtUTR",
        long_values: &[
            "user",
            "group",
            "close-from",
            "chdir",
            "prompt",
            "role",
            "type",
            "other-user",
            "command-timeout",
            "chroot",
            "host",
        ],
        assignments: true,
        shell_opts: &["s", "i", "shell", "login"],
        ..w(&["sudo"], Kind::Elevates)
    },
    Wrapper {
        short_values: "uC",
        shell_opts: &["s"],
        ..w(&["doas"], Kind::Elevates)
    },
    Wrapper {
        long_values: &["user"],
        ..w(&["pkexec"], Kind::Elevates)
    },
    w(&["su"], Kind::Su),
    Wrapper {
        short_values: "ugGcsw",
        long_values: &[
            "user",
            "group",
            "supp-group",
            "command",
            "session-command",
            "shell",
            "whitelist-environment",
        ],
        ..w(&["runuser"], Kind::Runuser)
    },
    // `sg GROUP CMD` hands CMD to /bin/sh -c.
    Wrapper {
        short_values: "c",
        ..w(&["sg"], Kind::ShellUnless)
    },
    w(&["command"], Kind::Plain),
    Wrapper {
        short_values: "a",
        ..w(&["exec"], Kind::Plain)
    },
    Wrapper {
        short_values: "adEILnPs",
        long_values: &[
            "arg-file",
            "delimiter",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
        ],
        ..w(&["xargs"], Kind::Plain)
    },
    Wrapper {
        short_values: "TPD",
        long_values: &["sched-runtime", "sched-period", "sched-deadline"],
        positionals: 1,
        ..w(&["chrt"], Kind::Plain)
    },
    Wrapper {
        positionals: 1,
        ..w(&["taskset"], Kind::Plain)
    },
    Wrapper {
        short_values: "fo",
        long_values: &["format", "output"],
        ..w(&["time"], Kind::Plain)
    },
    Wrapper {
        short_values: "wEc",
        long_values: &["timeout", "wait", "conflict-exit-code", "command"],
        positionals: 1,
        shell_opts: &["c", "command"],
        ..w(&["flock"], Kind::ShellWith)
    },
    Wrapper {
        short_values: "p",
        long_values: &["pid"],
        ..w(&["prlimit"], Kind::Plain)
    },
    Wrapper {
        long_values: &["userspec", "groups"],
        positionals: 1,
        ..w(&["chroot"], Kind::ShellWithout)
    },
    w(&["setpriv", "firejail"], Kind::Plain),
    Wrapper {
        short_values: "SGRwC",
        long_values: &["setuid", "setgid", "root", "wd"],
        ..w(&["unshare"], Kind::Plain)
    },
    Wrapper {
        short_values: "tSG",
        long_values: &["target", "setuid", "setgid"],
        ..w(&["nsenter"], Kind::Plain)
    },
    Wrapper {
        short_values: "pEMHu",
        long_values: &[
            "property",
            "setenv",
            "machine",
            "host",
            "unit",
            "description",
            "slice",
            "uid",
            "gid",
            "nice",
            "working-directory",
        ],
        shell_opts: &["S", "shell"],
        ..w(&["systemd-run"], Kind::ShellWith)
    },
    Wrapper {
        short_values: "abeEIoOpPsSuUX",
        ..w(&["strace"], Kind::Plain)
    },
    Wrapper {
        short_values: "uUebnlLmdopfcrt/",
        ..w(&["chpst"], Kind::Plain)
    },
    Wrapper {
        short_values: "wt",
        ..w(&["caffeinate"], Kind::Plain)
    },
    Wrapper {
        short_values: "nq",
        long_values: &["interval", "equexit"],
        shell_opts: &["x", "exec"],
        ..w(&["watch"], Kind::ShellUnless)
    },
    Wrapper {
        short_values: "cIOTE",
        long_values: &[
            "command",
            "log-in",
            "log-out",
            "log-io",
            "log-timing",
            "echo",
        ],
        shell_opts: &["c", "command"],
        ..w(&["script"], Kind::Script)
    },
    Wrapper {
        short_values: "pc",
        long_values: &["package", "call"],
        shell_opts: &["c", "call"],
        ..w(&["npx"], Kind::Npx)
    },
];

/// An option seen while scanning a wrapper's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Opt {
    /// The short letter or the long name.
    name: String,
    value: Option<String>,
}

/// A wrapper's arguments, scanned.
#[derive(Debug, Default)]
struct Scan {
    opts: Vec<Opt>,
    /// Index of the command it runs.
    command: Option<usize>,
}

impl Scan {
    fn has(&self, names: &[&str]) -> bool {
        self.opts.iter().any(|o| names.contains(&o.name.as_str()))
    }
}

fn is_assignment(a: &str) -> bool {
    a.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit())
    })
}

fn scan(w: &Wrapper, args: &[String]) -> Scan {
    let mut out = Scan::default();
    let mut positionals = w.positionals;
    let mut options = true;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if options && a == "--" {
            options = false;
            i += 1;
            continue;
        }
        if options && a.len() > 2 && a.starts_with("--") {
            let (name, value) = match a[2..].split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (&a[2..], None),
            };
            let value = match value {
                None if w.long_values.contains(&name) => {
                    i += 1;
                    args.get(i).cloned()
                }
                v => v,
            };
            out.opts.push(Opt {
                name: name.to_owned(),
                value,
            });
            // `env -S` splits here; the rest is re-read with the split words.
            if w.kind == Kind::Env && name == "split-string" {
                out.command = Some(i + 1);
                return out;
            }
            i += 1;
            continue;
        }
        if options && a == "-" && w.kind == Kind::Env {
            i += 1;
            continue;
        }
        if options && a.len() > 1 && a.starts_with('-') {
            if w.numeric && a[1..].chars().all(|c| c.is_ascii_digit()) {
                i += 1;
                continue;
            }
            let cluster = &a[1..];
            for (j, c) in cluster.char_indices() {
                // Option letters are alphanumeric; anything else is not an option cluster
                // (`-y @scope/pkg` written as one argument).
                if !c.is_ascii_alphanumeric() && !w.short_values.contains(c) {
                    break;
                }
                if w.short_values.contains(c) {
                    let rest = &cluster[j + c.len_utf8()..];
                    let value = if rest.is_empty() {
                        i += 1;
                        args.get(i).cloned()
                    } else {
                        Some(rest.to_owned())
                    };
                    out.opts.push(Opt {
                        name: c.to_string(),
                        value,
                    });
                    if w.kind == Kind::Env && c == 'S' {
                        out.command = Some(i + 1);
                        return out;
                    }
                    break;
                }
                out.opts.push(Opt {
                    name: c.to_string(),
                    value: None,
                });
            }
            i += 1;
            continue;
        }
        if w.assignments && is_assignment(a) {
            i += 1;
            continue;
        }
        if positionals > 0 {
            positionals -= 1;
            i += 1;
            continue;
        }
        out.command = Some(i);
        return out;
    }
    out
}

/// Splits `env -S`'s string like env does: whitespace separates, quotes group, a backslash
/// escapes (`\_` is a space), `\c` ends it, `#` at the start of a word starts a comment.
pub fn split_env_string(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    cur.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('_') => cur.push(' '),
                            Some('n') => cur.push('\n'),
                            Some('t') => cur.push('\t'),
                            Some(e) => cur.push(e),
                            None => {}
                        },
                        q => cur.push(q),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('_') if in_word => {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
                Some('_') => {}
                Some('c') => break,
                Some('n') => {
                    in_word = true;
                    cur.push('\n');
                }
                Some('t') => {
                    in_word = true;
                    cur.push('\t');
                }
                Some(e) => {
                    in_word = true;
                    cur.push(e);
                }
                None => {}
            },
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// Looks through the wrappers of `command args…` (see the module doc).
pub fn unwrap(command: &str, args: &[String]) -> Run {
    let mut run = Run {
        command: command.to_owned(),
        program: basename(command),
        args: args.to_vec(),
        ..Run::default()
    };
    for _ in 0..MAX_DEPTH {
        let Some(w) = WRAPPERS
            .iter()
            .find(|w| w.names.contains(&run.program.as_str()))
        else {
            break;
        };
        let name = run.program.clone();
        let s = scan(w, &run.args);
        match w.kind {
            Kind::Elevates => run.elevated.push(name.clone()),
            Kind::Su => {
                run.elevated.push(name.clone());
                run.shell_line = Some(name);
                break;
            }
            Kind::Runuser
                if s.has(&["c", "command", "session-command"]) || !s.has(&["u", "user"]) =>
            {
                run.shell_line = Some(name);
                break;
            }
            Kind::ShellWith | Kind::Script if s.has(w.shell_opts) => {
                run.shell_line = Some(format!("{name} -{}", w.shell_opts[0]));
                break;
            }
            Kind::Script => {
                // `script` without -c runs an interactive $SHELL.
                run.shell_line = Some(name);
                break;
            }
            Kind::ShellUnless if !s.has(w.shell_opts) => {
                run.shell_line = Some(name);
                break;
            }
            Kind::Npx => {
                if s.has(w.shell_opts) {
                    run.shell_line = Some("npx -c".into());
                }
                break;
            }
            _ => {}
        }
        if w.kind == Kind::Elevates && s.has(w.shell_opts) {
            run.shell_line = Some(format!("{name} -s"));
            run.wrappers.push(name);
            break;
        }
        let Some(at) = s.command else {
            if w.kind == Kind::ShellWithout {
                run.shell_line = Some(name);
            }
            break;
        };
        if w.kind == Kind::Env
            && s.opts
                .last()
                .is_some_and(|o| o.name == "S" || o.name == "split-string")
        {
            // Re-read as `env <split words> <rest>`: options may follow inside the string.
            let split = s
                .opts
                .last()
                .and_then(|o| o.value.clone())
                .unwrap_or_default();
            let mut next = split_env_string(&split);
            next.extend(run.args.get(at..).unwrap_or_default().iter().cloned());
            run.args = next;
            continue;
        }
        let Some(cmd) = run.args.get(at).cloned() else {
            break;
        };
        run.wrappers.push(name);
        run.program = basename(&cmd);
        run.command = cmd;
        run.args = run.args[at + 1..].to_vec();
    }
    run
}

/// How an interpreter takes inline code.
struct Inline {
    names: &'static [&'static str],
    /// Short options whose value is code (`-c`, `-e`).
    code_short: &'static str,
    /// Long options whose value is code (`--eval`).
    code_long: &'static [&'static str],
    /// Short options taking a value (attached or the next argument).
    short_values: &'static str,
    /// Short options taking the rest of their cluster as value (`perl -Mstrict`).
    attached: &'static str,
    /// Short options taking attached digits only, letters after them being options again
    /// (`perl -l0e`, `perl -le`).
    digits: &'static str,
    /// Long options taking the next argument when written without `=`.
    long_values: &'static [&'static str],
    /// Short options after which the rest belongs to someone else (`python -m mod …`).
    stop: &'static str,
    /// A first positional that means inline code (`deno eval CODE`).
    subcommand: Option<&'static str>,
    /// awk: the first positional IS the program, unless `-f FILE` gave one.
    awk: bool,
}

const fn inline(names: &'static [&'static str], code_short: &'static str) -> Inline {
    Inline {
        names,
        code_short,
        code_long: &[],
        short_values: "",
        attached: "",
        digits: "",
        long_values: &[],
        stop: "",
        subcommand: None,
        awk: false,
    }
}

const INLINE: &[Inline] = &[
    Inline {
        short_values: "WX",
        stop: "m",
        long_values: &["check-hash-based-pycs"],
        ..inline(&["python", "pypy"], "c")
    },
    Inline {
        code_long: &["eval", "print"],
        short_values: "rC",
        long_values: &[
            "require",
            "import",
            "loader",
            "experimental-loader",
            "conditions",
            "input-type",
            "env-file",
            "title",
        ],
        ..inline(&["node", "nodejs", "bun"], "ep")
    },
    Inline {
        subcommand: Some("eval"),
        ..inline(&["deno"], "")
    },
    Inline {
        short_values: "I",
        attached: "MmixCdDFV",
        digits: "l0",
        ..inline(&["perl"], "eE")
    },
    Inline {
        short_values: "rICE",
        attached: "FxKTW",
        digits: "0",
        ..inline(&["ruby"], "e")
    },
    Inline {
        short_values: "cdfztS",
        ..inline(&["php"], "rRBE")
    },
    Inline {
        short_values: "l",
        ..inline(&["lua", "luajit"], "e")
    },
    inline(&["rscript", "osascript"], "e"),
    Inline {
        code_long: &["source"],
        short_values: "fvF",
        long_values: &["file", "assign", "field-separator"],
        awk: true,
        ..inline(&["awk", "gawk", "mawk", "nawk"], "e")
    },
    Inline {
        short_values: "oO",
        long_values: &["rcfile", "init-file"],
        ..inline(
            &[
                "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash",
            ],
            "c",
        )
    },
];

/// True when `program` (a base name, see [`base_name`]) is given inline code in `args`
/// (`python -c`, `python3.11 -uc`, `node -e`, `perl -le`, `awk 'BEGIN{…}'`, `bash -lc`), not
/// a script or package. Options after the script (its own arguments) do not count.
pub fn runs_inline_code(program: &str, args: &[String]) -> bool {
    let Some(rule) = INLINE.iter().find(|r| r.names.contains(&program)) else {
        return false;
    };
    let mut options = true;
    let mut program_file = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if options && a == "--" {
            options = false;
            i += 1;
            continue;
        }
        if options && a.len() > 2 && a.starts_with("--") {
            let (name, value) = match a[2..].split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (&a[2..], None),
            };
            if rule.code_long.contains(&name) {
                return true;
            }
            if rule.awk && name == "file" {
                program_file = true;
            }
            if value.is_none() && rule.long_values.contains(&name) {
                i += 1;
            }
            i += 1;
            continue;
        }
        if options && a.len() > 1 && a.starts_with('-') {
            let cluster = &a[1..];
            let mut chars = cluster.char_indices();
            while let Some((j, c)) = chars.next() {
                if !c.is_ascii_alphanumeric() {
                    break;
                }
                if rule.code_short.contains(c) {
                    return true;
                }
                if rule.stop.contains(c) {
                    return false;
                }
                if rule.short_values.contains(c) {
                    if rule.awk && c == 'f' {
                        program_file = true;
                    }
                    if cluster[j + c.len_utf8()..].is_empty() {
                        i += 1;
                    }
                    break;
                }
                if rule.attached.contains(c) {
                    break;
                }
                if rule.digits.contains(c) {
                    // `perl -l0e …`: the value is the digits that follow; letters go on.
                    let rest = &cluster[j + c.len_utf8()..];
                    let n = rest.chars().take_while(char::is_ascii_digit).count();
                    for _ in 0..n {
                        chars.next();
                    }
                }
            }
            i += 1;
            continue;
        }
        // The first positional: the script (or awk's program, or a subcommand).
        if let Some(sub) = rule.subcommand {
            return a == sub;
        }
        return rule.awk && !program_file;
    }
    false
}

#[cfg(test)]
#[path = "wrappers_tests.rs"]
mod tests;
