/**
 * {@link SnowpeaClient}: one JSON-RPC 2.0 connection to the daemon's gateway
 * (`ws://127.0.0.1:<port>/ws`), with `system.hello`, typed calls, notifications, server→client
 * request handlers, automatic reconnect and exactly-once `session.event` delivery
 * (protocol § Transport, Handshake, session.resume, session.event; behaviour of the Rust SDK).
 */
import {
  PROTOCOL_VERSION,
  WS_PATH,
  type ApprovalListResult,
  type ApprovalRequestParams,
  type ApprovalRequestResult,
  type EventMap,
  type EventName,
  type JobListResult,
  type MemorySearchParams,
  type MemorySearchResult,
  type MemoryWriteParams,
  type MemoryWriteResult,
  type Method,
  type MethodMap,
  type QuestionRequestParams,
  type QuestionRequestResult,
  type ServerMethod,
  type ServerMethodMap,
  type SessionCreateParams,
  type SessionCreateResult,
  type SessionListParams,
  type SessionListResult,
  type SessionPromptParams,
  type SessionPromptResult,
  type SessionSetModeParams,
  type SystemHealthResult,
  type SystemHelloParams,
  type SystemHelloResult,
  type SystemInfoResult,
  type ToolListResult,
  type TurnDoneEvent,
  type TypedSessionEvent,
} from "./protocol.js";
import {
  ConnectError,
  ConnectionClosedError,
  ProtocolError,
  RpcError,
  TimeoutError,
  INTERNAL,
  METHOD_NOT_FOUND,
} from "./errors.js";
import { registerTools, type HostToolSpec, type RegisteredTools, type ToolHandler } from "./host-tools.js";
import { isSeq, Sequencer } from "./sequencer.js";
import { defaultTransport, type Transport, type TransportFactory } from "./transport.js";
import { readDaemonInfo } from "./daemon.js";

/**
 * A `session.event` as listeners see it: narrowed by `kind` to its typed payload
 * (`if (e.kind === "message.delta") e.payload.text`). Kinds newer than this SDK arrive too,
 * with their payload as sent.
 */
export type SessionEvent = TypedSessionEvent;

/** Notifications by method name as listeners see them (`session.event` narrowed by kind). */
export type ClientEventMap = Omit<EventMap, "session.event"> & { "session.event": SessionEvent };

/** How to retry after the connection drops: jittered exponential backoff. */
export interface ReconnectOptions {
  /** Delay before the first retry (default 100 ms). */
  initialDelayMs?: number;
  /** Upper bound of a delay (default 5000 ms). */
  maxDelayMs?: number;
  /** Growth factor per failed attempt (default 2). */
  multiplier?: number;
  /** Give up (and close the client) after this many failed attempts in a row (default: never). */
  maxAttempts?: number;
}

/** Everything {@link connect} needs. */
export interface ConnectOptions {
  /** TCP port of the gateway (see `daemon.json`). Required unless `url` or `home` is given. */
  port?: number;
  /** The daemon token sent in `system.hello`. Required unless `home` is given. */
  token?: string;
  /** `clientVersion` sent in `system.hello`: your client's own version. */
  clientVersion: string;
  /** Host to connect to (default `127.0.0.1`). */
  host?: string;
  /** WebSocket path (default `/ws`). */
  path?: string;
  /** Full WebSocket URL; when set, `host`, `port` and `path` are ignored. */
  url?: string;
  /**
   * A `$SNOWPEA_HOME`: every connect and reconnect re-reads `<home>/daemon.json` for the port
   * and token (they change when the suite restarts), overriding `port` and `token`. Node only.
   */
  home?: string;
  /** `protocolVersion` sent in `system.hello` (default: the version these bindings were generated from). */
  protocolVersion?: string;
  /** Reconnect after an unexpected close (default `true`, with the default backoff); `false` = a drop closes the client. */
  reconnect?: boolean | ReconnectOptions;
  /** Default timeout of a call, including waiting for a reconnect (default 30 000 ms). */
  callTimeoutMs?: number;
  /** Timeout of one connect attempt: WebSocket upgrade + `system.hello` (default 10 000 ms). */
  connectTimeoutMs?: number;
  /**
   * Interval of WebSocket pings where the transport can ping (Node); a connection on which
   * nothing arrived for three intervals is dropped (and reconnected). `0` disables (default 15 000 ms).
   */
  pingIntervalMs?: number;
  /** `clientId` sent in `system.hello`: stable across restarts of this client install. */
  clientId?: string;
  /** `clientKind` sent in `system.hello`, e.g. `"tui"`, `"ide"`, `"browser"`. */
  clientKind?: string;
  /** `instanceId` sent in `system.hello`: id of this run of the client. */
  instanceId?: string;
  /** `keepAlive` sent in `system.hello` (keeps the daemon from its idle shutdown). */
  keepAlive?: boolean;
  /** How to open the WebSocket (default: `ws` under Node, else the global `WebSocket`). */
  transport?: TransportFactory;
  /** Diagnostics sink (default: silent). */
  log?: (level: "debug" | "info" | "warn" | "error", message: string, fields?: Record<string, unknown>) => void;
}

/** Per-call options. */
export interface CallOptions {
  /** Overrides {@link ConnectOptions.callTimeoutMs} for this call. */
  timeoutMs?: number;
}

/** Where the connection is. */
export type ConnectionState = "connected" | "reconnecting" | "closed";

/** The params argument of `call(method, …)`: optional when the method takes none. */
export type ParamsArgs<M extends Method> = {} extends MethodMap[M]["params"]
  ? [params?: MethodMap[M]["params"], options?: CallOptions]
  : [params: MethodMap[M]["params"], options?: CallOptions];

/** A handler of a server→client request: returns its result, or throws an {@link RpcError} to refuse. */
export type RequestHandler<M extends ServerMethod> = (
  params: ServerMethodMap[M]["params"],
) => ServerMethodMap[M]["result"] | Promise<ServerMethodMap[M]["result"]>;

/** The end of one turn, from {@link SnowpeaClient.promptAndWait}. */
export interface TurnOutcome {
  /** The turn. */
  turnId: string;
  /** `turn.done`'s reason (`complete`, `denied`, `interrupted`, …). */
  reason: TurnDoneEvent["reason"];
  /** Every event of the session from the prompt to this turn's `turn.done`, in seq order. */
  events: SessionEvent[];
  /** The turn's `message.delta` texts joined. */
  text: string;
}

/** Removes a listener or handler. */
export type Unsubscribe = () => void;

interface Pending {
  conn: Transport;
  method: string;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

interface Resolved {
  url: string;
  token: string;
}

const DEFAULTS = {
  host: "127.0.0.1",
  callTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
  pingIntervalMs: 15_000,
  reconnect: { initialDelayMs: 100, maxDelayMs: 5_000, multiplier: 2, maxAttempts: Infinity },
};

/** The jittered delay before retry number `attempt` (0-based): random in [½, 1] of the capped exponential. */
export function backoffDelay(policy: Required<ReconnectOptions>, attempt: number): number {
  const exp = Math.pow(Math.max(policy.multiplier, 1), Math.min(attempt, 64));
  const base = Math.min(policy.initialDelayMs * exp, policy.maxDelayMs);
  return base * (0.5 + Math.random() * 0.5);
}

async function resolveTarget(opts: ConnectOptions): Promise<Resolved> {
  let port = opts.port;
  let token = opts.token;
  if (opts.home !== undefined) {
    const info = await readDaemonInfo(opts.home);
    port = info.port;
    token = info.token;
  }
  if (token === undefined) throw new ConnectError("no token: pass options.token or options.home");
  if (opts.url !== undefined) return { url: opts.url, token };
  if (port === undefined) throw new ConnectError("no port: pass options.port, options.url or options.home");
  return { url: `ws://${opts.host ?? DEFAULTS.host}:${port}${opts.path ?? WS_PATH}`, token };
}

/** The id of `system.hello`, sent before any other call on a connection. */
const HELLO_ID = 0;

/** An open connection past `system.hello`, with the frames that arrived right behind its answer. */
interface Opened {
  transport: Transport;
  hello: SystemHelloResult;
  early: string[];
}

/** Opens the WebSocket and performs `system.hello`, all within `connectTimeoutMs`. */
async function open(opts: ConnectOptions): Promise<Opened> {
  const { url, token } = await resolveTarget(opts);
  const factory = opts.transport ?? defaultTransport;
  const timeoutMs = opts.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs;
  let transport: Transport | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let abandoned = false;
  const attempt = (async (): Promise<Opened> => {
    let t: Transport;
    try {
      t = await factory(url);
    } catch (e) {
      throw new ConnectError(`${url}: ${(e as Error)?.message ?? String(e)}`, { cause: e });
    }
    if (abandoned) {
      t.terminate ? t.terminate() : t.close();
      throw new ConnectError(`${url}: timed out connecting`);
    }
    transport = t;
    const params: SystemHelloParams = {
      token,
      clientVersion: opts.clientVersion,
      protocolVersion: opts.protocolVersion ?? PROTOCOL_VERSION,
    };
    if (opts.clientId !== undefined) params.clientId = opts.clientId;
    if (opts.clientKind !== undefined) params.clientKind = opts.clientKind;
    if (opts.instanceId !== undefined) params.instanceId = opts.instanceId;
    if (opts.keepAlive) params.keepAlive = true;
    return new Promise<Opened>((resolve, reject) => {
      const early: string[] = [];
      let answered = false;
      t.onClose = (code, reason) => {
        if (!answered) reject(new ConnectError(`${url}: closed during system.hello (${code}${reason ? ` ${reason}` : ""})`));
      };
      t.onMessage = (text) => {
        if (answered) {
          early.push(text); // handled once the client takes over the connection
          return;
        }
        let reply: unknown;
        try {
          reply = JSON.parse(text);
        } catch {
          return;
        }
        const r = reply as { id?: unknown; method?: unknown; error?: unknown; result?: unknown };
        if (typeof r !== "object" || r === null || r.id !== HELLO_ID || r.method !== undefined) return;
        answered = true;
        if (r.error !== undefined) {
          reject(RpcError.fromObject(r.error, "system.hello"));
        } else if (typeof r.result === "object" && r.result !== null) {
          resolve({ transport: t, hello: r.result as SystemHelloResult, early });
        } else {
          reject(new ProtocolError(`system.hello result is not an object: ${text}`));
        }
      };
      try {
        t.send(JSON.stringify({ jsonrpc: "2.0", id: HELLO_ID, method: "system.hello", params }));
      } catch (e) {
        reject(new ConnectError(`${url}: sending system.hello: ${(e as Error).message}`, { cause: e }));
      }
    });
  })();
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ConnectError(`${url}: timed out connecting`)), timeoutMs);
  });
  try {
    return await Promise.race([attempt, timeout]);
  } catch (e) {
    abandoned = true;
    attempt.catch(() => undefined);
    if (transport) {
      transport.onClose = undefined;
      transport.onMessage = undefined;
      transport.terminate ? transport.terminate() : transport.close();
    }
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Opens the WebSocket and completes `system.hello`. A refused hello rejects with an
 * {@link RpcError} (`dataCode` `"unauthorized"` or `"protocol_incompatible"`); an unreachable
 * daemon with a {@link ConnectError}. A failed first connect leaves nothing running.
 */
export async function connect(options: ConnectOptions): Promise<SnowpeaClient> {
  const opened = await open(options);
  return new SnowpeaClient(options, opened);
}

/**
 * {@link connect} with the port and token of `<home>/daemon.json`, re-read on every reconnect.
 * `home` defaults to `$SNOWPEA_HOME`, else `~/.snowpea`; `clientVersion` to `"0.0.0"`. Node only.
 */
export async function connectFromHome(options: Partial<ConnectOptions> = {}): Promise<SnowpeaClient> {
  const { defaultHome } = await import("./daemon.js");
  return connect({ clientVersion: "0.0.0", ...options, home: options.home ?? (await defaultHome()) });
}

type AnyListener = (params: any) => void;

/**
 * A connection to the Snowpea daemon. Create one with {@link connect}.
 *
 * Calls run concurrently on the one connection. While reconnecting, a call waits for the
 * connection within its timeout; a call in flight when the connection drops rejects with
 * {@link ConnectionClosedError}. `session.create`, `session.prompt`, `session.attach` and
 * `session.resume` make the client track their session: after a reconnect it calls
 * `session.resume{sessionId, afterSeq}` for each, and listeners get every `session.event`
 * once, in seq order, without gaps.
 */
export class SnowpeaClient {
  readonly #opts: ConnectOptions;
  readonly #reconnect: Required<ReconnectOptions> | undefined;
  #conn: Transport | undefined;
  #state: ConnectionState = "connected";
  #generation = 0;
  #hello: SystemHelloResult;
  #nextId = 1;
  readonly #pending = new Map<number, Pending>();
  readonly #connWaiters = new Set<() => void>();
  readonly #listeners = new Map<string, Set<AnyListener>>();
  readonly #anyListeners = new Set<(method: string, params: unknown) => void>();
  readonly #stateListeners = new Set<(state: ConnectionState) => void>();
  readonly #handlers = new Map<string, (params: any) => unknown>();
  readonly #seq = new Sequencer<SessionEvent>();
  #pingTimer: ReturnType<typeof setInterval> | undefined;
  #lastHeard = Date.now();
  #reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  #wakeReconnect: (() => void) | undefined;
  #closing = false;
  #closed: Promise<void>;
  #resolveClosed!: () => void;

  /** @internal Use {@link connect}. */
  constructor(options: ConnectOptions, opened: Opened) {
    this.#opts = options;
    const r = options.reconnect ?? true;
    this.#reconnect = r === false ? undefined : { ...DEFAULTS.reconnect, ...(r === true ? {} : r) };
    this.#hello = opened.hello;
    this.#closed = new Promise((resolve) => (this.#resolveClosed = resolve));
    this.#attach(opened);
  }

  // ---- connection state ----

  /** The result of the latest successful `system.hello` (`{protocolVersion, serverVersion, capabilities}`). */
  get hello(): SystemHelloResult {
    return this.#hello;
  }

  /** Where the connection is now. */
  get state(): ConnectionState {
    return this.#state;
  }

  /** How many connections were established (1 after connect, +1 per reconnect). */
  get generation(): number {
    return this.#generation;
  }

  /** True when the latest `system.hello` advertised `capability`. */
  hasCapability(capability: string): boolean {
    return this.#hello.capabilities?.includes(capability) ?? false;
  }

  /** Calls `cb` on every state change (`reconnecting`, `connected` after a reconnect, `closed`). */
  onStateChange(cb: (state: ConnectionState) => void): Unsubscribe {
    this.#stateListeners.add(cb);
    return () => this.#stateListeners.delete(cb);
  }

  /** Resolves once the client is closed for good. */
  get closed(): Promise<void> {
    return this.#closed;
  }

  /**
   * Drops the current connection as if the network failed (no close handshake), which starts a
   * reconnect when reconnecting is enabled. For tests and "reconnect now" buttons.
   */
  dropConnection(): void {
    const conn = this.#conn;
    if (!conn) return;
    conn.terminate ? conn.terminate() : conn.close(4000, "dropped by the client");
  }

  // ---- calls ----

  /**
   * Calls a client → server method, typed by the generated `MethodMap`. Rejects with an
   * {@link RpcError} when the daemon answers an error, {@link TimeoutError} after the timeout,
   * {@link ConnectionClosedError} when the connection drops before the answer.
   */
  async call<M extends Method>(method: M, ...args: ParamsArgs<M>): Promise<MethodMap[M]["result"]> {
    const [params, options] = args;
    return (await this.request(method, params ?? {}, options)) as MethodMap[M]["result"];
  }

  /**
   * An untyped call, for methods newer than these bindings. Same tracking and errors as
   * {@link SnowpeaClient.call}.
   */
  async request(method: string, params: unknown = {}, options: CallOptions = {}): Promise<unknown> {
    const p = (typeof params === "object" && params !== null ? params : {}) as Record<string, unknown>;
    const sessionId = typeof p.sessionId === "string" ? p.sessionId : undefined;
    if (sessionId !== undefined && (method === "session.prompt" || method === "session.attach")) {
      this.#seq.track(sessionId);
    }
    const result = await this.#request(method, params, options.timeoutMs ?? this.#callTimeout());
    const r = (typeof result === "object" && result !== null ? result : {}) as Record<string, unknown>;
    if (method === "session.create" && typeof r.sessionId === "string") {
      this.#seq.track(r.sessionId, 0);
    } else if (method === "session.resume" && sessionId !== undefined) {
      const afterSeq = isSeq(p.afterSeq) ? p.afterSeq : 0;
      const events = Array.isArray(r.events) ? (r.events as SessionEvent[]) : [];
      this.#deliver(this.#seq.onCallerResume(sessionId, afterSeq, events));
    } else if (method === "session.close" && sessionId !== undefined) {
      this.#seq.untrack(sessionId);
    }
    return result;
  }

  /** Sends a client notification (no answer), waiting for a connection like a call. */
  async notify(method: string, params: unknown = {}): Promise<void> {
    const frame = JSON.stringify({ jsonrpc: "2.0", method, params });
    await this.#whenConnected(this.#callTimeout(), (conn) => {
      conn.send(frame);
      return true;
    });
  }

  // ---- notifications and server requests ----

  /**
   * Listens to one notification method, typed by the generated `EventMap`. `session.event`s
   * arrive once each, in seq order per session, across reconnects. Returns the unsubscribe.
   */
  on<E extends EventName>(event: E, listener: (params: ClientEventMap[E]) => void): Unsubscribe;
  on(event: string, listener: (params: any) => void): Unsubscribe;
  on(event: string, listener: AnyListener): Unsubscribe {
    let set = this.#listeners.get(event);
    if (!set) this.#listeners.set(event, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /** Listens to every notification (`session.event`s sequenced as for {@link SnowpeaClient.on}). */
  onAny(listener: (method: string, params: unknown) => void): Unsubscribe {
    this.#anyListeners.add(listener);
    return () => this.#anyListeners.delete(listener);
  }

  /** Listens to the `session.event`s of one session. */
  onSessionEvent(sessionId: string, listener: (event: SessionEvent) => void): Unsubscribe {
    return this.on("session.event", (e) => {
      if (e.sessionId === sessionId) listener(e);
    });
  }

  /**
   * Answers a server→client request (`approval.request`, `question.request`, `tool.invoke`),
   * replacing any earlier handler. Requests without a handler are answered `method_not_found`;
   * a handler that throws an {@link RpcError} answers with it, any other throw with `internal`.
   */
  onRequest<M extends ServerMethod>(method: M, handler: RequestHandler<M>): Unsubscribe;
  onRequest(method: string, handler: (params: any) => unknown): Unsubscribe;
  onRequest(method: string, handler: (params: any) => unknown): Unsubscribe {
    this.#handlers.set(method, handler);
    return () => {
      if (this.#handlers.get(method) === handler) this.#handlers.delete(method);
    };
  }

  // ---- session tracking ----

  /**
   * Tracks a session: after a reconnect the client resumes it from the highest seq delivered,
   * and live gaps are filled. `afterSeq` is the seq the caller has already seen; it only applies
   * when the client knows nothing newer.
   */
  track(sessionId: string, afterSeq?: number): void {
    this.#seq.track(sessionId, afterSeq);
  }

  /** Stops tracking a session. */
  untrack(sessionId: string): void {
    this.#seq.untrack(sessionId);
  }

  /** The sessions this client tracks. */
  trackedSessions(): string[] {
    return this.#seq.tracked();
  }

  /** Highest seq of the session delivered to listeners (or returned by `session.resume`). */
  lastSeq(sessionId: string): number | undefined {
    return this.#seq.delivered(sessionId);
  }

  // ---- helpers ----

  /** `session.create`; the new session is tracked. A string is taken as the workdir. */
  async createSession(params: SessionCreateParams | string): Promise<SessionCreateResult> {
    return this.call("session.create", typeof params === "string" ? { workdir: params } : params);
  }

  /** `session.prompt`; resolves with the `turnId` once the turn started (events follow). */
  async prompt(
    sessionId: string,
    text: string,
    extra: Omit<SessionPromptParams, "sessionId" | "text"> = {},
  ): Promise<SessionPromptResult> {
    return this.call("session.prompt", { ...extra, sessionId, text });
  }

  /**
   * Prompts and collects the session's events until that turn's `turn.done` (listening from
   * before the prompt is sent), within `timeoutMs` (default 120 s) for the whole turn.
   */
  async promptAndWait(
    sessionId: string,
    text: string,
    options: { timeoutMs?: number; onEvent?: (event: SessionEvent) => void } & Omit<
      SessionPromptParams,
      "sessionId" | "text"
    > = {},
  ): Promise<TurnOutcome> {
    const { timeoutMs = 120_000, onEvent, ...extra } = options;
    const events: SessionEvent[] = [];
    let turnId: string | undefined;
    let finish: ((outcome: TurnOutcome) => void) | undefined;
    const done = new Promise<TurnOutcome>((resolve) => (finish = resolve));
    const check = (e: SessionEvent) => {
      if (turnId !== undefined && e.kind === "turn.done" && e.payload.turnId === turnId) {
        const text = events
          .map((x) => (x.kind === "message.delta" ? x.payload.text : ""))
          .join("");
        finish?.({ turnId, reason: e.payload.reason, events: [...events], text });
      }
    };
    const off = this.onSessionEvent(sessionId, (e) => {
      events.push(e);
      onEvent?.(e);
      check(e);
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      turnId = (await this.prompt(sessionId, text, extra)).turnId;
      for (const e of events) check(e);
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new TimeoutError(`turn ${turnId} did not finish within ${timeoutMs} ms`)),
          timeoutMs,
        );
      });
      return await Promise.race([done, timeout]);
    } finally {
      clearTimeout(timer);
      off();
    }
  }

  /** `session.interrupt`: stops the running turn as soon as possible. */
  async interrupt(sessionId: string): Promise<void> {
    await this.call("session.interrupt", { sessionId });
  }

  /**
   * `session.resume{sessionId, afterSeq}`: the stored events after `afterSeq`, in seq order.
   * They go to the caller only (not to listeners) and count as delivered; the session is tracked.
   */
  async resume(sessionId: string, afterSeq = 0): Promise<SessionEvent[]> {
    const result = await this.call("session.resume", { sessionId, afterSeq });
    return (result.events ?? []) as SessionEvent[];
  }

  /** `session.list`: the sessions. */
  async listSessions(params: SessionListParams = {}): Promise<NonNullable<SessionListResult["sessions"]>> {
    return (await this.call("session.list", params)).sessions ?? [];
  }

  /** `session.close`; the session is no longer tracked. */
  async closeSession(sessionId: string): Promise<void> {
    await this.call("session.close", { sessionId });
  }

  /** `session.setMode`. */
  async setMode(sessionId: string, mode: SessionSetModeParams["mode"]): Promise<void> {
    await this.call("session.setMode", { sessionId, mode });
  }

  /** Answers `approval.request`s (see {@link SnowpeaClient.onRequest}). */
  onApprovalRequest(
    handler: (request: ApprovalRequestParams) => ApprovalRequestResult | Promise<ApprovalRequestResult>,
  ): Unsubscribe {
    return this.onRequest("approval.request", handler);
  }

  /** Answers `question.request`s (see {@link SnowpeaClient.onRequest}). */
  onQuestionRequest(
    handler: (request: QuestionRequestParams) => QuestionRequestResult | Promise<QuestionRequestResult>,
  ): Unsubscribe {
    return this.onRequest("question.request", handler);
  }

  /** `approval.list`: approvals still waiting for a decision. */
  async listApprovals(sessionId?: string): Promise<NonNullable<ApprovalListResult["requests"]>> {
    return (await this.call("approval.list", sessionId === undefined ? {} : { sessionId })).requests ?? [];
  }

  /** `approval.respond`: answers a pending approval (from the unattended queue). */
  async respondApproval(
    requestId: string,
    decision: "allow" | "deny",
    extra: { scope?: ApprovalRequestResult["scope"]; reason?: string } = {},
  ): Promise<void> {
    await this.call("approval.respond", { ...extra, requestId, decision });
  }

  /**
   * Lends the agent host tools: `tool.register`, then answers every `tool.invoke` with
   * `handler`, sends `tool.progress` from `call.progress()` and aborts `call.signal` on
   * `tool.cancel` (see `host-tools.ts`).
   */
  async registerTools(tools: HostToolSpec[], handler: ToolHandler): Promise<RegisteredTools> {
    return registerTools(this, tools, handler);
  }

  /** `tool.list`: the tools registered for a session (or the global set). */
  async listTools(sessionId?: string): Promise<NonNullable<ToolListResult["tools"]>> {
    return (await this.call("tool.list", sessionId === undefined ? {} : { sessionId })).tools ?? [];
  }

  /** `system.info`. */
  async systemInfo(): Promise<SystemInfoResult> {
    return this.call("system.info");
  }

  /** `system.health`. */
  async health(): Promise<SystemHealthResult> {
    return this.call("system.health");
  }

  /** `memory.search`. */
  async searchMemory(params: MemorySearchParams): Promise<MemorySearchResult> {
    return this.call("memory.search", params);
  }

  /** `memory.write`. */
  async writeMemory(params: MemoryWriteParams): Promise<MemoryWriteResult> {
    return this.call("memory.write", params);
  }

  /** `job.list`: scheduled jobs. */
  async listJobs(): Promise<NonNullable<JobListResult["jobs"]>> {
    return (await this.call("job.list")).jobs ?? [];
  }

  /**
   * Closes the connection (WebSocket close handshake, bounded by the connect timeout) and stops
   * reconnecting. Waiting and later calls reject with {@link ConnectionClosedError}. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#state === "closed") return;
    this.#closing = true;
    clearTimeout(this.#reconnectTimer);
    this.#wakeReconnect?.();
    const conn = this.#conn;
    if (conn) {
      const grace = setTimeout(() => (conn.terminate ? conn.terminate() : this.#finish()), this.#connectTimeout());
      try {
        conn.close(1000, "client closed");
      } catch {
        this.#finish();
      }
      await this.#closed;
      clearTimeout(grace);
    } else {
      this.#finish();
    }
  }

  // ---- internals ----

  #callTimeout(): number {
    return this.#opts.callTimeoutMs ?? DEFAULTS.callTimeoutMs;
  }

  #connectTimeout(): number {
    return this.#opts.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs;
  }

  #log(level: "debug" | "info" | "warn" | "error", message: string, fields?: Record<string, unknown>): void {
    this.#opts.log?.(level, message, fields);
  }

  #setState(state: ConnectionState): void {
    if (this.#state === state) return;
    this.#state = state;
    for (const cb of [...this.#stateListeners]) {
      try {
        cb(state);
      } catch (e) {
        this.#log("error", "state listener threw", { error: String(e) });
      }
    }
  }

  /** Takes over an opened connection: handlers, ping, then the frames that came with the hello. */
  #attach(opened: Opened): void {
    const conn = opened.transport;
    this.#conn = conn;
    this.#generation += 1;
    this.#hello = opened.hello;
    this.#lastHeard = Date.now();
    conn.onMessage = (text) => this.#onText(conn, text);
    conn.onTraffic = () => (this.#lastHeard = Date.now());
    conn.onClose = (code, reason) => this.#onClose(conn, code, reason);
    const every = this.#opts.pingIntervalMs ?? DEFAULTS.pingIntervalMs;
    if (conn.ping && every > 0) {
      this.#pingTimer = setInterval(() => {
        if (Date.now() - this.#lastHeard > every * 3) {
          this.#log("warn", "no traffic for three ping intervals; dropping the connection");
          this.dropConnection();
          return;
        }
        try {
          conn.ping?.();
        } catch {
          /* the close event follows */
        }
      }, every);
    }
    for (const text of opened.early) this.#onText(conn, text);
  }

  #onClose(conn: Transport, code: number, reason: string): void {
    if (conn !== this.#conn) return;
    this.#conn = undefined;
    clearInterval(this.#pingTimer);
    this.#pingTimer = undefined;
    this.#seq.resetFills();
    for (const [id, p] of this.#pending) {
      if (p.conn !== conn) continue;
      this.#pending.delete(id);
      p.reject(new ConnectionClosedError(`${p.method}: connection to the daemon closed`));
    }
    if (this.#closing || !this.#reconnect) {
      this.#finish();
      return;
    }
    this.#log("warn", "connection to the daemon lost", { code, reason });
    this.#setState("reconnecting");
    void this.#reconnectLoop(this.#reconnect);
  }

  async #reconnectLoop(policy: Required<ReconnectOptions>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      if (attempt >= policy.maxAttempts) {
        this.#log("warn", "giving up reconnecting", { attempts: attempt });
        this.#finish();
        return;
      }
      await new Promise<void>((resolve) => {
        this.#wakeReconnect = resolve;
        this.#reconnectTimer = setTimeout(resolve, backoffDelay(policy, attempt));
      });
      this.#wakeReconnect = undefined;
      if (this.#closing) {
        this.#finish();
        return;
      }
      let opened: Opened;
      try {
        opened = await open(this.#opts);
      } catch (e) {
        this.#log("debug", "reconnect attempt failed", { attempt, error: String(e) });
        continue;
      }
      if (this.#closing) {
        opened.transport.onClose = undefined;
        opened.transport.close(1000, "client closed");
        this.#finish();
        return;
      }
      // Mark every tracked session as filling before any live event of the new connection.
      const fills = this.#seq.beginResumeAll();
      this.#attach(opened);
      this.#log("info", "reconnected to the daemon", { generation: this.#generation });
      this.#setState("connected");
      this.#wakeWaiters();
      const conn = opened.transport;
      for (const [sessionId, afterSeq] of fills) this.#fill(conn, sessionId, afterSeq);
      return;
    }
  }

  /** Closes for good: no more calls; waiting ones reject. */
  #finish(): void {
    if (this.#state === "closed") return;
    clearTimeout(this.#reconnectTimer);
    clearInterval(this.#pingTimer);
    this.#pingTimer = undefined;
    const conn = this.#conn;
    this.#conn = undefined;
    if (conn) {
      conn.onClose = undefined;
      conn.onMessage = undefined;
      try {
        conn.terminate ? conn.terminate() : conn.close();
      } catch {
        /* already gone */
      }
    }
    for (const [id, p] of this.#pending) {
      this.#pending.delete(id);
      p.reject(new ConnectionClosedError(`${p.method}: client closed`));
    }
    this.#setState("closed");
    this.#wakeWaiters();
    this.#resolveClosed();
  }

  #wakeWaiters(): void {
    const waiters = [...this.#connWaiters];
    this.#connWaiters.clear();
    for (const w of waiters) w();
  }

  /**
   * Runs `attempt` on the live connection within `timeoutMs`, waiting for a (re)connect first.
   * `attempt` returns false (or throws) when the connection turned out to be gone: it is retried
   * on the next one.
   */
  #whenConnected(timeoutMs: number, attempt: (conn: Transport) => boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let waiter: (() => void) | undefined;
      const timer = setTimeout(() => {
        if (waiter) this.#connWaiters.delete(waiter);
        reject(new TimeoutError(`timed out after ${timeoutMs} ms waiting for the daemon`));
      }, timeoutMs);
      const tryNow = () => {
        waiter = undefined;
        if (this.#state === "closed") {
          clearTimeout(timer);
          reject(new ConnectionClosedError("client closed"));
          return;
        }
        const conn = this.#conn;
        if (this.#state === "connected" && conn) {
          let ok = false;
          try {
            ok = attempt(conn);
          } catch {
            ok = false;
          }
          if (ok) {
            clearTimeout(timer);
            resolve();
            return;
          }
        }
        waiter = tryNow;
        this.#connWaiters.add(waiter);
      };
      tryNow();
    });
  }

  /** Sends a request and waits for its answer, waiting for a connection first; all within `timeoutMs`. */
  #request(method: string, params: unknown, timeoutMs: number): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => {
      let id: number | undefined;
      let settled = false;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (id !== undefined) this.#pending.delete(id);
        fn();
      };
      const timer = setTimeout(
        () => settle(() => reject(new TimeoutError(`${method}: no answer within ${timeoutMs} ms`))),
        timeoutMs,
      );
      this.#whenConnected(timeoutMs + 1_000, (conn) => {
        if (settled) return true;
        const callId = this.#nextId++;
        this.#pending.set(callId, {
          conn,
          method,
          resolve: (v) => settle(() => resolve(v)),
          reject: (e) => settle(() => reject(e)),
        });
        try {
          conn.send(JSON.stringify({ jsonrpc: "2.0", id: callId, method, params }));
        } catch {
          this.#pending.delete(callId);
          return false;
        }
        id = callId;
        return true;
      }).catch((e: Error) => settle(() => reject(e)));
    });
  }

  /** A `session.resume` the client makes itself (gap or reconnect) on one connection. */
  #fill(conn: Transport, sessionId: string, afterSeq: number): void {
    const id = this.#nextId++;
    const timer = setTimeout(() => {
      if (!this.#pending.delete(id)) return;
      this.#log("warn", "session.resume timed out", { sessionId });
      this.#deliver(this.#seq.onFill(sessionId, undefined));
    }, this.#callTimeout());
    this.#pending.set(id, {
      conn,
      method: "session.resume",
      resolve: (result) => {
        clearTimeout(timer);
        const events = (result as { events?: unknown } | null)?.events;
        this.#deliver(this.#seq.onFill(sessionId, Array.isArray(events) ? (events as SessionEvent[]) : []));
      },
      reject: (error) => {
        clearTimeout(timer);
        // A dropped connection resets the fill; the next connection resumes again.
        if (error instanceof ConnectionClosedError) return;
        this.#log("warn", "session.resume failed", { sessionId, error: String(error) });
        if (error instanceof RpcError && error.dataCode === "not_found") this.#seq.untrack(sessionId);
        this.#deliver(this.#seq.onFill(sessionId, undefined));
      },
    });
    try {
      conn.send(JSON.stringify({ jsonrpc: "2.0", id, method: "session.resume", params: { sessionId, afterSeq } }));
    } catch {
      clearTimeout(timer);
      this.#pending.delete(id); // the close event follows and resets the fill
    }
  }

  #onText(conn: Transport, text: string): void {
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      this.#log("warn", "ignoring an unparsable frame from the daemon");
      return;
    }
    if (Array.isArray(message)) {
      for (const m of message) this.#onMessage(conn, m);
    } else {
      this.#onMessage(conn, message);
    }
  }

  #onMessage(conn: Transport, message: unknown): void {
    if (typeof message !== "object" || message === null) return;
    const m = message as { id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: unknown };
    const hasId = m.id !== undefined && m.id !== null;
    if (typeof m.method === "string") {
      if (hasId) this.#answerRequest(conn, m.method, m.id, m.params);
      else this.#onNotification(m.method, m.params);
      return;
    }
    if (!hasId || typeof m.id !== "number") return;
    const pending = this.#pending.get(m.id);
    if (!pending) return; // timed out, or not ours
    this.#pending.delete(m.id);
    if (m.error !== undefined) pending.reject(RpcError.fromObject(m.error, pending.method));
    else if ("result" in m) pending.resolve(m.result);
    else pending.reject(new ProtocolError(`${pending.method}: response without result or error`));
  }

  #onNotification(method: string, params: unknown): void {
    if (method !== "session.event") {
      this.#emit(method, params);
      return;
    }
    const e = params as Partial<SessionEvent> | null;
    if (!e || typeof e.sessionId !== "string" || !isSeq(e.seq)) {
      this.#log("warn", "session.event without sessionId or seq; delivered unsequenced");
      this.#emit(method, params);
      return;
    }
    const outcome = this.#seq.onLive(e as SessionEvent);
    this.#deliver(outcome.deliver);
    if (outcome.fillAfter !== undefined && this.#conn) this.#fill(this.#conn, e.sessionId, outcome.fillAfter);
  }

  #deliver(events: SessionEvent[]): void {
    for (const e of events) this.#emit("session.event", e);
  }

  #emit(method: string, params: unknown): void {
    const set = this.#listeners.get(method);
    if (set) {
      for (const listener of [...set]) {
        try {
          listener(params);
        } catch (e) {
          this.#log("error", "listener threw", { method, error: String(e) });
        }
      }
    }
    for (const listener of [...this.#anyListeners]) {
      try {
        listener(method, params);
      } catch (e) {
        this.#log("error", "listener threw", { method, error: String(e) });
      }
    }
  }

  #answerRequest(conn: Transport, method: string, id: unknown, params: unknown): void {
    const handler = this.#handlers.get(method);
    const reply = (body: { result: unknown } | { error: unknown }) => {
      if (conn !== this.#conn) return; // the daemon sees "connection gone"
      try {
        conn.send(JSON.stringify({ jsonrpc: "2.0", id, ...body }));
      } catch {
        /* connection gone */
      }
    };
    if (!handler) {
      reply({
        error: { code: METHOD_NOT_FOUND, message: `no handler for ${method}`, data: { code: "method_not_found" } },
      });
      return;
    }
    void (async () => {
      try {
        const result = await handler(params);
        reply({ result: result ?? {} });
      } catch (e) {
        if (e instanceof RpcError) {
          reply({ error: e.toObject() });
        } else {
          this.#log("error", "request handler threw", { method, error: String(e) });
          reply({
            error: {
              code: INTERNAL,
              message: `client request handler failed: ${(e as Error)?.message ?? String(e)}`,
              data: { code: "internal" },
            },
          });
        }
      }
    })();
  }
}
