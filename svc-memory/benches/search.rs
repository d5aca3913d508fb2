//! Benchmark of svc-memory directly over its unix socket (issue 4 "Benchmark", issue 14
//! "Recall"): `memory.write` throughput and `memory.search` latency (p50/p99/max) with 10k,
//! 100k (and, run once, 1M) memories. Starts the real binary on a temp home.
//!
//! `cargo bench -p snowpea-svc-memory --bench search` (sizes overridable:
//! `-- 10000 100000 1000000`; `-- --narrow` for the worst-case 40-word vocabulary;
//! `-- --server PATH` (repeatable) to compare other builds of `snowpea-svc-memory`, for
//! example the previous commit's: the memories are written once (by the first `--server`:
//! put the oldest build first, a build refuses a database of a newer schema), then every
//! server answers the same queries on a copy of the same database, interleaved, `--rounds N`
//! times;
//! `--queries N` calls per query shape, default 500; `--writes-each` also measures the
//! write throughput of every `--server`, interleaved, each on a fresh home; `--slowest N` prints the N slowest
//! queries of each shape).
//! Results go to `docs/PERFORMANCE.md` ("svc-memory").

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use snowpea_proto::memory::v1::memory_service_client::MemoryServiceClient;
use snowpea_proto::memory::v1::{MemorySearchParams, MemoryWriteParams};

const HANGUL: &[&str] = &[
    "배포",
    "데이터베이스",
    "회의",
    "마이그레이션",
    "금요일",
    "일정",
    "서버",
    "장애",
    "백업",
    "검토",
];

/// xorshift64*: deterministic text without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Text with a natural shape: a vocabulary of 5,000 made-up words (plus Korean ones)
/// drawn with a Zipf distribution (s = 1), so a few words are everywhere and most are
/// rare, as in real notes. `narrow` uses only 40 words instead: every query word is in a
/// large share of all memories, the worst case for an index.
struct Text {
    rng: Rng,
    vocab: Vec<String>,
    cdf: Vec<f64>,
}

impl Text {
    fn new(seed: u64, narrow: bool) -> Text {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ 0xABCD);
        let size = if narrow { 40 } else { 5000 };
        let mut vocab: Vec<String> = (0..size)
            .map(|i| {
                if i % 50 == 7 {
                    return HANGUL[(i / 50) % HANGUL.len()].to_owned();
                }
                let len = 4 + (rng.next() % 6) as usize;
                (0..len)
                    .map(|_| (b'a' + (rng.next() % 26) as u8) as char)
                    .collect()
            })
            .collect();
        vocab.dedup();
        let mut acc = 0.0;
        let cdf = (0..vocab.len())
            .map(|i| {
                acc += if narrow { 1.0 } else { 1.0 / (i as f64 + 1.0) };
                acc
            })
            .collect::<Vec<_>>();
        Text {
            rng: Rng(seed),
            vocab,
            cdf,
        }
    }
    fn word(&mut self) -> &str {
        let total = *self.cdf.last().unwrap();
        let x = (self.rng.next() as f64 / u64::MAX as f64) * total;
        let i = self
            .cdf
            .partition_point(|c| *c < x)
            .min(self.vocab.len() - 1);
        &self.vocab[i]
    }
    fn sentence(&mut self, n: usize) -> String {
        let mut s: Vec<String> = (0..n).map(|_| self.word().to_owned()).collect();
        s.push(format!("item{}", self.rng.next() % 100_000));
        s.join(" ")
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// A started `snowpea-svc-memory` on `home`, SERVING.
async fn start_server(bin: &Path, home: &Path) -> (Child, tonic::transport::Channel) {
    let socket = home.join("run/memory.sock");
    let child = Command::new(bin)
        .arg("--home")
        .arg(home)
        .arg("--socket")
        .arg(&socket)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..2400 {
        if snowpea_common::client::is_serving(&socket, "", Duration::from_millis(200)).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    (child, snowpea_common::client::unix_channel(&socket))
}

fn stop(mut child: Child) {
    // SIGTERM-free stop is fine: every acknowledged write is committed.
    let _ = child.kill();
    let _ = child.wait();
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Writes `n` memories into a fresh `bin` on `home` (8 concurrent writers, each waiting for
/// its acknowledgement, which comes after the commit); returns the server and the seconds.
async fn write_all(bin: &Path, home: &Path, n: usize, narrow: bool) -> (Child, f64) {
    let (child, channel) = start_server(bin, home).await;
    let writers = 8;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let mut c = MemoryServiceClient::new(channel.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = Text::new(w as u64 + 1, narrow);
            for _ in 0..n / writers {
                let text = rng.sentence(12);
                let p = MemoryWriteParams {
                    // One writer of eight fills a project namespace (searched by the
                    // recall shape next to the global one, as svc-session does).
                    namespace: (w == 0).then(|| "project:/bench".to_owned()),
                    tags: vec![rng.word().to_owned()],
                    text,
                };
                tokio::time::timeout(Duration::from_secs(30), c.write(p))
                    .await
                    .unwrap()
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (child, start.elapsed().as_secs_f64())
}

async fn run(n: usize, narrow: bool, servers: &[PathBuf], rounds: usize, writes_each: bool) {
    let shape = if narrow {
        "40-word vocabulary"
    } else {
        "Zipf vocabulary"
    };
    if writes_each {
        // Write throughput of every build, interleaved, each on a fresh home.
        for round in 1..=rounds {
            for bin in servers {
                let scratch = tempfile::tempdir().unwrap();
                let (child, secs) = write_all(bin, scratch.path(), n, narrow).await;
                stop(child);
                println!(
                    "n={n} round {round}: {}: write {:.0} memories/s ({secs:.1} s; load {})",
                    bin.display(),
                    n as f64 / secs,
                    load()
                );
            }
        }
    }
    let home = tempfile::tempdir().unwrap();
    let (child, secs) = write_all(&servers[0], home.path(), n, narrow).await;
    println!(
        "n={n} ({shape}): write {:.0} memories/s (8 concurrent writers, {:.1} s; load {}; {})",
        n as f64 / secs,
        secs,
        load(),
        servers[0].display()
    );
    stop(child);
    // The database with its WAL (the server was killed: committed pages may be there).
    let state: Vec<(std::ffi::OsString, Vec<u8>)> = std::fs::read_dir(home.path().join("state"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    for round in 1..=rounds {
        for bin in servers {
            let copy = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(copy.path().join("state")).unwrap();
            for (name, bytes) in &state {
                std::fs::write(copy.path().join("state").join(name), bytes).unwrap();
            }
            let started = Instant::now();
            let (child, channel) = start_server(bin, copy.path()).await;
            println!(
                "n={n} round {round}: {} (serving after {:.0} ms)",
                bin.display(),
                started.elapsed().as_secs_f64() * 1000.0
            );
            searches(n, shape, narrow, channel).await;
            stop(child);
        }
    }
}

/// Calls per query shape (`--queries N`).
static QUERIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(500);

/// One client, sequential, four query shapes, [`QUERIES`] calls each; the last one is the
/// recall before a turn as svc-session makes it (`clients::memory::MemoryClient::recall`:
/// one 12-word user message searched in the project, agent and global namespaces at once,
/// merged), timed from the first call to the last answer. `--slowest N` also prints the
/// N slowest queries of each shape (where the p99 tail comes from).
async fn searches(n: usize, shape: &str, narrow: bool, channel: tonic::transport::Channel) {
    let c = MemoryServiceClient::new(channel);
    let mut rng = Text::new(42, narrow);
    for (label, kind) in [
        ("2-word query", 0),
        ("user-message query (12 words)", 1),
        ("short query (<3 chars)", 2),
        ("recall before a turn (12 words, 3 namespaces)", 3),
    ] {
        let mut lat = Vec::new();
        // Recall shape: when each namespace's answer came (from the first call).
        let mut each: [Vec<Duration>; 3] = Default::default();
        for i in 0..QUERIES.load(std::sync::atomic::Ordering::Relaxed) {
            let query = match kind {
                0 => {
                    let a = rng.word().to_owned();
                    format!("{a} {}", rng.word())
                }
                1 | 3 => rng.sentence(11),
                _ => ["회의", "일정", "배포", "서버"][i % 4].to_owned(),
            };
            let namespaces: &[Option<&str>] = if kind == 3 {
                &[Some("project:/bench"), Some("agent:bench"), None]
            } else {
                &[None]
            };
            let t = Instant::now();
            let calls = namespaces.iter().map(|ns| {
                let mut c = c.clone();
                let p = MemorySearchParams {
                    limit: 8,
                    namespace: ns.map(str::to_owned),
                    query: query.clone(),
                };
                async move {
                    tokio::time::timeout(Duration::from_secs(30), c.search(p))
                        .await
                        .unwrap()
                        .unwrap();
                    t.elapsed()
                }
            });
            for (k, d) in futures::future::join_all(calls)
                .await
                .into_iter()
                .enumerate()
            {
                each[k].push(d);
            }
            lat.push((t.elapsed(), query));
        }
        lat.sort();
        let times: Vec<Duration> = lat.iter().map(|l| l.0).collect();
        println!(
            "n={n} ({shape}): search {label}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (load {})",
            pct(&times, 0.5),
            pct(&times, 0.99),
            pct(&times, 1.0),
            load()
        );
        if kind == 3 {
            let mut line = String::from("    answered by namespace, p50 / p99:");
            for (name, e) in ["project", "agent", "global"].iter().zip(each.iter_mut()) {
                e.sort();
                line += &format!(" {name} {:.2} / {:.2} ms;", pct(e, 0.5), pct(e, 0.99));
            }
            println!("{line}");
        }
        for (d, q) in lat
            .iter()
            .rev()
            .take(SLOWEST.load(std::sync::atomic::Ordering::Relaxed))
        {
            println!("    {:.2} ms  {q}", d.as_secs_f64() * 1000.0);
        }
    }
}

/// Slowest queries printed per shape (`--slowest N`).
static SLOWEST: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let narrow = args.iter().any(|a| a == "--narrow");
    let writes_each = args.iter().any(|a| a == "--writes-each");
    let mut servers: Vec<PathBuf> = Vec::new();
    let mut rounds = 1;
    let mut sizes: Vec<usize> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--server" => servers.push(it.next().expect("--server PATH").into()),
            "--rounds" => rounds = it.next().and_then(|r| r.parse().ok()).expect("--rounds N"),
            "--slowest" => {
                let q = it.next().and_then(|r| r.parse().ok()).expect("--slowest N");
                SLOWEST.store(q, std::sync::atomic::Ordering::Relaxed);
            }
            "--queries" => {
                let q = it.next().and_then(|r| r.parse().ok()).expect("--queries N");
                QUERIES.store(q, std::sync::atomic::Ordering::Relaxed);
            }
            _ => sizes.extend(a.parse::<usize>().ok()),
        }
    }
    if servers.is_empty() {
        servers.push(env!("CARGO_BIN_EXE_snowpea-svc-memory").into());
    }
    let sizes = if sizes.is_empty() {
        vec![10_000, 100_000]
    } else {
        sizes
    };
    for n in sizes {
        run(n, narrow, &servers, rounds, writes_each).await;
    }
}
