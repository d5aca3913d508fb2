/**
 * `$SNOWPEA_HOME/daemon.json` (protocol § Transport: `{port, pid, token, startedAt,
 * protocolVersion}`), written by the gateway once it listens. Node only: the file system is
 * imported lazily so the rest of the SDK runs in a browser.
 */
import { ConnectError } from "./errors.js";

/** The contents of `daemon.json`. */
export interface DaemonInfo {
  /** TCP port the gateway listens on (127.0.0.1 only). */
  port: number;
  /** The daemon token for `system.hello`. */
  token: string;
  /** Process id of the supervisor. */
  pid?: number;
  /** UTC ISO-8601 start time. */
  startedAt?: string;
  /** Protocol version the daemon speaks. */
  protocolVersion?: string;
}

/** `$SNOWPEA_HOME`, else `~/.snowpea`. */
export async function defaultHome(): Promise<string> {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  if (env?.SNOWPEA_HOME) return env.SNOWPEA_HOME;
  const os = await import("node:os");
  const path = await import("node:path");
  return path.join(os.homedir(), ".snowpea");
}

/** Reads and parses `<home>/daemon.json` (home defaults to `$SNOWPEA_HOME`, else `~/.snowpea`). */
export async function readDaemonInfo(home?: string): Promise<DaemonInfo> {
  const dir = home ?? (await defaultHome());
  const fs = await import("node:fs/promises");
  const path = await import("node:path");
  const file = path.join(dir, "daemon.json");
  let text: string;
  try {
    text = await fs.readFile(file, "utf8");
  } catch (e) {
    throw new ConnectError(`reading ${file}: ${(e as Error).message} (is the daemon running?)`, { cause: e });
  }
  let info: unknown;
  try {
    info = JSON.parse(text);
  } catch (e) {
    throw new ConnectError(`parsing ${file}: ${(e as Error).message}`, { cause: e });
  }
  const o = info as Partial<DaemonInfo> | null;
  if (!o || typeof o.port !== "number" || typeof o.token !== "string") {
    throw new ConnectError(`${file} has no numeric port and string token`);
  }
  return o as DaemonInfo;
}
