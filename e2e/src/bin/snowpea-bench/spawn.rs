//! `--spawn N` (docs/PERFORMANCE.md "Subagents: spawn → first child event"): the time from
//! sending `agent.spawn` through the gateway to the parent's `subagent.update` that reports
//! the child's session, over N sequential spawns on one parent (scripted provider). Each
//! child is let finish (`subagent.done`) before the next spawn.

use std::time::{Duration, Instant};

use serde_json::json;
use snowpea_e2e::{Suite, SuiteOptions};

/// Longest wait for one event.
const WAIT: Duration = Duration::from_secs(30);

/// Runs `spawns` sequential spawns and prints p50 / p90 / max.
pub async fn bench_spawn(spawns: usize) {
    println!("load average at start: {}", super::loadavg());
    let suite = Suite::start_with(SuiteOptions {
        script: Some(json!({"steps": [], "default": {"text": "ok"}})),
        ..Default::default()
    })
    .await;
    let agents = suite.workdir.path().join(".snowpea/agents");
    std::fs::create_dir_all(&agents).expect("agents dir");
    std::fs::write(
        agents.join("x.md"),
        "---\nname: x\ndescription: bench\n---\nAnswer briefly.\n",
    )
    .expect("agent definition");
    let c = suite.client().await;
    let parent = c
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .expect("session.create");
    let mut evs = c.events(&parent);
    let mut samples = Vec::with_capacity(spawns);
    for i in 0..spawns {
        let t0 = Instant::now();
        let r = c
            .call(
                "agent.spawn",
                json!({"sessionId": parent, "name": "x", "task": format!("bench task {i}")}),
            )
            .await
            .expect("agent.spawn");
        let id = r["agentId"].as_str().expect("agentId").to_owned();
        for (kind, timed) in [("subagent.update", true), ("subagent.done", false)] {
            loop {
                let e = evs.next(WAIT).await.expect("event");
                if e.kind == kind && e.payload["agentId"] == id.as_str() {
                    if timed {
                        samples.push(t0.elapsed());
                    }
                    break;
                }
            }
        }
    }
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "spawn → first child event over {} spawns: p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        samples.len(),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() * 9 / 10]),
        ms(samples[samples.len() - 1])
    );
}
