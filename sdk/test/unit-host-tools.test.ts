// Contract of registerTools (issue 21): registers the tools, answers tool.invoke with the
// handler's result, sends tool.progress, honours tool.cancel, registers again after a reconnect.
import { test, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { connect, type SnowpeaClient } from "@snowpea/sdk";
import { FakeDaemon, until } from "./fake-daemon.js";

let daemon: FakeDaemon;
let client: SnowpeaClient;

beforeEach(async () => {
  daemon = await FakeDaemon.start();
  daemon.methods.set("tool.register", (p: any) => ({ registered: p.tools.map((t: any) => t.name) }));
  client = await connect({
    port: daemon.port,
    token: daemon.token,
    clientVersion: "test",
    reconnect: { initialDelayMs: 10, maxDelayMs: 50 },
  });
});

afterEach(async () => {
  await client.close();
  await daemon.stop();
});

test("registerTools registers, answers tool.invoke and sends progress", async () => {
  const reg = await client.registerTools(
    [
      { name: "page_read", description: "Read the tab.", permission: "read", parallel: "safe", timeoutMs: 5000 },
      { name: "zebra", description: "Deferred.", permission: "send", deferred: true },
    ],
    async (call) => {
      await call.progress("working");
      return {
        ok: true,
        output: `${call.name} got ${String(call.args.tab)} in ${call.params.mode}`,
        meta: { pages: 1 },
        content: [{ type: "image", data: "iVBORw0KGgo=", mediaType: "image/png" }],
      };
    },
  );
  assert.deepEqual(reg.registered, ["page_read", "zebra"]);
  assert.equal(daemon.calls("tool.register")[0].params.tools[0].parallel, "safe");
  const reply = await daemon.request("tool.invoke", {
    callId: "c1",
    name: "page_read",
    sessionId: "s1",
    mode: "plan",
    args: { tab: 3 },
  });
  assert.deepEqual(reply.result, {
    ok: true,
    output: "page_read got 3 in plan",
    meta: { pages: 1 },
    content: [{ type: "image", data: "iVBORw0KGgo=", mediaType: "image/png" }],
  });
  const progress = daemon.calls("tool.progress");
  assert.deepEqual(progress[0].params, { callId: "c1", message: "working" });
  assert.equal(progress[0].id, undefined, "tool.progress is a notification");
});

test("tool.cancel aborts the call's signal and the call is answered cancelled", async () => {
  let started!: () => void;
  const running = new Promise<void>((r) => (started = r));
  let aborted = false;
  await client.registerTools([{ name: "slow", description: "Never ends.", permission: "read" }], (call) => {
    started();
    return new Promise((resolve) =>
      call.signal.addEventListener("abort", () => {
        aborted = true;
        resolve({ ok: false, error: "stopped" });
      }),
    );
  });
  const reply = daemon.request("tool.invoke", { callId: "c9", name: "slow", sessionId: "s1" });
  await running;
  daemon.notify("tool.cancel", { sessionId: "s1", callId: "c9" });
  const frame = await reply;
  assert.equal(frame.error.data.code, "cancelled");
  assert.ok(aborted);
});

test("tools are registered again after a reconnect; dispose stops answering", async () => {
  const reg = await client.registerTools([{ name: "t", description: "A tool.", permission: "read" }], () => ({
    ok: true,
    output: "x",
  }));
  daemon.dropAll();
  await until(() => daemon.calls("tool.register").length === 2);
  assert.deepEqual(daemon.calls("tool.register")[1].params, daemon.calls("tool.register")[0].params);
  reg.dispose();
  await until(() => client.state === "connected");
  const frame = await daemon.request("tool.invoke", { callId: "c2", name: "t", sessionId: "s1" });
  assert.equal(frame.error.data.code, "method_not_found");
});
