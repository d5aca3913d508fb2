// The client against a fake gateway: handshake, calls and errors, server requests, and the
// reconnect / resume / dedup / gap-fill logic.
import { test, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import {
  connect,
  ConnectError,
  ConnectionClosedError,
  RpcError,
  TimeoutError,
  PROTOCOL_VERSION,
  type SessionEvent,
  type SnowpeaClient,
  type ConnectOptions,
} from "@snowpea/sdk";
import { FakeDaemon, until } from "./fake-daemon.js";

let daemon: FakeDaemon;
const clients: SnowpeaClient[] = [];

beforeEach(async () => {
  daemon = await FakeDaemon.start();
});

afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
  await daemon.stop();
});

async function client(extra: Partial<ConnectOptions> = {}): Promise<SnowpeaClient> {
  const c = await connect({
    port: daemon.port,
    token: daemon.token,
    clientVersion: "test",
    clientId: "unit",
    reconnect: { initialDelayMs: 10, maxDelayMs: 50 },
    ...extra,
  });
  clients.push(c);
  return c;
}

test("connect says hello with the client's versions and ids", async () => {
  const c = await client({ clientKind: "test", keepAlive: true });
  const hello = daemon.calls("system.hello")[0];
  assert.equal(hello.id, 0);
  assert.deepEqual(hello.params, {
    token: "secret",
    clientVersion: "test",
    protocolVersion: PROTOCOL_VERSION,
    clientId: "unit",
    clientKind: "test",
    keepAlive: true,
  });
  assert.equal(c.state, "connected");
  assert.equal(c.generation, 1);
  assert.equal(c.hello.serverVersion, "fake");
  assert.ok(c.hasCapability("sessions"));
  assert.deepEqual(await c.call("system.health"), { status: "ok" });
});

test("a refused hello rejects with the RpcError and leaves nothing open", async () => {
  const err = await connect({ port: daemon.port, token: "wrong", clientVersion: "t", reconnect: true }).catch((e) => e);
  assert.ok(err instanceof RpcError, String(err));
  assert.equal(err.code, -32000);
  assert.equal(err.dataCode, "unauthorized");
  assert.ok(err.is("unauthorized"));
  const major = await connect({ port: daemon.port, token: daemon.token, clientVersion: "t", protocolVersion: "2.0.0" }).catch((e) => e);
  assert.ok(major instanceof RpcError);
  assert.equal(major.dataCode, "protocol_incompatible");
  await until(() => daemon.wss.clients.size === 0);
  const before = daemon.connections;
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(daemon.connections, before, "no reconnect attempts after a failed first connect");
});

test("an unreachable daemon is a ConnectError", async () => {
  const port = daemon.port;
  await daemon.stop();
  const err = await connect({ port, token: "x", clientVersion: "t" }).catch((e) => e);
  assert.ok(err instanceof ConnectError, String(err));
  daemon = await FakeDaemon.start();
});

test("RpcError carries the numeric code, data.code and data", async () => {
  const c = await client();
  const e1 = await c.request("no.such.method", {}).catch((e) => e);
  assert.ok(e1 instanceof RpcError);
  assert.equal(e1.code, -32601);
  assert.equal(e1.dataCode, "method_not_found");
  assert.equal(e1.method, "no.such.method");
  const e2 = await c.call("session.resume", { sessionId: "nope", afterSeq: 0 }).catch((e) => e);
  assert.equal(e2.code, -32004);
  assert.deepEqual(e2.data, { code: "not_found" });
  assert.equal(e2.rpcMessage, "no such session");
});

test("a call times out with TimeoutError and a late answer is ignored", async () => {
  daemon.methods.set("slow.method", () => new Promise((r) => setTimeout(() => r({ ok: true }), 300)));
  const c = await client();
  const err = await c.request("slow.method", {}, { timeoutMs: 50 }).catch((e) => e);
  assert.ok(err instanceof TimeoutError);
  await new Promise((r) => setTimeout(r, 350));
  assert.deepEqual(await c.call("system.health"), { status: "ok" });
});

test("frames that arrive with the hello answer are not lost", async () => {
  const c = await client();
  const got: string[] = [];
  c.on("commands.changed", (p) => got.push(p.reason ?? ""));
  // On the reconnect, the daemon sends a notification in the same tick as the hello answer.
  daemon.afterHello = (ws) => ws.send(JSON.stringify({ jsonrpc: "2.0", method: "commands.changed", params: { reason: "early" } }));
  daemon.dropAll();
  await until(() => got.length === 1);
  assert.deepEqual(got, ["early"]);
  assert.equal(c.generation, 2);
});

test("server→client requests: handler result, RpcError refusal, no handler", async () => {
  const c = await client();
  c.onApprovalRequest(async (req) => ({ decision: req.tool === "shell" ? "deny" : "allow", scope: "once" }));
  const r1 = await daemon.request("approval.request", { requestId: "r1", sessionId: "s1", tool: "shell" });
  assert.deepEqual(r1.result, { decision: "deny", scope: "once" });
  c.onRequest("tool.invoke", () => {
    throw RpcError.withCode("not_found", "no such tool");
  });
  const r2 = await daemon.request("tool.invoke", { callId: "c", name: "x", sessionId: "s1", args: {} });
  assert.deepEqual(r2.error, { code: -32004, message: "no such tool", data: { code: "not_found" } });
  const r3 = await daemon.request("question.request", { requestId: "q", sessionId: "s1" });
  assert.equal(r3.error.code, -32601);
  assert.equal(r3.error.data.code, "method_not_found");
  c.onRequest("question.request", () => {
    throw new Error("boom");
  });
  const r4 = await daemon.request("question.request", { requestId: "q", sessionId: "s1" });
  assert.equal(r4.error.data.code, "internal");
});

test("notifications reach typed listeners; unsubscribe works", async () => {
  const c = await client();
  const got: string[] = [];
  const off = c.on("approval.resolved", (p) => got.push(`${p.requestId}:${p.decision}`));
  const any: string[] = [];
  c.onAny((m) => any.push(m));
  daemon.notify("approval.resolved", { requestId: "r1", decision: "allow", by: "user" });
  await until(() => got.length === 1);
  off();
  daemon.notify("approval.resolved", { requestId: "r2", decision: "deny", by: "user" });
  await until(() => any.length === 2);
  assert.deepEqual(got, ["r1:allow"]);
});

test("promptAndWait streams the turn in order; session.create tracks the session", async () => {
  const c = await client();
  const { sessionId } = await c.createSession({ workdir: "/tmp" });
  assert.deepEqual(c.trackedSessions(), [sessionId]);
  assert.equal(c.lastSeq(sessionId), 0);
  const out = await c.promptAndWait(sessionId, "hello", { timeoutMs: 5000 });
  assert.deepEqual(out.events.map((e) => e.kind), ["turn.started", "message.delta", "turn.done"]);
  assert.equal(out.reason, "complete");
  assert.equal(out.text, "Hi");
  assert.equal(c.lastSeq(sessionId), 3);
});

test("duplicate live events are delivered once", async () => {
  const c = await client();
  const { sessionId } = await c.createSession("/tmp");
  const seen: number[] = [];
  c.onSessionEvent(sessionId, (e) => seen.push(e.seq));
  daemon.duplicate = () => true;
  for (let i = 0; i < 5; i++) daemon.emit(sessionId, "message.delta", { text: `${i}` });
  await until(() => seen.length === 5);
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(seen, [1, 2, 3, 4, 5]);
});

test("a live gap is filled with session.resume, in order", async () => {
  const c = await client();
  const { sessionId } = await c.createSession("/tmp");
  const seen: number[] = [];
  c.onSessionEvent(sessionId, (e) => seen.push(e.seq));
  daemon.suppress = (e) => e.seq === 2 || e.seq === 3;
  for (let i = 0; i < 6; i++) daemon.emit(sessionId, "message.delta", { text: `${i}` });
  await until(() => seen.length === 6);
  assert.deepEqual(seen, [1, 2, 3, 4, 5, 6]);
  const fills = daemon.calls("session.resume");
  assert.equal(fills.length, 1);
  assert.deepEqual(fills[0].params, { sessionId, afterSeq: 1 });
});

test("after a drop the client reconnects, says hello, resumes tracked sessions: no gap, no duplicate", async () => {
  const c = await client();
  const states: string[] = [];
  c.onStateChange((s) => states.push(s));
  const { sessionId } = await c.createSession("/tmp");
  const other = await c.createSession("/tmp");
  const seen: SessionEvent[] = [];
  c.on("session.event", (e) => {
    if (e.sessionId === sessionId) seen.push(e);
  });
  daemon.emit(sessionId, "turn.started", { turnId: "t" });
  daemon.emit(sessionId, "message.delta", { text: "a" });
  await until(() => seen.length === 2);
  // The connection drops; events keep being stored while nobody listens.
  daemon.accepting = false;
  daemon.dropAll();
  await until(() => c.state === "reconnecting");
  const pending = c.call("system.health", undefined, { timeoutMs: 5000 });
  daemon.emit(sessionId, "message.delta", { text: "b" });
  daemon.emit(sessionId, "message.delta", { text: "c" });
  await new Promise((r) => setTimeout(r, 50));
  // Live events of the new connection overlap the replay.
  daemon.duplicate = () => true;
  daemon.accepting = true;
  await until(() => c.state === "connected");
  daemon.emit(sessionId, "turn.done", { turnId: "t", reason: "complete" });
  assert.deepEqual(await pending, { status: "ok" }, "a call made while reconnecting waits for the connection");
  await until(() => seen.some((e) => e.kind === "turn.done"));
  await new Promise((r) => setTimeout(r, 50));
  const stored = daemon.log.get(sessionId)!;
  assert.deepEqual(seen.map((e) => e.seq), stored.map((e) => e.seq));
  assert.deepEqual(seen.map((e) => e.kind), stored.map((e) => e.kind));
  assert.equal(c.generation, 2);
  assert.deepEqual(states, ["reconnecting", "connected"]);
  assert.equal(daemon.calls("system.hello").length >= 2, true);
  const resumes = daemon.calls("session.resume").map((m) => m.params);
  assert.deepEqual(
    resumes.sort((a, b) => a.sessionId.localeCompare(b.sessionId)),
    [
      { sessionId, afterSeq: 2 },
      { sessionId: other.sessionId, afterSeq: 0 },
    ].sort((a, b) => a.sessionId.localeCompare(b.sessionId)),
  );
});

test("a call in flight when the connection drops rejects with ConnectionClosedError", async () => {
  daemon.methods.set("hang", () => new Promise(() => {}));
  const c = await client();
  const p = c.request("hang", {});
  await until(() => daemon.calls("hang").length === 1);
  daemon.dropAll();
  const err = await p.catch((e) => e);
  assert.ok(err instanceof ConnectionClosedError, String(err));
  await until(() => c.state === "connected");
});

test("reconnecting gives up after maxAttempts and closes", async () => {
  const c = await client({ reconnect: { initialDelayMs: 5, maxDelayMs: 10, maxAttempts: 3 } });
  daemon.accepting = false;
  daemon.dropAll();
  await c.closed;
  assert.equal(c.state, "closed");
  const err = await c.call("system.health").catch((e) => e);
  assert.ok(err instanceof ConnectionClosedError);
});

test("reconnect: false closes the client on a drop", async () => {
  const c = await client({ reconnect: false });
  daemon.dropAll();
  await c.closed;
  assert.equal(c.state, "closed");
});

test("close() is clean and idempotent; later calls reject", async () => {
  const c = await client();
  await c.close();
  await c.close();
  assert.equal(c.state, "closed");
  await until(() => daemon.wss.clients.size === 0);
  const err = await c.call("system.health").catch((e) => e);
  assert.ok(err instanceof ConnectionClosedError);
});

test("a client resume counts as delivered and goes to the caller only", async () => {
  const c = await client();
  const { sessionId } = await c.createSession("/tmp");
  daemon.suppress = () => true;
  daemon.emit(sessionId, "message.delta", { text: "x" });
  daemon.emit(sessionId, "message.delta", { text: "y" });
  daemon.suppress = () => false;
  const seen: number[] = [];
  c.onSessionEvent(sessionId, (e) => seen.push(e.seq));
  const events = await c.resume(sessionId, 0);
  assert.deepEqual(events.map((e) => e.seq), [1, 2]);
  daemon.emit(sessionId, "message.delta", { text: "z" });
  await until(() => seen.length === 1);
  assert.deepEqual(seen, [3]);
});
