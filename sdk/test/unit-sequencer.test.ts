// The sequencer's rules, the same cases as the Rust SDK's sequencer_tests.rs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Sequencer, backoffDelay } from "@snowpea/sdk";

const ev = (seq: number, sessionId = "s") => ({ sessionId, seq, kind: "k", payload: {}, ts: "t" });
const seqs = (events: { seq: number }[]) => events.map((e) => e.seq);

test("duplicates are dropped", () => {
  const q = new Sequencer();
  q.track("s", 0);
  assert.deepEqual(seqs(q.onLive(ev(1)).deliver), [1]);
  assert.deepEqual(seqs(q.onLive(ev(1)).deliver), []);
  assert.deepEqual(seqs(q.onLive(ev(2)).deliver), [2]);
});

test("a gap on a tracked session is filled, then the buffer drained", () => {
  const q = new Sequencer();
  q.track("s", 0);
  q.onLive(ev(1));
  const out = q.onLive(ev(4));
  assert.deepEqual(out.deliver, []);
  assert.equal(out.fillAfter, 1);
  assert.deepEqual(q.onLive(ev(5)).deliver, []);
  assert.deepEqual(seqs(q.onFill("s", [ev(3), ev(2), ev(4)])), [2, 3, 4, 5]);
  assert.equal(q.delivered("s"), 5);
});

test("a failed fill delivers the buffer with its gap", () => {
  const q = new Sequencer();
  q.track("s", 0);
  q.onLive(ev(3));
  assert.deepEqual(seqs(q.onFill("s", undefined)), [3]);
});

test("an untracked session takes the first seq as baseline and accepts gaps", () => {
  const q = new Sequencer();
  assert.deepEqual(seqs(q.onLive(ev(7)).deliver), [7]);
  const out = q.onLive(ev(9));
  assert.deepEqual(seqs(out.deliver), [9]);
  assert.equal(out.fillAfter, undefined);
});

test("resume-all covers tracked sessions only", () => {
  const q = new Sequencer();
  q.track("a", 0);
  q.onLive(ev(1, "a"));
  q.onLive(ev(1, "b"));
  q.track("c");
  assert.deepEqual(q.beginResumeAll(), [
    ["a", 1],
    ["c", 0],
  ]);
});

test("a caller's resume counts as delivered", () => {
  const q = new Sequencer();
  assert.deepEqual(q.onCallerResume("s", 2, [ev(3), ev(4)]), []);
  assert.equal(q.delivered("s"), 4);
  assert.deepEqual(q.onLive(ev(4)).deliver, []);
  assert.deepEqual(seqs(q.onLive(ev(5)).deliver), [5]);
});

test("events buffered during a reconnect fill are delivered after it, once", () => {
  const q = new Sequencer();
  q.track("s", 0);
  q.onLive(ev(1));
  assert.deepEqual(q.beginResumeAll(), [["s", 1]]);
  // Live events of the new connection arrive before the resume answers (one overlaps it).
  assert.deepEqual(q.onLive(ev(4)).deliver, []);
  assert.deepEqual(q.onLive(ev(5)).deliver, []);
  assert.deepEqual(seqs(q.onFill("s", [ev(2), ev(3), ev(4)])), [2, 3, 4, 5]);
  assert.deepEqual(q.onLive(ev(5)).deliver, []);
});

test("backoff is jittered, exponential and capped", () => {
  const p = { initialDelayMs: 100, maxDelayMs: 1000, multiplier: 2, maxAttempts: Infinity };
  for (let i = 0; i < 50; i++) {
    const d0 = backoffDelay(p, 0);
    assert.ok(d0 >= 50 && d0 <= 100, `${d0}`);
    const d2 = backoffDelay(p, 2);
    assert.ok(d2 >= 200 && d2 <= 400, `${d2}`);
    const d10 = backoffDelay(p, 10);
    assert.ok(d10 >= 500 && d10 <= 1000, `${d10}`);
  }
});
