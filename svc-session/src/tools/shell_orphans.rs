//! Commands of the `shell` tool that outlived a killed svc-session (DESIGN.md §5: a crash
//! of one process loses nothing and leaves nothing behind).
//!
//! Each command runs in its own process group (so an interrupt can end the whole group),
//! which also means a kill -9 of svc-session does not take it along. Every command, and
//! everything it starts, inherits [`OWNER_ENV`] = the Snowpea home. When svc-session
//! starts — before it runs any command of its own — [`reap`] finds the processes carrying
//! its home's mark in `/proc/<pid>/environ` and SIGKILLs their process groups. Only
//! processes of the same user are readable there, so nothing else is touched.

use std::collections::BTreeSet;
use std::path::Path;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::{getpgid, Pid};

/// Environment variable marking a `shell` command with the home of the svc-session that
/// started it.
pub const OWNER_ENV: &str = "SNOWPEA_SHELL_OWNER";

/// Process ids whose environment holds `OWNER_ENV=<home>` (this process excluded).
pub fn marked(home: &Path) -> Vec<i32> {
    let mark = format!("{OWNER_ENV}={}", home.display()).into_bytes();
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == mark.as_slice()))
                .unwrap_or(false)
        })
        .collect()
}

/// SIGKILLs the process groups of every process [`marked`] with `home`; returns how many
/// groups were killed. Called once at start-up, before any command of this process runs.
pub fn reap(home: &Path) -> usize {
    let groups: BTreeSet<Pid> = marked(home)
        .into_iter()
        .filter_map(|pid| getpgid(Some(Pid::from_raw(pid))).ok())
        // Never our own group (svc-session's commands are never in it, but be sure).
        .filter(|g| Some(*g) != getpgid(None).ok())
        .collect();
    let mut killed = 0;
    for g in groups {
        if killpg(g, Signal::SIGKILL).is_ok() {
            killed += 1;
        }
    }
    if killed > 0 {
        tracing::warn!(
            groups = killed,
            "killed shell commands left running by a previous svc-session"
        );
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    fn alive(pid: i32) -> bool {
        // A zombie (exited, not yet reaped by the test) counts as gone.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
    }

    #[test]
    fn reap_kills_the_marked_groups_with_their_grandchildren_and_nothing_else() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let other = t.path().join("other");
        let spawn = |owner: &Path, pidfile: &Path| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("sleep 60 & echo $! > {}; wait", pidfile.display()))
                .env(OWNER_ENV, owner)
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let mut mine = spawn(&home, &t.path().join("mine.pid"));
        let mut theirs = spawn(&other, &t.path().join("theirs.pid"));
        let read_pid = |f: &str| {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if let Some(p) = std::fs::read_to_string(t.path().join(f))
                    .ok()
                    .and_then(|s| s.trim().parse::<i32>().ok())
                {
                    return p;
                }
                assert!(Instant::now() < deadline, "{f} written");
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let (my_sleep, their_sleep) = (read_pid("mine.pid"), read_pid("theirs.pid"));
        assert!(
            marked(&home).contains(&my_sleep),
            "the grandchild inherits the mark"
        );

        assert_eq!(reap(&home), 1);
        let _ = mine.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(my_sleep) {
            assert!(Instant::now() < deadline, "the grandchild was killed");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(alive(their_sleep), "another home's command is left alone");
        assert!(marked(&home).is_empty());

        let _ = killpg(Pid::from_raw(theirs.id() as i32), Signal::SIGKILL);
        let _ = theirs.wait();
    }
}
