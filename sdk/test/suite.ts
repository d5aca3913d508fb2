// Contract-test harness: starts the REAL suite (`snowpea supervisor start --home <tmp>`) with
// the scripted provider, reads daemon.json, and stops everything afterwards (supervisor stop,
// then SIGKILL of any pid `supervisor status --json` still reported).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { connect, type ConnectOptions, type SnowpeaClient } from "@snowpea/sdk";

/** The sdk/ directory (this file runs from sdk/dist-test/test/). */
export const SDK_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Where the suite's binaries are: `$SNOWPEA_BIN_DIR`, else `$CARGO_TARGET_DIR/debug`, else `<repo>/target/debug`. */
export function binDir(): string {
  const target = process.env.CARGO_TARGET_DIR ?? resolve(SDK_DIR, "..", "target");
  return process.env.SNOWPEA_BIN_DIR ?? resolve(target, "debug");
}

export interface ProcessStatus {
  name: string;
  pid: number;
  state: string;
  restarts: number;
}

export class Suite {
  readonly home: string;
  readonly workdir: string;
  port = 0;
  token = "";
  readonly env: NodeJS.ProcessEnv;
  private readonly clients: SnowpeaClient[] = [];
  private stopped = false;

  private constructor(script: unknown) {
    this.home = mkdtempSync(join(tmpdir(), "snowpea-sdk-home-"));
    this.workdir = mkdtempSync(join(tmpdir(), "snowpea-sdk-work-"));
    const scriptPath = join(this.home, "script.json");
    writeFileSync(scriptPath, JSON.stringify(script, null, 2));
    this.env = {
      ...process.env,
      SNOWPEA_PROVIDER: `fake:${scriptPath}`,
      SNOWPEA_BIN_DIR: binDir(),
      SNOWPEA_STOP_GRACE_MS: "2000",
    };
  }

  /** Starts a suite on a temp home with this provider script. */
  static start(script: unknown): Suite {
    const s = new Suite(script);
    const out = s.snowpea(["supervisor", "start"]);
    if (out.status !== 0) {
      s.cleanup();
      throw new Error(`supervisor start failed (${out.status}): ${out.stdout}\n${out.stderr}`);
    }
    const daemon = JSON.parse(readFileSync(join(s.home, "daemon.json"), "utf8"));
    s.port = daemon.port;
    s.token = daemon.token;
    return s;
  }

  /** Runs `snowpea <args> --home <home>` with the suite's environment. */
  snowpea(args: string[]): { status: number | null; stdout: string; stderr: string } {
    const r = spawnSync(join(binDir(), "snowpea"), [...args, "--home", this.home], {
      env: this.env,
      encoding: "utf8",
      timeout: 30_000,
    });
    return { status: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? String(r.error ?? "") };
  }

  /** `snowpea supervisor status --json` (null when nothing answers). */
  status(): { pid?: number; port?: number; processes?: ProcessStatus[] } | null {
    const out = this.snowpea(["supervisor", "status", "--json"]);
    try {
      return JSON.parse(out.stdout);
    } catch {
      return null;
    }
  }

  /** One supervised process's status. */
  process(name: string): ProcessStatus | undefined {
    return this.status()?.processes?.find((p) => p.name === name);
  }

  /** SIGKILLs one supervised process; returns its pid. */
  kill9(name: string): number {
    const p = this.process(name);
    if (!p || !(p.pid > 0)) throw new Error(`${name} has no pid: ${JSON.stringify(this.status())}`);
    process.kill(p.pid, "SIGKILL");
    return p.pid;
  }

  /** Waits until `name` runs again under a new pid. */
  async waitRestarted(name: string, oldPid: number, ms = 20_000): Promise<number> {
    const start = Date.now();
    for (;;) {
      const p = this.process(name);
      if (p && p.pid > 0 && p.pid !== oldPid && p.state === "running") return p.pid;
      if (Date.now() - start > ms) throw new Error(`${name} not restarted: ${JSON.stringify(this.status())}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** A connected client (closed by stop()). */
  async client(extra: Partial<ConnectOptions> = {}): Promise<SnowpeaClient> {
    const c = await connect({
      port: this.port,
      token: this.token,
      clientVersion: "sdk-contract-test",
      clientKind: "test",
      ...extra,
    });
    this.clients.push(c);
    return c;
  }

  /** Closes the clients, stops the suite, kills leftovers, removes the temp dirs. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.clients.map((c) => c.close().catch(() => undefined)));
    const st = this.status();
    const pids = [...(st?.processes ?? []).map((p) => p.pid), st?.pid].filter((p): p is number => typeof p === "number" && p > 0);
    const out = this.snowpea(["supervisor", "stop"]);
    if (out.status !== 0) console.error(`supervisor stop: ${out.status} ${out.stderr}`);
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
    this.cleanup();
  }

  /** The gateway's and session service's logs (for failure messages). */
  logs(): string {
    return ["gateway", "session", "supervisor"]
      .map((n) => join(this.home, "logs", `${n}.log`))
      .filter((f) => existsSync(f))
      .map((f) => `--- ${f}\n${readFileSync(f, "utf8").split("\n").slice(-40).join("\n")}`)
      .join("\n");
  }

  private cleanup(): void {
    if (process.env.SNOWPEA_KEEP_HOME) return;
    rmSync(this.home, { recursive: true, force: true });
    rmSync(this.workdir, { recursive: true, force: true });
  }
}
