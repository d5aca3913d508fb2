//! `snowpea-bench --compare` (issue 14): the suite side by side with a peer daemon given on
//! the command line and with a Rust WebSocket echo floor, in one run, interleaved round by
//! round, printing medians and ratios:
//!
//! * cold start: spawn → first answered call, with one prober (one connection attempt
//!   retried every millisecond) and with a client knocking (a new connection attempt every
//!   2 ms, each doing the handshake and the call), each on a fresh home (the first start
//!   on a machine: every database is created); for a suite also one prober on the home of
//!   the previous start (a restart of the daemon, the usual case);
//! * the hop: p50 / p99 / p999 of the target's trivial method and calls/s, one client
//!   calling sequentially and 8 clients at once (own connections);
//! * idle memory: RSS, PSS and anonymous memory of every process of the target's tree
//!   (`/proc/PID/smaps_rollup`), per process and in total; for a suite also the tree's
//!   RSS and PSS after one 5,000-chunk turn in each of six sessions;
//! * `--baseline DIR`: a second build of the suite (its binaries in DIR) measured in the
//!   same rounds, for before/after figures of a change.
//!
//! The suite is `snowpea supervisor start --foreground` on a fresh temp home (scripted
//! provider) and its method `session.list` (gateway → svc-session). The peer is any command
//! with `{port}` in it (`--peer 'codex app-server --listen ws://127.0.0.1:{port}'`), split
//! like a shell would (no shell runs it), its method `--peer-method` (default
//! `thread/loaded/list`) after the `--peer-init` request, if any. Without `--peer` only the
//! suite and the floor are printed. The floor is this binary's own `--echo-server`
//! (tokio-tungstenite answering every request with an empty result), which can also stand
//! in as a peer to try the mode: `--peer "$(command -v snowpea-bench) --echo-server {port}"`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::{loadavg, pct};

/// Longest any single wait of the comparison may take (a start, a call, a stop).
const WAIT: Duration = Duration::from_secs(30);
/// Interval of the knocking client: a new connection attempt this often.
const KNOCK_EVERY: Duration = Duration::from_millis(2);
/// Concurrent clients of the second hop measurement.
const CLIENTS: usize = 8;
/// Sessions of the "after turns" memory measurement, one turn each.
const TURN_SESSIONS: usize = 6;
/// Content chunks the scripted provider streams in each of those turns.
const TURN_CHUNKS: usize = 5_000;

/// What `--compare` was asked to do.
pub struct Opts {
    /// Interleaved rounds (each starts every target three times).
    pub rounds: usize,
    /// Measured calls per hop measurement (after 200 warm-up calls).
    pub calls: usize,
    /// The peer command with `{port}`, if any.
    pub peer: Option<String>,
    /// The peer's trivial method.
    pub peer_method: String,
    /// The peer's params of that method.
    pub peer_params: Value,
    /// A request the peer needs on each connection first (`{"method", "params"}`).
    pub peer_init: Option<Value>,
    /// Extra environment of the suite's processes (`--suite-env K=V`, repeatable), to
    /// compare settings such as `TOKIO_WORKER_THREADS` without a rebuild.
    pub suite_env: Vec<(String, String)>,
    /// Another build of the suite to measure in the same rounds (`--baseline DIR`: the
    /// directory holding its `snowpea` and service binaries, e.g. a copy of the previous
    /// release build), printed as the column `baseline` with the ratio snowpea/baseline.
    pub baseline: Option<PathBuf>,
}

/// One daemon to measure.
#[derive(Clone)]
enum Target {
    /// The suite: the supervisor and its children from the binaries in `bin`, with this
    /// extra environment; `name` is its column.
    Suite {
        name: String,
        bin: PathBuf,
        env: Vec<(String, String)>,
    },
    /// A command with `{port}`; `method`/`params` its trivial call, `init` its handshake.
    Command {
        name: String,
        argv: Vec<String>,
        method: String,
        params: Value,
        init: Option<Value>,
    },
}

impl Target {
    fn name(&self) -> &str {
        match self {
            Target::Suite { name, .. } => name,
            Target::Command { name, .. } => name,
        }
    }
}

/// A started target.
struct Running {
    child: Child,
    port: u16,
    /// The suite's token (hello), empty for commands.
    token: String,
    home: Option<tempfile::TempDir>,
}

/// How a connection to `target` says hello and what it calls.
#[derive(Clone)]
struct Protocol {
    handshake: Option<(String, Value)>,
    method: String,
    params: Value,
}

fn protocol(target: &Target, token: &str) -> Protocol {
    match target {
        Target::Suite { .. } => Protocol {
            handshake: Some((
                "system.hello".into(),
                json!({"token": token, "clientVersion": "snowpea-bench", "protocolVersion": snowpea_sdk::PROTOCOL_VERSION}),
            )),
            method: "session.list".into(),
            params: json!({}),
        },
        Target::Command {
            method,
            params,
            init,
            ..
        } => Protocol {
            handshake: init.as_ref().map(|i| {
                (
                    i["method"].as_str().unwrap_or("initialize").to_owned(),
                    i.get("params").cloned().unwrap_or(json!({})),
                )
            }),
            method: method.clone(),
            params: params.clone(),
        },
    }
}

/// A minimal JSON-RPC client on one WebSocket (`TCP_NODELAY`, like the SDK).
struct Conn {
    ws: WebSocketStream<TcpStream>,
    next_id: u64,
}

impl Conn {
    async fn connect(port: u16) -> anyhow::Result<Conn> {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
        tcp.set_nodelay(true)?;
        let url = format!("ws://127.0.0.1:{port}/ws");
        let (ws, _) = tokio_tungstenite::client_async(url, tcp).await?;
        Ok(Conn { ws, next_id: 1 })
    }

    /// One call; Ok(result) or Err on an error answer, a close or [`WAIT`].
    async fn call(&mut self, method: &str, params: &Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.ws.send(Message::text(req.to_string())).await?;
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let frame = tokio::time::timeout_at(deadline, self.ws.next())
                .await?
                .ok_or_else(|| anyhow::anyhow!("closed"))??;
            let Message::Text(t) = frame else { continue };
            let v: Value = serde_json::from_str(&t)?;
            if v["id"] != json!(id) {
                continue;
            }
            if let Some(e) = v.get("error") {
                anyhow::bail!("{method}: {e}");
            }
            return Ok(v["result"].clone());
        }
    }

    /// Connects and does the handshake.
    async fn open(port: u16, p: &Protocol) -> anyhow::Result<Conn> {
        let mut c = Conn::connect(port).await?;
        if let Some((m, params)) = &p.handshake {
            c.call(m, params).await?;
        }
        Ok(c)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts `target` on a free port; returns at once (no readiness wait: that is measured).
fn spawn(target: &Target) -> Running {
    spawn_in(target, None)
}

/// [`spawn`] on an existing suite home (a suite target only; `None`: a fresh one).
fn spawn_in(target: &Target, home: Option<tempfile::TempDir>) -> Running {
    let port = free_port();
    match target {
        Target::Suite { bin, env, .. } => {
            let home = home.unwrap_or_else(|| tempfile::tempdir().expect("temp home"));
            let h = snowpea_common::home::Home::new(home.path());
            h.ensure_dirs().expect("home dirs");
            let token = h.ensure_token().expect("token");
            let script = home.path().join("script.json");
            let text: String = (0..TURN_CHUNKS).map(|i| format!("w{i} ")).collect();
            let steps = json!({"steps": [{"match": "stream", "repeat": true, "text": text}], "default": {"text": "ok"}});
            std::fs::write(&script, steps.to_string()).unwrap();
            let child = Command::new(bin.join("snowpea"))
                .args(["supervisor", "start", "--foreground", "--port"])
                .arg(port.to_string())
                .arg("--home")
                .arg(home.path())
                .env("SNOWPEA_PROVIDER", format!("fake:{}", script.display()))
                .env("SNOWPEA_BIN_DIR", bin)
                .env("SNOWPEA_UPDATE_INDEX_URL", "http://127.0.0.1:9/snowpea")
                .env("SNOWPEA_STOP_GRACE_MS", "2000")
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .kill_on_drop(true)
                .spawn()
                .expect("start the supervisor");
            Running {
                child,
                port,
                token,
                home: Some(home),
            }
        }
        Target::Command { argv, .. } => {
            let argv: Vec<String> = argv
                .iter()
                .map(|a| a.replace("{port}", &port.to_string()))
                .collect();
            let child = Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|e| panic!("start {:?}: {e}", argv[0]));
            Running {
                child,
                port,
                token: String::new(),
                home: None,
            }
        }
    }
}

/// SIGTERM to the target's process group, SIGKILL after [`WAIT`]; gives back its home.
async fn stop(mut r: Running) -> Option<tempfile::TempDir> {
    if let Some(pid) = r.child.id() {
        let pg = nix::unistd::Pid::from_raw(pid as i32);
        let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGTERM);
        if tokio::time::timeout(WAIT, r.child.wait()).await.is_err() {
            let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
            let _ = r.child.wait().await;
        }
        // Children of the group that outlive their parent (the supervisor reaps its own).
        let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
    }
    r.home.take()
}

/// One probe: connect, handshake, the method; true when it answered.
async fn probe(port: u16, p: &Protocol) -> bool {
    let attempt = async {
        let mut c = Conn::open(port, p).await?;
        c.call(&p.method, &p.params).await
    };
    matches!(tokio::time::timeout(WAIT, attempt).await, Ok(Ok(_)))
}

/// Cold start with one prober: retries every millisecond until the first answered call.
/// `home`: start on this existing suite home (a restart of the daemon) instead of a fresh
/// one (the first start on a machine, which also creates every database). Gives back the
/// home it ran on.
async fn cold_one(
    target: &Target,
    home: Option<tempfile::TempDir>,
) -> (Duration, Option<tempfile::TempDir>) {
    let t0 = Instant::now();
    let r = spawn_in(target, home);
    let p = protocol(target, &r.token);
    loop {
        if probe(r.port, &p).await {
            break;
        }
        assert!(
            t0.elapsed() < WAIT,
            "{} did not answer in time",
            target.name()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let el = t0.elapsed();
    (el, stop(r).await)
}

/// Cold start with a client knocking: a new probe every [`KNOCK_EVERY`], all running at
/// once, until one is answered.
async fn cold_knocking(target: &Target) -> Duration {
    let t0 = Instant::now();
    let r = spawn(target);
    let p = protocol(target, &r.token);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let done = Arc::new(AtomicBool::new(false));
    let mut tick = tokio::time::interval(KNOCK_EVERY);
    let mut probes = tokio::task::JoinSet::new();
    let el = loop {
        tokio::select! {
            Some(at) = rx.recv() => break at,
            _ = tick.tick() => {
                assert!(t0.elapsed() < WAIT, "{} did not answer in time", target.name());
                let (tx, p, done, port) = (tx.clone(), p.clone(), done.clone(), r.port);
                probes.spawn(async move {
                    if !done.load(Ordering::Relaxed) && probe(port, &p).await {
                        done.store(true, Ordering::Relaxed);
                        let _ = tx.send(t0.elapsed());
                    }
                });
            }
        }
    };
    probes.abort_all();
    stop(r).await;
    el
}

/// What one hop measurement found.
struct Hop {
    p50: f64,
    p99: f64,
    p999: f64,
    per_sec: f64,
}

/// `calls` calls of the target's method on each of `clients` connections at once (after
/// 200 warm-up calls each).
async fn hop(port: u16, p: &Protocol, clients: usize, calls: usize) -> Hop {
    let mut conns = Vec::new();
    for _ in 0..clients {
        let mut c = Conn::open(port, p).await.expect("connect");
        for _ in 0..200 {
            c.call(&p.method, &p.params).await.expect("warm-up call");
        }
        conns.push(c);
    }
    let t0 = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            let p = p.clone();
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(calls);
                for _ in 0..calls {
                    let t = Instant::now();
                    c.call(&p.method, &p.params).await.expect("call");
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.expect("client task"));
    }
    let el = t0.elapsed().as_secs_f64();
    lat.sort();
    Hop {
        p50: pct(&lat, 0.5),
        p99: pct(&lat, 0.99),
        p999: pct(&lat, 0.999),
        per_sec: lat.len() as f64 / el,
    }
}

/// RSS, PSS and anonymous memory (kB) of one process, from `/proc/PID/smaps_rollup`.
pub fn smaps(pid: i32) -> Option<(u64, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Some((field("Rss:"), field("Pss:"), field("Anonymous:")))
}

/// `root` and every process below it, with their names.
fn tree(root: i32) -> Vec<(i32, String)> {
    let mut parent: HashMap<i32, i32> = HashMap::new();
    let mut names: HashMap<i32, String> = HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …; comm may hold spaces and parentheses.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let exe = std::fs::read_link(e.path().join("exe"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| stat[stat.find('(').unwrap_or(0) + 1..close].to_owned());
        parent.insert(pid, ppid);
        names.insert(pid, exe);
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent.iter().filter(|(_, pp)| **pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out.into_iter()
        .map(|p| (p, names.get(&p).cloned().unwrap_or_default()))
        .collect()
}

/// Every figure of one round for one target.
#[derive(Default)]
struct Figures {
    values: BTreeMap<&'static str, f64>,
    /// Per process name: (RSS, PSS, anonymous) kB.
    memory: BTreeMap<String, (u64, u64, u64)>,
}

/// One round for `target`: cold start both ways, then on a third start idle memory and
/// the hop with 1 and [`CLIENTS`] clients.
async fn round(target: &Target, calls: usize) -> Figures {
    let mut f = Figures::default();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (fresh, home) = cold_one(target, None).await;
    f.values.insert("cold start, one prober (ms)", ms(fresh));
    if home.is_some() {
        let (again, _) = cold_one(target, home).await;
        f.values
            .insert("cold start, one prober, existing home (ms)", ms(again));
    }
    f.values.insert(
        "cold start, knocking every 2 ms (ms)",
        ms(cold_knocking(target).await),
    );
    let r = spawn(target);
    let p = protocol(target, &r.token);
    let t0 = Instant::now();
    while !probe(r.port, &p).await {
        assert!(
            t0.elapsed() < WAIT,
            "{} did not answer in time",
            target.name()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Idle: nothing but the probe has happened; let start-up work settle first.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let root = r.child.id().expect("pid") as i32;
    let (mut rss, mut pss) = (0, 0);
    for (pid, name) in tree(root) {
        if let Some(m) = smaps(pid) {
            rss += m.0;
            pss += m.1;
            let e = f.memory.entry(name).or_default();
            *e = (e.0 + m.0, e.1 + m.1, e.2 + m.2);
        }
    }
    f.values
        .insert("idle memory, whole tree RSS (MB)", rss as f64 / 1024.0);
    f.values
        .insert("idle memory, whole tree PSS (MB)", pss as f64 / 1024.0);
    let one = hop(r.port, &p, 1, calls).await;
    f.values.insert("hop p50, 1 client (ms)", one.p50);
    f.values.insert("hop p99, 1 client (ms)", one.p99);
    f.values.insert("hop p999, 1 client (ms)", one.p999);
    f.values.insert("calls/s, 1 client", one.per_sec);
    let many = hop(r.port, &p, CLIENTS, calls / CLIENTS.max(1)).await;
    f.values.insert("hop p50, 8 clients (ms)", many.p50);
    f.values.insert("hop p99, 8 clients (ms)", many.p99);
    f.values.insert("hop p999, 8 clients (ms)", many.p999);
    f.values.insert("calls/s, 8 clients", many.per_sec);
    if let Target::Suite { .. } = target {
        let (rss, pss) = after_turns(&r).await;
        f.values.insert(
            "memory after 6 × 5,000-chunk turns, RSS (MB)",
            rss as f64 / 1024.0,
        );
        f.values.insert(
            "memory after 6 × 5,000-chunk turns, PSS (MB)",
            pss as f64 / 1024.0,
        );
    }
    stop(r).await;
    f
}

/// Memory of the suite's tree (RSS, PSS in kB) after one [`TURN_CHUNKS`]-chunk turn in each
/// of [`TURN_SESSIONS`] new sessions (one after another, every event durable and streamed to
/// this client), one second after the last turn ended.
async fn after_turns(r: &Running) -> (u64, u64) {
    let opts = snowpea_sdk::ConnectOptions::new(r.port, r.token.clone()).with_call_timeout(WAIT);
    let client = snowpea_sdk::Client::connect(opts)
        .await
        .expect("connect for the turns");
    let workdir = tempfile::tempdir().expect("workdir");
    for _ in 0..TURN_SESSIONS {
        let sid = client
            .create_session(workdir.path(), Some("plan"))
            .await
            .expect("session.create");
        let out = client
            .prompt_and_collect(&sid, "stream please", Duration::from_secs(120))
            .await
            .expect("a streamed turn");
        assert!(
            out.events
                .iter()
                .filter(|e| e.kind == "message.delta")
                .count()
                > 0,
            "the turn streamed nothing"
        );
    }
    client.close().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let root = r.child.id().expect("pid") as i32;
    tree(root)
        .into_iter()
        .filter_map(|(pid, _)| smaps(pid))
        .fold((0, 0), |(r, p), m| (r + m.0, p + m.1))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// `--compare`: see the module documentation.
pub async fn run(opts: Opts) {
    let me = std::env::current_exe().expect("current exe");
    let mut targets = vec![Target::Suite {
        name: "snowpea".into(),
        bin: snowpea_e2e::bin_dir(),
        env: opts.suite_env.clone(),
    }];
    if let Some(dir) = &opts.baseline {
        if !dir.join("snowpea").is_file() {
            eprintln!("--baseline {}: no snowpea binary there", dir.display());
            std::process::exit(2);
        }
        targets.push(Target::Suite {
            name: "baseline".into(),
            bin: dir.clone(),
            env: opts.suite_env.clone(),
        });
    }
    if !opts.suite_env.is_empty() {
        println!("suite environment: {:?}", opts.suite_env);
    }
    if let Some(cmd) = &opts.peer {
        let argv = shlex::split(cmd).filter(|a| !a.is_empty());
        let Some(argv) = argv else {
            eprintln!("--peer: cannot split {cmd:?} into words");
            std::process::exit(2);
        };
        if which(&argv[0]).is_none() {
            println!(
                "peer {:?} is not installed: the suite's figures alone",
                argv[0]
            );
        } else {
            targets.push(Target::Command {
                name: "peer".into(),
                argv,
                method: opts.peer_method.clone(),
                params: opts.peer_params.clone(),
                init: opts.peer_init.clone(),
            });
        }
    }
    targets.push(Target::Command {
        name: "echo floor".into(),
        argv: vec![
            me.display().to_string(),
            "--echo-server".into(),
            "{port}".into(),
        ],
        method: "echo".into(),
        params: json!({}),
        init: None,
    });
    println!(
        "load average at start: {}; {} rounds, {} calls per hop measurement",
        loadavg(),
        opts.rounds,
        opts.calls
    );
    let mut all: Vec<Vec<Figures>> = targets.iter().map(|_| Vec::new()).collect();
    for i in 0..opts.rounds {
        for (k, t) in targets.iter().enumerate() {
            all[k].push(round(t, opts.calls).await);
        }
        println!("round {} done (load {})", i + 1, loadavg());
    }
    print_table(&targets, &all);
    println!("load average at end: {}", loadavg());
}

fn print_table(targets: &[Target], all: &[Vec<Figures>]) {
    let keys: Vec<&'static str> = all[0][0].values.keys().copied().collect();
    let mut header = format!("{:<46}", "measure (median of rounds)");
    for t in targets {
        header.push_str(&format!(" {:>12}", t.name()));
    }
    let peer = targets.iter().position(|t| t.name() == "peer");
    let baseline = targets.iter().position(|t| t.name() == "baseline");
    if peer.is_some() {
        header.push_str(&format!(" {:>14}", "snowpea/peer"));
    }
    if baseline.is_some() {
        header.push_str(&format!(" {:>16}", "snowpea/baseline"));
    }
    println!("{header}");
    for key in keys {
        let med: Vec<f64> = all
            .iter()
            .map(|rounds| {
                median(
                    rounds
                        .iter()
                        .filter_map(|f| f.values.get(key).copied())
                        .collect(),
                )
            })
            .collect();
        let mut line = format!("{key:<46}");
        for m in &med {
            line.push_str(&format!(" {m:>12.3}"));
        }
        if let Some(p) = peer {
            line.push_str(&format!(" {:>13.2}x", med[0] / med[p]));
        }
        if let Some(b) = baseline {
            line.push_str(&format!(" {:>15.2}x", med[0] / med[b]));
        }
        println!("{line}");
    }
    for (t, rounds) in targets.iter().zip(all) {
        println!("idle memory per process of {} (last round, kB):", t.name());
        println!(
            "  {:<28} {:>9} {:>9} {:>9}",
            "process", "RSS", "PSS", "anon"
        );
        let last = rounds.last().expect("a round");
        let mut total = (0, 0, 0);
        for (name, (r, p, a)) in &last.memory {
            println!("  {name:<28} {r:>9} {p:>9} {a:>9}");
            total = (total.0 + r, total.1 + p, total.2 + a);
        }
        println!(
            "  {:<28} {:>9} {:>9} {:>9}",
            "total", total.0, total.1, total.2
        );
    }
}

/// The path `PATH` resolves `cmd` to (or `cmd` itself when it names a file).
fn which(cmd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        return Path::new(cmd).is_file().then(|| PathBuf::from(cmd));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(cmd))
            .find(|p| p.is_file())
    })
}
