// Makes sure the suite's binaries exist before the contract tests run: with SNOWPEA_BIN_DIR
// set, they must be there; otherwise, when ../target/debug/snowpea is absent, builds them with
// `cargo build --workspace --bins` from the repository root.
import { existsSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const sdk = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const root = resolve(sdk, "..");
const needed = ["snowpea", "snowpea-gateway", "snowpea-svc-session"];

if (process.env.SNOWPEA_BIN_DIR) {
  const missing = needed.filter((b) => !existsSync(join(process.env.SNOWPEA_BIN_DIR, b)));
  if (missing.length > 0) {
    console.error(`SNOWPEA_BIN_DIR=${process.env.SNOWPEA_BIN_DIR} lacks ${missing.join(", ")}`);
    process.exit(1);
  }
} else if (!existsSync(join(process.env.CARGO_TARGET_DIR ?? join(root, "target"), "debug", "snowpea"))) {
  console.error("building the suite: cargo build --workspace --bins");
  const r = spawnSync("cargo", ["build", "--workspace", "--bins"], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) {
    console.error(`cargo build failed (${r.error?.message ?? `exit ${r.status}`})`);
    process.exit(1);
  }
}
