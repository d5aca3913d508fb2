// Contract tests (issue 8): the REAL suite, driven only through the SDK.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { connect, RpcError, wsTransport, type SessionEvent, type SnowpeaClient } from "@snowpea/sdk";
import { SDK_DIR, Suite } from "./suite.js";

const SCRIPT = {
  steps: [
    { match: "hello", text: "Hi there, this is a streamed hello." },
    { match: "run", tool_calls: [{ name: "shell", arguments: { command: "touch ran.txt" } }] },
    { after_tool: "shell", text: "done" },
    { match: "slowclose", delaySec: 0.5, text: "an answer that arrives while the socket is closed, in several pieces" },
    { match: "slowkill", delaySec: 2, text: "an answer that arrives after the gateway came back, in several pieces" },
  ],
  default: { text: "ok" },
};

let suite: Suite;

before(() => {
  suite = Suite.start(SCRIPT);
});

after(async () => {
  await suite?.stop();
});

/** Collects a session's events from now on; resolves `done` at the turn.done of `turnId()`. */
function collect(client: SnowpeaClient, sessionId: string) {
  const events: SessionEvent[] = [];
  let turnId: string | undefined;
  let resolveDone!: (e: SessionEvent) => void;
  const done = new Promise<SessionEvent>((r) => (resolveDone = r));
  const check = (e: SessionEvent) => {
    if (e.kind === "turn.done" && e.payload.turnId === turnId) resolveDone(e);
  };
  const off = client.onSessionEvent(sessionId, (e) => {
    events.push(e);
    check(e);
  });
  return {
    events,
    setTurn(id: string) {
      turnId = id;
      events.forEach(check);
    },
    async wait(ms = 30_000): Promise<SessionEvent> {
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        return await Promise.race([
          done,
          new Promise<never>((_, rej) => {
            timer = setTimeout(() => rej(new Error(`no turn.done in ${ms} ms; got ${events.map((e) => `${e.seq}:${e.kind}`).join(" ")}\n${suite.logs()}`)), ms);
          }),
        ]);
      } finally {
        clearTimeout(timer);
        off();
      }
    },
  };
}

/** The stored log, read by a fresh client (so the compared client's own state is untouched). */
async function storedEvents(sessionId: string): Promise<SessionEvent[]> {
  const fresh = await suite.client({ reconnect: false });
  try {
    return await fresh.resume(sessionId, 0);
  } finally {
    await fresh.close();
  }
}

const brief = (es: SessionEvent[]) => es.map((e) => `${e.seq}:${e.kind}`);

test("session.create returns a non-empty sessionId the client tracks", async () => {
  const client = await suite.client();
  const { sessionId } = await client.createSession({ workdir: suite.workdir, mode: "plan" });
  assert.equal(typeof sessionId, "string");
  assert.ok(sessionId.length > 0);
  assert.ok(client.trackedSessions().includes(sessionId));
  assert.equal(client.lastSeq(sessionId), 0);
});

test("session.prompt streams message.delta, then turn.done{complete}, in order", async () => {
  const client = await suite.client();
  const { sessionId } = await client.createSession({ workdir: suite.workdir, mode: "plan" });
  const out = await client.promptAndWait(sessionId, "hello", { timeoutMs: 30_000 });
  const kinds = out.events.map((e) => e.kind);
  const firstDelta = kinds.indexOf("message.delta");
  const done = kinds.lastIndexOf("turn.done");
  assert.ok(firstDelta >= 0, `no message.delta: ${kinds}`);
  assert.equal(done, kinds.length - 1, `turn.done is last: ${kinds}`);
  assert.ok(firstDelta < done);
  assert.equal(kinds.lastIndexOf("message.delta") < done, true);
  assert.equal(out.reason, "complete");
  assert.equal(out.text, "Hi there, this is a streamed hello.");
  const seqs = out.events.map((e) => e.seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "seq order");
  assert.equal(new Set(seqs).size, seqs.length, "no duplicate");
});

test("an approval answered deny: failed tool.result, turn ends complete or denied, the tool never ran", async () => {
  const client = await suite.client();
  const requests: string[] = [];
  client.onApprovalRequest((req) => {
    requests.push(req.tool);
    return { decision: "deny", scope: "once" };
  });
  const { sessionId } = await client.createSession({ workdir: suite.workdir, mode: "accept" });
  const out = await client.promptAndWait(sessionId, "run the command", { timeoutMs: 30_000 });
  assert.deepEqual(requests, ["shell"]);
  const result = out.events.find((e) => e.kind === "tool.result");
  assert.ok(result, `tool.result: ${brief(out.events)}`);
  assert.equal(result.kind === "tool.result" && result.payload.ok, false);
  assert.ok(out.reason === "complete" || out.reason === "denied", `reason ${out.reason}`);
  assert.equal(existsSync(join(suite.workdir, "ran.txt")), false, "the tool never ran");
});

test("a socket closed mid-turn: reconnect, resume, every event exactly once", async () => {
  // The client's transport waits at a gate, so the client stays away (retrying) until the
  // whole turn is stored; everything after the drop then has to come through session.resume.
  let openGate: () => void = () => {};
  let gate: Promise<void> = Promise.resolve();
  const client = await suite.client({
    reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    transport: async (url) => {
      await gate;
      return wsTransport(url);
    },
  });
  const { sessionId } = await client.createSession({ workdir: suite.workdir, mode: "plan" });
  const c = collect(client, sessionId);
  const states: string[] = [];
  client.onStateChange((s) => states.push(s));
  const { turnId } = await client.prompt(sessionId, "slowclose");
  c.setTurn(turnId);
  gate = new Promise<void>((resolve) => (openGate = resolve));
  client.dropConnection();
  const seenAtDrop = client.lastSeq(sessionId) ?? 0;
  // Another client watches the daemon's log until the turn is over.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const stored = await storedEvents(sessionId);
    if (stored.some((e) => e.kind === "turn.done")) break;
    assert.ok(Date.now() < deadline, `turn did not finish: ${brief(stored)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(client.state, "reconnecting");
  openGate();
  const done = await c.wait();
  assert.equal(done.kind === "turn.done" && done.payload.reason, "complete");
  assert.deepEqual(states, ["reconnecting", "connected"]);
  assert.equal(client.generation, 2);
  const stored = await storedEvents(sessionId);
  assert.deepEqual(brief(c.events), brief(stored), "listener events == session.resume{afterSeq:0}");
  const missed = stored.filter((e) => e.seq > seenAtDrop);
  assert.ok(missed.some((e) => e.kind === "message.delta"), `missed while away: ${brief(missed)}`);
});

test("the gateway killed mid-turn: reconnect on the same port, resume, every event exactly once", async () => {
  const client = await suite.client({ reconnect: { initialDelayMs: 50, maxDelayMs: 500 } });
  const { sessionId } = await client.createSession({ workdir: suite.workdir, mode: "plan" });
  const c = collect(client, sessionId);
  const { turnId } = await client.prompt(sessionId, "slowkill");
  c.setTurn(turnId);
  const old = suite.kill9("gateway");
  await suite.waitRestarted("gateway", old);
  const done = await c.wait();
  assert.equal(done.kind === "turn.done" && done.payload.reason, "complete");
  assert.ok(client.generation >= 2, `reconnected (generation ${client.generation})`);
  assert.equal(suite.status()?.port, suite.port, "same port");
  const stored = await storedEvents(sessionId);
  assert.deepEqual(brief(c.events), brief(stored), "listener events == session.resume{afterSeq:0}");
});

async function rpcError(p: Promise<unknown>): Promise<RpcError> {
  const e = await p.then(
    (v) => assert.fail(`expected an RpcError, got ${JSON.stringify(v)}`),
    (e: unknown) => e,
  );
  assert.ok(e instanceof RpcError, `expected an RpcError, got ${String(e)}`);
  return e;
}

test("RpcError codes: unauthorized, invalid_params, not_found, method_not_found, not_implemented", async () => {
  const bad = await rpcError(connect({ port: suite.port, token: "not-the-token", clientVersion: "t" }));
  assert.equal(bad.dataCode, "unauthorized");
  assert.equal(bad.code, -32000);

  const client = await suite.client();
  const invalid = await rpcError(client.request("session.create", { mode: "plan" }));
  assert.equal(invalid.dataCode, "invalid_params");
  assert.equal(invalid.code, -32602);

  const missing = await rpcError(client.resume("s_does_not_exist", 0));
  assert.equal(missing.dataCode, "not_found");
  assert.equal(missing.code, -32004);

  const nomethod = await rpcError(client.request("no.such.method", {}));
  assert.equal(nomethod.dataCode, "method_not_found");
  assert.equal(nomethod.code, -32601);

  // A method the schema has but no service implements yet, taken from the published
  // declaration (docs/protocol.json `implemented`), so the probe moves as methods land.
  const protocol = JSON.parse(readFileSync(join(SDK_DIR, "..", "docs", "protocol.json"), "utf8")) as {
    methods: Record<string, { direction: string; implemented: boolean }>;
  };
  const notYet = Object.entries(protocol.methods).find(
    ([, m]) => m.direction === "clientToServer" && !m.implemented,
  );
  // Every client → server method of 1.25.0 answers now, so there may be none left to probe
  // (the gateway's not_implemented path keeps its own test in gateway/tests).
  if (!notYet) return;
  const { sessionId } = await client.createSession({ workdir: suite.workdir });
  const unimpl = await rpcError(client.request(notYet[0], { sessionId }));
  assert.equal(unimpl.dataCode, "not_implemented", notYet[0]);
  assert.equal(unimpl.code, -32000);
});

test("protocol_incompatible for a client built against another major", async () => {
  const e = await rpcError(
    connect({ port: suite.port, token: suite.token, clientVersion: "t", protocolVersion: "2.0.0" }),
  );
  assert.equal(e.dataCode, "protocol_incompatible");
  assert.equal(e.code, -32000);
});
