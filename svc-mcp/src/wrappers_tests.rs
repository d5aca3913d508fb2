use super::*;

fn argv(s: &[&str]) -> Vec<String> {
    s.iter().map(|a| a.to_string()).collect()
}

/// (command line, program finally run, its args, a shell command line?, elevated?)
type Case = (
    &'static [&'static str],
    &'static str,
    &'static [&'static str],
    bool,
    bool,
);

#[test]
fn wrappers_are_looked_through() {
    let table: &[Case] = &[
        (&["node", "s.js"], "node", &["s.js"], false, false),
        (
            &["env", "FOO=1", "bash", "-c", "x"],
            "bash",
            &["-c", "x"],
            false,
            false,
        ),
        (
            &["env", "-S", "bash -c 'echo hi'"],
            "bash",
            &["-c", "echo hi"],
            false,
            false,
        ),
        (
            &[
                "/usr/bin/env",
                "-S",
                "-i A=1 python3 -c \"import os\"",
                "extra",
            ],
            "python3",
            &["-c", "import os", "extra"],
            false,
            false,
        ),
        (&["env", "-Sbash -c x"], "bash", &["-c", "x"], false, false),
        (
            &["env", "--split-string=nohup bash -c x"],
            "bash",
            &["-c", "x"],
            false,
            false,
        ),
        (
            &[
                "env",
                "-i",
                "-u",
                "HOME",
                "-C",
                "/tmp",
                "--unset=PATH",
                "-",
                "bash",
            ],
            "bash",
            &[],
            false,
            false,
        ),
        (
            &["nohup", "bash", "-c", "echo"],
            "bash",
            &["-c", "echo"],
            false,
            false,
        ),
        (&["timeout", "10", "bash"], "bash", &[], false, false),
        (
            &[
                "timeout",
                "-k",
                "5",
                "--signal=TERM",
                "10s",
                "sh",
                "-c",
                "x",
            ],
            "sh",
            &["-c", "x"],
            false,
            false,
        ),
        (&["nice", "-n", "5", "zsh"], "zsh", &[], false, false),
        (&["nice", "-10", "zsh"], "zsh", &[], false, false),
        (&["ionice", "-c", "3", "bash"], "bash", &[], false, false),
        (
            &["stdbuf", "-oL", "-e", "0", "bash"],
            "bash",
            &[],
            false,
            false,
        ),
        (&["setsid", "-f", "bash"], "bash", &[], false, false),
        (
            &["sudo", "-u", "root", "-E", "HOME=/x", "bash"],
            "bash",
            &[],
            false,
            true,
        ),
        (
            &["doas", "-u", "root", "node", "s.js"],
            "node",
            &["s.js"],
            false,
            true,
        ),
        (&["command", "-p", "bash"], "bash", &[], false, false),
        (&["exec", "-a", "name", "bash"], "bash", &[], false, false),
        (
            &["xargs", "-0", "-n", "1", "bash", "-c", "x"],
            "bash",
            &["-c", "x"],
            false,
            false,
        ),
        (&["chrt", "-f", "10", "bash"], "bash", &[], false, false),
        (&["taskset", "-c", "0-3", "bash"], "bash", &[], false, false),
        (&["unbuffer", "-p", "bash"], "bash", &[], false, false),
        (&["time", "-f", "%e", "bash"], "bash", &[], false, false),
        (&["flock", "/tmp/l", "bash"], "bash", &[], false, false),
        (&["chroot", "/srv/root", "bash"], "bash", &[], false, false),
        (
            &[
                "env",
                "nohup",
                "timeout",
                "5",
                "nice",
                "sudo",
                "python3.11",
                "-c",
                "x",
            ],
            "python3.11",
            &["-c", "x"],
            false,
            true,
        ),
        // Shell command lines.
        (
            &["su", "-c", "node s.js"],
            "su",
            &["-c", "node s.js"],
            true,
            true,
        ),
        (&["sudo", "-s"], "sudo", &["-s"], true, true),
        (
            &["sudo", "-i", "node", "s.js"],
            "sudo",
            &["-i", "node", "s.js"],
            true,
            true,
        ),
        (
            &["script", "-qc", "node s.js"],
            "script",
            &["-qc", "node s.js"],
            true,
            false,
        ),
        (
            &["flock", "/tmp/l", "-c", "x"],
            "flock",
            &["/tmp/l", "-c", "x"],
            true,
            false,
        ),
        (
            &["watch", "-n", "1", "node s.js"],
            "watch",
            &["-n", "1", "node s.js"],
            true,
            false,
        ),
        (
            &["watch", "-x", "node", "s.js"],
            "node",
            &["s.js"],
            false,
            false,
        ),
        (
            &["runuser", "-u", "nobody", "--", "node"],
            "node",
            &[],
            false,
            false,
        ),
        (
            &["runuser", "nobody", "-c", "x"],
            "runuser",
            &["nobody", "-c", "x"],
            true,
            false,
        ),
        (
            &["systemd-run", "--shell"],
            "systemd-run",
            &["--shell"],
            true,
            false,
        ),
        (
            &["chroot", "/srv/root"],
            "chroot",
            &["/srv/root"],
            true,
            false,
        ),
        (
            &["npx", "-c", "bash -c x"],
            "npx",
            &["-c", "bash -c x"],
            true,
            false,
        ),
        (
            &["npx", "-y", "@scope/server"],
            "npx",
            &["-y", "@scope/server"],
            false,
            false,
        ),
    ];
    for (line, program, args, shell, elevated) in table {
        let r = unwrap(line[0], &argv(&line[1..]));
        assert_eq!(r.program, *program, "{line:?}: {r:?}");
        assert_eq!(r.args, argv(args), "{line:?}: {r:?}");
        assert_eq!(r.shell_line.is_some(), *shell, "{line:?}: {r:?}");
        assert_eq!(!r.elevated.is_empty(), *elevated, "{line:?}: {r:?}");
    }
}

#[test]
fn wrapper_loops_are_bounded() {
    let mut line = vec!["nohup"; 100];
    line.push("bash");
    let r = unwrap(line[0], &argv(&line[1..]));
    assert_eq!(
        r.program, "nohup",
        "gave up after {MAX_DEPTH} levels: {r:?}"
    );
    let r = unwrap("env", &argv(&["-S", "env -S 'env -S \"env -S x\"'"]));
    assert!(r.wrappers.len() <= MAX_DEPTH);
}

#[test]
fn versioned_interpreters_have_their_base_names() {
    for (name, base) in [
        ("python3.11", "python"),
        ("python3", "python"),
        ("/usr/bin/python3.13t", "python"),
        ("python", "python"),
        ("pypy3", "pypy"),
        ("node20", "node"),
        ("nodejs", "nodejs"),
        ("perl5.36", "perl"),
        ("perl5.36.0", "perl"),
        ("ruby3.2", "ruby"),
        ("php8.2", "php"),
        ("lua5.4", "lua"),
        ("bash5", "bash"),
        ("Python3.EXE", "python"),
        ("x11", "x11"),
        ("server2", "server2"),
    ] {
        assert_eq!(base_name(name), base, "{name}");
    }
}

/// (base program, args, inline code?)
#[test]
fn inline_code_is_recognised_before_the_script_only() {
    let table: &[(&str, &[&str], bool)] = &[
        ("python", &["-c", "import os"], true),
        ("python", &["-uc", "import os"], true),
        ("python", &["-W", "ignore", "-c", "x"], true),
        ("python", &["server.py", "-c", "config.yaml"], false),
        ("python", &["-m", "server", "-c", "x"], false),
        ("node", &["-e", "x"], true),
        ("node", &["--eval=x"], true),
        ("node", &["-pe", "x"], true),
        ("node", &["-r", "ts-node/register", "s.ts", "-e"], false),
        ("bun", &["--print", "x"], true),
        ("deno", &["eval", "x"], true),
        ("deno", &["run", "s.ts"], false),
        ("perl", &["-le", "print 1"], true),
        ("perl", &["-Mstrict", "-E", "say 1"], true),
        ("perl", &["-Mfeature=say", "s.pl", "-e"], false),
        ("perl", &["-l", "-e", "x"], true),
        ("ruby", &["-rjson", "-e", "x"], true),
        ("ruby", &["-E", "UTF-8", "s.rb"], false),
        ("php", &["-r", "x"], true),
        ("php", &["-f", "s.php"], false),
        ("lua", &["-e", "x"], true),
        ("awk", &["BEGIN{system(\"sh\")}"], true),
        ("gawk", &["-f", "prog.awk"], false),
        ("gawk", &["-v", "a=1", "--", "{print}"], true),
        ("bash", &["-lc", "x"], true),
        ("bash", &["-o", "errexit", "-c", "x"], true),
        ("bash", &["script.sh", "-c"], false),
        ("tclsh", &["-c"], false),
    ];
    for (program, args, code) in table {
        assert_eq!(
            runs_inline_code(program, &argv(args)),
            *code,
            "{program} {args:?}"
        );
    }
}

#[test]
fn env_strings_split_like_env_does() {
    assert_eq!(
        split_env_string(r#"bash -c 'echo hi' "a b" c\ d e\_f # comment"#),
        argv(&["bash", "-c", "echo hi", "a b", "c d", "e", "f"])
    );
    assert_eq!(split_env_string(r"a \c b"), argv(&["a"]));
    assert_eq!(split_env_string(""), Vec::<String>::new());
}

#[test]
fn an_argument_with_spaces_is_not_an_option_cluster() {
    let r = unwrap(
        "npx",
        &argv(&["-y @modelcontextprotocol/server-memory /tmp"]),
    );
    assert!(r.shell_line.is_none(), "{r:?}");
    assert!(!runs_inline_code(
        "python",
        &argv(&["-W ignore::c", "s.py"])
    ));
    assert!(runs_inline_code("perl", &argv(&["-l0e", "x"])));
}
