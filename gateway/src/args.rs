//! Command line of `snowpea-gateway` and how it gets its listening socket (DESIGN.md §4):
//! either inherited from the supervisor (`--listen-fd`, so a restarted gateway keeps the
//! port with no gap) or bound here on 127.0.0.1 (`--port`, standalone use).

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

const AFTER_HELP: &str = "\
Listens on:
  ws://127.0.0.1:<port>/ws            JSON-RPC 2.0 (the Snowpea protocol)
  http://127.0.0.1:<port>/health      {\"status\":\"ok\"}
  http://127.0.0.1:<port>/version     {\"serverVersion\",\"protocolVersion\"}
  http://127.0.0.1:<port>/protocol.json  the protocol schema
  Loopback only; requests whose Host is not 127.0.0.1/localhost/[::1] get 403.
  Calls go over gRPC to DIR/run/<service>.sock; system.shutdown/restart use
  DIR/run/supervisor.sock.

Reads: DIR/token (at start), DIR/settings.json (gateway.allowedOrigins, on each
  WebSocket upgrade), DIR/daemon.json (system.info).

Logs: to stderr (the supervisor appends it to DIR/logs/gateway.log). Filter with
  SNOWPEA_LOG (default info), JSON lines with SNOWPEA_LOG_FORMAT=json.

Environment knobs: SNOWPEA_UNAVAILABLE_WAIT_MS (how long a call waits for a
  restarting service, default 5000), SNOWPEA_CALL_TIMEOUT_MS (longest forwarded
  call, default 600000), SNOWPEA_GATEWAY_QUEUE (frames queued per connection,
  default 8192), SNOWPEA_MAX_UNAUTHENTICATED (WebSockets waiting for system.hello,
  default 256), SNOWPEA_HELLO_DEADLINE_MS (time for the HTTP request and for
  system.hello, default 10000).

Exit codes: 0 after SIGTERM/SIGINT or system.shutdown; 1 start-up failure
  (home, token, socket); 2 bad arguments.";

/// `snowpea-gateway`: the Snowpea WebSocket gateway.
#[derive(Debug, Parser)]
#[command(
    name = "snowpea-gateway",
    version,
    about = "The Snowpea gateway: JSON-RPC 2.0 over WebSocket on 127.0.0.1, routed over gRPC to the services",
    after_help = AFTER_HELP
)]
pub struct Args {
    /// Snowpea home (default: $SNOWPEA_HOME, then ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,

    /// TCP port to bind on 127.0.0.1 (0 = any free port). Default 0.
    #[arg(long, value_name = "N", conflicts_with = "listen_fd")]
    pub port: Option<u16>,

    /// Serve on an already bound and listening TCP socket inherited as this file
    /// descriptor (what the supervisor passes, e.g. 3). It must be a loopback socket.
    #[arg(long, value_name = "FD")]
    pub listen_fd: Option<i32>,

    /// Services the suite runs, comma-separated; methods of other services answer
    /// `not_implemented`.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "session"
    )]
    pub services: Vec<String>,

    /// The services start together with this gateway (what the supervisor passes): for
    /// SNOWPEA_UNAVAILABLE_WAIT_MS after the start, system.hello waits for each service's
    /// first capabilities report, so early clients see the same capabilities.
    #[arg(long)]
    pub services_starting: bool,
}

impl Args {
    /// Checks what clap cannot: service names are plain words (they become socket
    /// file names).
    pub fn validate(&self) -> Result<(), String> {
        for s in &self.services {
            let ok = !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !ok || s == "system" || s == "supervisor" {
                return Err(format!("--services: {s:?} is not a service name"));
            }
        }
        if self.listen_fd.is_some_and(|fd| fd < 3) {
            return Err("--listen-fd must be 3 or higher (0–2 are stdio)".into());
        }
        Ok(())
    }

    /// The listening socket: the inherited `--listen-fd`, or a fresh bind of
    /// 127.0.0.1:`--port`. Either way it is loopback-only and non-blocking.
    pub fn listener(&self) -> anyhow::Result<TcpListener> {
        let listener = match self.listen_fd {
            Some(fd) => inherited(fd)?,
            None => {
                let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port.unwrap_or(0)));
                TcpListener::bind(addr).with_context(|| format!("bind {addr}"))?
            }
        };
        let addr = listener.local_addr().context("local address")?;
        anyhow::ensure!(
            addr.ip().is_loopback(),
            "refusing to serve on {addr}: the gateway listens on loopback only"
        );
        listener.set_nonblocking(true)?;
        Ok(listener)
    }
}

fn inherited(fd: i32) -> anyhow::Result<TcpListener> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    use nix::sys::socket::{getsockopt, sockopt};
    // SAFETY: validated below before use; the fd is ours from here on (the supervisor
    // hands it over and does not use its copy in this process). A bad fd number makes
    // fcntl fail, which we report instead of touching it further.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    fcntl(borrowed, FcntlArg::F_GETFD).with_context(|| format!("--listen-fd {fd} is not open"))?;
    let listening = getsockopt(&borrowed, sockopt::AcceptConn)
        .with_context(|| format!("--listen-fd {fd} is not a socket"))?;
    anyhow::ensure!(listening, "--listen-fd {fd} is not a listening socket");
    // Keep it out of anything we might exec.
    fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    // SAFETY: fd is open, a listening socket, and owned by nobody else in this process.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(TcpListener::from(owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("snowpea-gateway").chain(args.iter().copied()))
    }

    #[test]
    fn services_split_on_commas() {
        let a = parse(&["--home", "/h", "--services", "session,memory"]).unwrap();
        assert_eq!(a.services, ["session", "memory"]);
        assert!(a.validate().is_ok());
    }

    #[test]
    fn port_and_listen_fd_conflict() {
        assert!(parse(&["--port", "1", "--listen-fd", "3"]).is_err());
    }

    #[test]
    fn bad_service_names_are_refused() {
        for bad in ["../x", "system", "Session", ""] {
            let a = parse(&["--services", bad]).unwrap();
            assert!(a.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn stdio_fds_are_refused() {
        assert!(parse(&["--listen-fd", "1"]).unwrap().validate().is_err());
    }
}
