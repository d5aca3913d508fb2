//! Child processes a killed service left behind (DESIGN.md §6 "Crash recovery": a crash of
//! one process loses nothing and leaves nothing running).
//!
//! Services run what they start (the `shell` tool's commands, speech engines) in process
//! groups of their own, so an interrupt or a deadline can end the whole group — which also
//! means a `kill -9` of the service does not take them along. Every such child therefore
//! carries [`MARK_ENV`] = [`mark`]`(service, home)`, inherited by everything it starts.
//! When the service starts again — before it starts any child of its own — [`reap`] finds
//! the processes carrying its mark in `/proc/<pid>/environ` and SIGKILLs their process
//! groups. Only the same user's processes are readable there, and the mark names the
//! service and the home, so nothing else is touched.

use std::collections::BTreeSet;
use std::path::Path;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::{getpgid, Pid};

/// Environment variable marking a child with the service and home that started it.
pub const MARK_ENV: &str = "SNOWPEA_CHILD_OF";

/// The mark of `service`'s children in `home`: `<service>@<home>`.
pub fn mark(service: &str, home: &Path) -> String {
    format!("{service}@{}", home.display())
}

/// Process ids whose environment holds `MARK_ENV=<mark>` (this process excluded).
pub fn marked(mark: &str) -> Vec<i32> {
    let entry = format!("{MARK_ENV}={mark}").into_bytes();
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == entry.as_slice()))
                .unwrap_or(false)
        })
        .collect()
}

/// SIGKILLs the process groups of every process [`marked`] with `mark`; returns how many
/// groups were killed. Call it once at start-up, before any child of this process runs.
pub fn reap(mark: &str) -> usize {
    let own = getpgid(None).ok();
    let groups: BTreeSet<Pid> = marked(mark)
        .into_iter()
        .filter_map(|pid| getpgid(Some(Pid::from_raw(pid))).ok())
        .filter(|g| Some(*g) != own)
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
            mark,
            "killed child processes left running by a previous instance"
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
                .env(MARK_ENV, mark("session", owner))
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
            marked(&mark("session", &home)).contains(&my_sleep),
            "the grandchild inherits the mark"
        );

        assert_eq!(reap(&mark("audio", &home)), 0, "another service's mark");
        assert_eq!(reap(&mark("session", &home)), 1);
        let _ = mine.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(my_sleep) {
            assert!(Instant::now() < deadline, "the grandchild was killed");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(alive(their_sleep), "another home's command is left alone");
        assert!(marked(&mark("session", &home)).is_empty());

        let _ = killpg(Pid::from_raw(theirs.id() as i32), Signal::SIGKILL);
        let _ = theirs.wait();
    }
}
