// Drives `snowpea acp` with the official ACP client library (@agentclientprotocol/sdk, the
// stable v1 `client()` app that replaced `ClientSideConnection`), issue 33. Run by
// front/acp/tests/acp_client.rs against a real suite with the scripted provider.
//
// Env: SNOWPEA_BIN (the snowpea binary), SNOWPEA_TEST_HOME (the suite's home), WORKDIR (the
// project folder). Protocol with the Rust test on stdout/stdin: one line
// {"event":"session","sessionId":...} while the session is open, then it waits for a line
// on stdin before going on. Any failed check throws (exit code 1) with the reason.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { createInterface } from "node:readline";
import { existsSync } from "node:fs";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";

const BIN = process.env.SNOWPEA_BIN;
const HOME = process.env.SNOWPEA_TEST_HOME;
const WORKDIR = process.env.WORKDIR;
const WAIT_MS = 30_000;

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

function within(promise, what, ms = WAIT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function until(pred, what) {
  const deadline = Date.now() + WAIT_MS;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// One `snowpea acp` process with an ACP client connection to it.
function startAgent(onPermission) {
  const child = spawn(BIN, ["acp", "--home", HOME], {
    cwd: WORKDIR,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const updates = [];
  const app = acp
    .client({ name: "snowpea-acp-test" })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params, agent }) =>
      onPermission(params, agent),
    )
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params);
    });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const connection = app.connect(stream);
  return { child, updates, agent: connection.agent, connection };
}

const kinds = (updates, kind) => updates.filter((u) => u.update.sessionUpdate === kind).map((u) => u.update);
const text = (updates, kind) => kinds(updates, kind).map((u) => u.content?.text ?? "").join("");

const permissions = [];
const shellAnswers = ["allow_once", "reject_once"];
let sessionId;
const first = startAgent(async (params, agent) => {
  permissions.push(params);
  const command = params.toolCall?.rawInput?.command ?? "";
  if (command.includes("sleep")) {
    // Cancel mid-turn: the pending permission request is answered cancelled (ACP spec).
    await agent.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId });
    return { outcome: { outcome: "cancelled" } };
  }
  if (params.toolCall?.kind === "execute") {
    const optionId = shellAnswers.shift();
    check(params.options.some((o) => o.optionId === optionId && o.kind === optionId), `option ${optionId} offered`);
    return { outcome: { outcome: "selected", optionId } };
  }
  return { outcome: { outcome: "selected", optionId: "allow_once" } };
});

// initialize
const init = await within(
  first.agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
  }),
  "initialize",
);
check(init.protocolVersion === 1, `protocolVersion 1, got ${init.protocolVersion}`);
check(init.agentCapabilities?.loadSession === true, "loadSession advertised");
check(init.agentCapabilities?.promptCapabilities?.image === true, "image prompts advertised");
check(Array.isArray(init.authMethods) && init.authMethods.length === 0, "no auth methods");
check(init.agentInfo?.name === "snowpea", "agentInfo.name");

// session/new
const created = await within(
  first.agent.request(acp.methods.agent.session.new, { cwd: WORKDIR, mcpServers: [] }),
  "session/new",
);
sessionId = created.sessionId;
check(typeof sessionId === "string" && sessionId.length > 0, "a session id");
const modeIds = created.modes?.availableModes?.map((m) => m.id) ?? [];
check(["plan", "accept", "auto"].every((m) => modeIds.includes(m)), `modes plan/accept/auto, got ${modeIds}`);

// available commands
await until(() => kinds(first.updates, "available_commands_update").length > 0, "available_commands_update");
const commands = kinds(first.updates, "available_commands_update")[0].availableCommands;
check(commands.length > 0, "some commands");
check(commands.every((c) => c.name && !c.name.startsWith("/")), "command names without the slash");

// set_mode (accept: file edits run, commands ask) → current_mode_update
await within(first.agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: "accept" }), "set_mode");
await until(
  () => kinds(first.updates, "current_mode_update").some((u) => u.currentModeId === "accept"),
  "current_mode_update accept",
);
const badMode = await first.agent
  .request(acp.methods.agent.session.setMode, { sessionId, modeId: "yolo" })
  .then(() => null, (e) => e);
check(badMode && badMode.code === -32602, `an unknown mode is invalid params, got ${JSON.stringify(badMode)}`);

// The session is visible to a native client while the editor uses it.
process.stdout.write(JSON.stringify({ event: "session", sessionId }) + "\n");
const stdin = createInterface({ input: process.stdin });
await within(new Promise((resolve) => stdin.once("line", resolve)), "the native check");

// A prompt that streams message chunks, a thought and a tool call with a diff.
const p1 = await within(
  first.agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "write the file" }],
  }),
  "prompt 1",
);
check(p1.stopReason === "end_turn", `prompt 1 end_turn, got ${p1.stopReason}`);
check(text(first.updates, "agent_message_chunk").includes("Wrote a.txt."), "message chunks streamed");
check(text(first.updates, "agent_thought_chunk").includes("thinking about it"), "thought chunks streamed");
const writeCall = kinds(first.updates, "tool_call").find((c) => c.kind === "edit");
// `pending` is the schema default, which the Rust schema leaves out on the wire.
check(writeCall && (writeCall.status ?? "pending") === "pending", `a pending edit tool_call, got ${JSON.stringify(first.updates.map((u) => u.update).filter((u) => u.sessionUpdate.startsWith("tool")))}`);
check(writeCall.locations?.[0]?.path === join(WORKDIR, "a.txt"), `location ${JSON.stringify(writeCall.locations)}`);
const writeUpdates = kinds(first.updates, "tool_call_update").filter((u) => u.toolCallId === writeCall.toolCallId);
const diff = writeUpdates.flatMap((u) => u.content ?? []).find((c) => c.type === "diff");
check(diff && diff.newText === "hello acp\n" && diff.path === join(WORKDIR, "a.txt"), `a diff block, got ${JSON.stringify(writeUpdates)}`);
check(writeUpdates.at(-1).status === "completed", "the edit completed");

// Two commands: the first allowed once, the second rejected once.
const p2 = await within(
  first.agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "run twice" }],
  }),
  "prompt 2",
);
check(["end_turn", "refusal"].includes(p2.stopReason), `prompt 2 stop reason, got ${p2.stopReason}`);
const shellAsks = permissions.filter((p) => p.toolCall?.kind === "execute");
check(shellAsks.length === 2, `two permission requests for commands, got ${shellAsks.length}`);
check(existsSync(join(WORKDIR, "one.txt")), "the allowed command ran");
check(!existsSync(join(WORKDIR, "two.txt")), "the rejected command did not run");
const shellResults = kinds(first.updates, "tool_call_update").filter((u) => u.status === "failed" || u.status === "completed");
check(shellResults.some((u) => u.status === "failed"), "the rejected call failed");

// Cancel mid-turn (while its permission request is pending) → cancelled.
const p3 = await within(
  first.agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "slow one" }],
  }),
  "prompt 3",
);
check(p3.stopReason === "cancelled", `cancel → cancelled, got ${p3.stopReason}`);

// A prompt to a session this process did not open is a clear error.
const unknown = await first.agent
  .request(acp.methods.agent.session.prompt, { sessionId: "nope", prompt: [{ type: "text", text: "x" }] })
  .then(() => null, (e) => e);
check(unknown && typeof unknown.message === "string" && unknown.message.includes("not open"), `unknown session error, got ${JSON.stringify(unknown)}`);

// A daemon restart mid-session (the Rust side kills the gateway): the next prompt still works.
process.stdout.write(JSON.stringify({ event: "restart" }) + "\n");
await within(new Promise((resolve) => stdin.once("line", resolve)), "the gateway restart");
const before = text(first.updates, "agent_message_chunk").length;
const p4 = await within(
  first.agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "after restart" }],
  }),
  "prompt after the restart",
);
check(p4.stopReason === "end_turn", `prompt after restart end_turn, got ${p4.stopReason}`);
check(text(first.updates, "agent_message_chunk").slice(before).includes("ok"), "the answer after the restart streamed");

const liveToolCalls = kinds(first.updates, "tool_call").map((c) => c.toolCallId);
const liveText = text(first.updates, "agent_message_chunk");
first.connection.close();
first.child.stdin.end();
await within(new Promise((r) => first.child.once("exit", r)), "first acp exit");

// session/load in a second ACP process replays the same history.
const second = startAgent(async () => ({ outcome: { outcome: "cancelled" } }));
await within(
  second.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} }),
  "second initialize",
);
const loaded = await within(
  second.agent.request(acp.methods.agent.session.load, { sessionId, cwd: WORKDIR, mcpServers: [] }),
  "session/load",
);
check(loaded.modes?.currentModeId === "accept", `loaded mode accept, got ${JSON.stringify(loaded.modes)}`);
const replayUsers = kinds(second.updates, "user_message_chunk").map((u) => u.content.text);
check(
  ["write the file", "run twice", "slow one", "after restart"].every((t) => replayUsers.includes(t)),
  `user messages replayed, got ${JSON.stringify(replayUsers)}`,
);
const replayToolCalls = kinds(second.updates, "tool_call").map((c) => c.toolCallId);
check(JSON.stringify(replayToolCalls) === JSON.stringify(liveToolCalls), `same tool calls: live ${liveToolCalls} replay ${replayToolCalls}`);
check(text(second.updates, "agent_message_chunk") === liveText, `same agent text: live ${JSON.stringify(liveText)} replay ${JSON.stringify(text(second.updates, "agent_message_chunk"))}`);
const replayDiff = kinds(second.updates, "tool_call_update").flatMap((u) => u.content ?? []).find((c) => c.type === "diff");
check(replayDiff && replayDiff.newText === "hello acp\n", "the diff replayed");

// session/list shows it.
const listed = await within(second.agent.request(acp.methods.agent.session.list, { cwd: WORKDIR }), "session/list");
check(listed.sessions.some((s) => s.sessionId === sessionId), "session/list has the session");

second.connection.close();
second.child.stdin.end();
await within(new Promise((r) => second.child.once("exit", r)), "second acp exit");
process.stdout.write(JSON.stringify({ event: "done" }) + "\n");
process.exit(0);
