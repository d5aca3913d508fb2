// The README's example is examples/quickstart.ts verbatim, and it runs against the real suite.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SDK_DIR, Suite } from "./suite.js";

const readme = readFileSync(join(SDK_DIR, "README.md"), "utf8");
const example = readFileSync(join(SDK_DIR, "examples", "quickstart.ts"), "utf8");

test("the README's first ts code block is examples/quickstart.ts", () => {
  const block = /```ts\n([\s\S]*?)```/.exec(readme);
  assert.ok(block, "README has a ```ts block");
  assert.equal(block[1], example);
  const lines = example.split("\n").filter((l) => l.trim() !== "");
  assert.ok(lines.length <= 10, `ten lines at most (${lines.length})`);
});

let suite: Suite | undefined;
after(async () => {
  await suite?.stop();
});

test("the quickstart example runs against the suite", async () => {
  suite = Suite.start({ steps: [{ match: "what does this repo do", text: "It grows snowpeas." }], default: { text: "ok" } });
  const r = spawnSync(process.execPath, [join(SDK_DIR, "dist-test", "examples", "quickstart.js")], {
    cwd: suite.workdir,
    env: { ...process.env, SNOWPEA_HOME: suite.home },
    encoding: "utf8",
    timeout: 60_000,
  });
  assert.equal(r.status, 0, `exit ${r.status}\n${r.stdout}\n${r.stderr}\n${suite.logs()}`);
  assert.equal(r.stdout, "It grows snowpeas.\n[turn complete]\n");
});
