//! A real OpenSSH server for tests of the `ssh` execution backend (issue 23): Debian's
//! `openssh-server` (`/usr/sbin/sshd`) on 127.0.0.1 and a free port, with a temp host key,
//! a temp user key authorised for the current user, and a `known_hosts` file that holds the
//! host key. [`Sshd::kill`] kills the listener and every connection it serves (to test a
//! lost connection); [`Sshd::restart`] starts it again on the same port with the same keys.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::eventually_blocking;

/// The sshd binary Debian installs.
pub const SSHD: &str = "/usr/sbin/sshd";

/// A running sshd and its keys; killed on drop.
#[derive(Debug)]
pub struct Sshd {
    dir: tempfile::TempDir,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    child: Option<Child>,
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "snowpea-test", "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen runs");
    assert!(out.status.success(), "ssh-keygen: {out:?}");
}

impl Sshd {
    /// Starts sshd; `None` (after a `SKIP:` line, or a panic under
    /// `SNOWPEA_REQUIRE_TEST_DEPS`) when `openssh-server` is not installed.
    pub fn start() -> Option<Sshd> {
        if !Path::new(SSHD).exists() {
            snowpea_common::test_deps::missing(
                "sshd",
                "apt-get install openssh-server (.ci/run installs it)",
            );
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("snowpea-sshd-")
            .tempdir()
            .unwrap();
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("user_key"));
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let host_pub = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
        let mut parts = host_pub.split_whitespace();
        let (alg, key) = (parts.next().unwrap(), parts.next().unwrap());
        std::fs::write(
            d.join("known_hosts"),
            format!("[127.0.0.1]:{port} {alg} {key}\n"),
        )
        .unwrap();
        // Another key under the same name: a server the client must refuse.
        keygen(&d.join("other_key"));
        let other = std::fs::read_to_string(d.join("other_key.pub")).unwrap();
        let mut parts = other.split_whitespace();
        let (alg, key) = (parts.next().unwrap(), parts.next().unwrap());
        std::fs::write(
            d.join("wrong_known_hosts"),
            format!("[127.0.0.1]:{port} {alg} {key}\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {hk}\nPidFile none\n\
                 AuthorizedKeysFile {ak}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
                 Subsystem sftp internal-sftp\nLogLevel ERROR\nMaxStartups 100\nMaxSessions 100\n",
                hk = d.join("host_key").display(),
                ak = d.join("authorized_keys").display(),
            ),
        )
        .unwrap();
        // sshd wants its privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let mut sshd = Sshd {
            dir,
            port,
            child: None,
        };
        sshd.restart();
        Some(sshd)
    }

    /// (Re)starts the listener on the same port and keys; returns when it accepts.
    pub fn restart(&mut self) {
        let child = Command::new(SSHD)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(self.dir.path().join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sshd starts");
        self.child = Some(child);
        let port = self.port;
        eventually_blocking(Duration::from_secs(20), "sshd listening", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
    }

    /// Kills the listener and every sshd process serving its connections (SIGKILL).
    pub fn kill(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id() as i32;
        for p in descendants(pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The private key authorised for the current user.
    pub fn user_key(&self) -> PathBuf {
        self.dir.path().join("user_key")
    }

    /// A known-hosts file holding this server's host key.
    pub fn known_hosts(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }

    /// A known-hosts file holding a different key for this server's name.
    pub fn wrong_known_hosts(&self) -> PathBuf {
        self.dir.path().join("wrong_known_hosts")
    }
}

/// Every descendant pid of `pid` (from `/proc/*/stat`).
fn descendants(pid: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // The field after the `(comm)` closing paren: state, then ppid.
            if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
                if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
                    parents.push((p, ppid));
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(cur) = frontier.pop() {
        for (p, pp) in &parents {
            if *pp == cur {
                out.push(*p);
                frontier.push(*p);
            }
        }
    }
    out
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.kill();
    }
}
