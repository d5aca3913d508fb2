// Packaging and the standard-WebSocket transport (the path browsers and service workers take).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { WebSocket as WsWebSocket } from "ws";
import { connect, standardTransport } from "@snowpea/sdk";
import { FakeDaemon, until } from "./fake-daemon.js";
import { SDK_DIR } from "./suite.js";

test("npm pack ships dist/ with type declarations", () => {
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const out = JSON.parse(execFileSync(npm, ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: SDK_DIR, encoding: "utf8" }));
  const files = new Set<string>(out[0].files.map((f: { path: string }) => f.path));
  for (const f of ["dist/index.js", "dist/index.d.ts", "dist/client.d.ts", "dist/protocol.d.ts", "package.json", "README.md"]) {
    assert.ok(files.has(f), `${f} packed`);
  }
  assert.ok(![...files].some((f) => f.startsWith("test/") || f.startsWith("dist-test/")), "no tests packed");
});

test("the standard WebSocket transport connects, calls and reconnects", async () => {
  const daemon = await FakeDaemon.start();
  try {
    const ctor = WsWebSocket as unknown as Parameters<typeof standardTransport>[1];
    const c = await connect({
      port: daemon.port,
      token: daemon.token,
      clientVersion: "t",
      transport: (url) => standardTransport(url, ctor),
      reconnect: { initialDelayMs: 10 },
    });
    assert.deepEqual(await c.call("system.health"), { status: "ok" });
    daemon.dropAll();
    await until(() => c.generation === 2 && c.state === "connected");
    assert.deepEqual(await c.call("system.health"), { status: "ok" });
    await c.close();
    assert.equal(c.state, "closed");
  } finally {
    await daemon.stop();
  }
});
