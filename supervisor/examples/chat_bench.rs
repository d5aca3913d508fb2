//! Benchmark of `snowpea chat` (issue 26, docs/PERFORMANCE.md "snowpea chat"):
//!
//! 1. render cost: a 5,000-chunk answer fed to the state machine and drawn on a 100×30 test
//!    backend — the cost per 1,000 deltas of `update` alone, of a frame per delta (worst
//!    case), and of the client's real policy (a frame at most every 16 ms);
//! 2. against a real suite (scripted provider): keypress (Enter) → first delta drawn, and a
//!    5,000-chunk turn through the client's loop (net → update → draw at ≤ 60 fps) compared
//!    with the SDK alone collecting the same turn, i.e. how far the UI lags the stream.
//!
//! ```sh
//! cargo build --workspace --bins
//! SNOWPEA_BIN_DIR=$PWD/target/debug cargo run --release -p snowpea --example chat_bench
//! ```
//! (The suite's binaries may be debug builds: the client side is what is measured.)

use std::time::{Duration, Instant};

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::json;
use snowpea::chat::net::Net;
use snowpea::chat::state::{update, Block, Msg, Purpose, State, ThemeKind};
use snowpea::chat::view::{self, Cache};
use snowpea_sdk::SessionEvent;
use snowpea_testkit::suite::{Suite, SuiteOptions};
use tokio::sync::mpsc;

const CHUNKS: usize = 5_000;
const FRAME: Duration = Duration::from_millis(16);

fn chunk(i: usize) -> String {
    // Prose with some Markdown: a heading, list items and a code block now and then.
    match i % 100 {
        0 => "\n\n## Section\n\n".to_owned(),
        40 => "\n\n- item one\n- item `two`\n\n".to_owned(),
        70 => "\n\n```rust\nfn main() { let x = 1; }\n```\n\n".to_owned(),
        _ => format!("word{} ", i % 7),
    }
}

fn opened() -> State {
    let mut s = State::new("/w", None, ThemeKind::Dark, false);
    s.start(None);
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::StartupList,
            result: Ok(json!({ "sessions": [] })),
        },
    );
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Create,
            result: Ok(json!({ "sessionId": "s" })),
        },
    );
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Resume("s".into()),
            result: Ok(json!({ "events": [] })),
        },
    );
    update(&mut s, Msg::Resize(100, 30));
    s
}

fn delta(seq: u64, text: String) -> Msg {
    Msg::Event(SessionEvent {
        session_id: "s".into(),
        seq,
        kind: "message.delta".into(),
        payload: json!({ "text": text }),
        ts: String::new(),
    })
}

fn per_thousand(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0 * 1000.0 / CHUNKS as f64
}

fn render_costs() {
    // update only
    let mut s = opened();
    let t = Instant::now();
    for i in 0..CHUNKS {
        update(&mut s, delta(i as u64 + 1, chunk(i)));
    }
    let update_only = t.elapsed();
    // a frame per delta
    let mut s = opened();
    let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let mut cache = Cache::default();
    let t = Instant::now();
    for i in 0..CHUNKS {
        update(&mut s, delta(i as u64 + 1, chunk(i)));
        term.draw(|f| view::draw(f, &s, &mut cache)).unwrap();
    }
    let every = t.elapsed();
    let last_frame = {
        let t = Instant::now();
        update(&mut s, delta(CHUNKS as u64 + 1, "end".into()));
        term.draw(|f| view::draw(f, &s, &mut cache)).unwrap();
        t.elapsed()
    };
    println!("render, {CHUNKS}-chunk answer on 100x30:");
    println!(
        "  update only:           {:8.2} ms per 1,000 deltas",
        per_thousand(update_only)
    );
    println!(
        "  a frame per delta:     {:8.2} ms per 1,000 deltas (worst case)",
        per_thousand(every)
    );
    println!(
        "  one frame at the end:  {:8.2} ms (answer of {CHUNKS} chunks)",
        last_frame.as_secs_f64() * 1000.0
    );
}

/// The client's loop without a terminal: messages from [`Net`] are applied, a frame is drawn
/// at most every [`FRAME`]. Returns when `done` says so (checked after every batch).
async fn run_loop(
    s: &mut State,
    net: &Net,
    rx: &mut mpsc::UnboundedReceiver<Msg>,
    term: &mut Terminal<TestBackend>,
    cache: &mut Cache,
    frames: &mut u32,
    mut done: impl FnMut(&State) -> bool,
) {
    let mut last_draw = Instant::now() - FRAME;
    let mut dirty = false;
    loop {
        if dirty && last_draw.elapsed() >= FRAME {
            term.draw(|f| view::draw(f, s, cache)).unwrap();
            *frames += 1;
            last_draw = Instant::now();
            dirty = false;
            if done(s) {
                return;
            }
        }
        let wait = if dirty {
            FRAME.saturating_sub(last_draw.elapsed())
        } else {
            Duration::from_secs(60)
        };
        let msg = match tokio::time::timeout(wait, rx.recv()).await {
            Ok(Some(m)) => m,
            Ok(None) => panic!("net closed"),
            Err(_) => continue,
        };
        for e in update(s, msg) {
            net.run(e);
        }
        while let Ok(m) = rx.try_recv() {
            for e in update(s, m) {
                net.run(e);
            }
        }
        dirty = true;
    }
}

fn screen_has(term: &Terminal<TestBackend>, what: &str) -> bool {
    let buf = term.backend().buffer();
    let mut text = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            text.push_str(buf[(x, y)].symbol());
        }
    }
    text.contains(what)
}

fn type_and_enter(s: &mut State, net: &Net, text: &str) {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    for c in text.chars() {
        update(
            s,
            Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)),
        );
    }
    for e in update(
        s,
        Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
    ) {
        net.run(e);
    }
}

async fn live() {
    let long: String = (0..CHUNKS).map(|i| format!("w{} ", i % 10)).collect();
    let suite = Suite::start_with(SuiteOptions {
        script: Some(json!({
            "steps": [{ "match": "short", "text": "Marker reply here.", "repeat": true }],
            "default": { "text": long }
        })),
        ..Default::default()
    })
    .await;
    let client = std::sync::Arc::new(suite.client().await);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let net = Net::start(client.clone(), tx);
    let mut s = State::new(
        &suite.workdir.path().to_string_lossy(),
        Some("accept".into()),
        ThemeKind::Dark,
        false,
    );
    update(&mut s, Msg::Resize(100, 30));
    for e in s.start(None) {
        net.run(e);
    }
    let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let mut cache = Cache::default();
    let mut frames = 0;
    run_loop(
        &mut s,
        &net,
        &mut rx,
        &mut term,
        &mut cache,
        &mut frames,
        |s| s.session_id.is_some() && s.mode == "accept",
    )
    .await;

    // Keypress → first delta on screen.
    let mut samples = Vec::new();
    let answers = |s: &State| {
        s.blocks
            .iter()
            .filter(|b| matches!(b.block, Block::Assistant { .. }))
            .count()
    };
    for _ in 0..20 {
        let before = answers(&s);
        let t = Instant::now();
        type_and_enter(&mut s, &net, "short");
        // Returns after the first frame that holds the answer's first delta.
        run_loop(
            &mut s,
            &net,
            &mut rx,
            &mut term,
            &mut cache,
            &mut frames,
            |s| answers(s) > before,
        )
        .await;
        samples.push(t.elapsed());
        if s.busy() {
            run_loop(
                &mut s,
                &net,
                &mut rx,
                &mut term,
                &mut cache,
                &mut frames,
                |s| !s.busy(),
            )
            .await;
        }
    }
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("live (scripted provider, suite binaries from SNOWPEA_BIN_DIR):");
    println!(
        "  keypress -> first delta drawn: p50 {:.1} ms, max {:.1} ms (20 turns)",
        ms(samples[10]),
        ms(samples[19])
    );

    // A 5,000-chunk turn: the SDK alone, then through the client's loop.
    let sid = s.session_id.clone().unwrap();
    let other = suite.client().await;
    let own = other
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .unwrap();
    let t = Instant::now();
    let out = other
        .prompt_and_collect(&own, "long please", Duration::from_secs(300))
        .await
        .unwrap();
    let sdk_only = t.elapsed();
    let deltas = out
        .events
        .iter()
        .filter(|e| e.kind == "message.delta")
        .count();
    let frames_before = frames;
    let t = Instant::now();
    type_and_enter(&mut s, &net, "long please");
    let mut started = false;
    run_loop(
        &mut s,
        &net,
        &mut rx,
        &mut term,
        &mut cache,
        &mut frames,
        |s| {
            started |= s.busy();
            started && !s.busy()
        },
    )
    .await;
    let with_ui = t.elapsed();
    assert!(screen_has(&term, "ready"), "turn drawn as done");
    println!("  {deltas}-delta turn: SDK alone {:.0} ms; through the chat loop to the last frame {:.0} ms ({} frames); session {sid}", ms(sdk_only), ms(with_ui), frames - frames_before);
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    render_costs();
    live().await;
}
