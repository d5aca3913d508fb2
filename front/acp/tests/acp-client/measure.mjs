// Measures `snowpea acp` (issue 33, docs/PERFORMANCE.md "ACP front end"): the ACP process's
// idle RSS after initialize + session/new, and the latency of a prompt's first
// agent_message_chunk through it next to the first message.delta on a native connection.
// Usage: node --experimental-websocket measure.mjs <snowpea binary> <home> <workdir> [rounds]
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [BIN, HOME, WORKDIR, ROUNDS = "20"] = process.argv.slice(2);
const rounds = Number(ROUNDS);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ACP side.
const child = spawn(BIN, ["acp", "--home", HOME], { cwd: WORKDIR, stdio: ["pipe", "pipe", "inherit"] });
let firstChunk = null;
const conn = acp
  .client({ name: "measure" })
  .onRequest(acp.methods.client.session.requestPermission, async () => ({ outcome: { outcome: "cancelled" } }))
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    if (params.update.sessionUpdate === "agent_message_chunk" && firstChunk === null) firstChunk = performance.now();
  })
  .connect(acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));
await conn.agent.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
const { sessionId } = await conn.agent.request(acp.methods.agent.session.new, { cwd: WORKDIR, mcpServers: [] });
await sleep(2000);
const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))[1]);
const acpMs = [];
for (let i = 0; i < rounds; i++) {
  firstChunk = null;
  const t0 = performance.now();
  await conn.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: `hi ${i}` }] });
  acpMs.push(firstChunk - t0);
}
const rssAfterKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))[1]);

// Native side: the same prompt on a plain WebSocket connection.
const daemon = JSON.parse(readFileSync(`${HOME}/daemon.json`, "utf8"));
const ws = new WebSocket(`ws://127.0.0.1:${daemon.port}/ws`);
await new Promise((r) => ws.addEventListener("open", r, { once: true }));
let nextId = 1;
const waiting = new Map();
let onDelta = null;
ws.addEventListener("message", (m) => {
  const msg = JSON.parse(m.data);
  if (msg.id && waiting.has(msg.id)) { waiting.get(msg.id)(msg); waiting.delete(msg.id); }
  if (msg.method === "session.event" && msg.params.kind === "message.delta" && onDelta) { onDelta(); onDelta = null; }
});
const call = (method, params) => new Promise((r) => { const id = nextId++; waiting.set(id, r); ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params })); });
await call("system.hello", { token: daemon.token, clientVersion: "0.1.0", protocolVersion: daemon.protocolVersion || "1.25.0" });
const created = await call("session.create", { workdir: WORKDIR });
const nativeSession = created.result.sessionId;
const nativeMs = [];
for (let i = 0; i < rounds; i++) {
  const t0 = performance.now();
  const got = new Promise((r) => { onDelta = r; });
  await call("session.prompt", { sessionId: nativeSession, text: `hi ${i}` });
  await got;
  nativeMs.push(performance.now() - t0);
  await sleep(50);
}
ws.close();
console.log(JSON.stringify({
  rounds,
  acpIdleRssMiB: +(rssKb / 1024).toFixed(1),
  acpRssAfterPromptsMiB: +(rssAfterKb / 1024).toFixed(1),
  firstChunkAcpMedianMs: +median(acpMs).toFixed(2),
  firstDeltaNativeMedianMs: +median(nativeMs).toFixed(2),
  addedMedianMs: +(median(acpMs) - median(nativeMs)).toFixed(2),
}));
conn.close();
child.stdin.end();
process.exit(0);
