/**
 * Host tools (protocol `tool.register`, `tool.invoke`, `tool.progress`, `tool.cancel`): a
 * client lends the agent its own tools.
 *
 * {@link registerTools} registers the tools (all-or-nothing), answers every `tool.invoke` with
 * the handler's result, lets the handler report progress (`call.progress(text)`, which also
 * restarts the call's silence deadline; an empty text is a keepalive), and aborts the call's
 * `call.signal` when the daemon sends `tool.cancel` for it (a timeout or an interrupt). After
 * a reconnect the tools are registered again, since the daemon drops a closed connection's
 * tools.
 *
 * ```ts
 * await client.registerTools(
 *   [{ name: "page_read", description: "Read the open tab.", permission: "read" }],
 *   async (call) => {
 *     await call.progress("reading");
 *     return { ok: true, output: `text of tab ${call.args.tab}` };
 *   },
 * );
 * ```
 */
import type {
  ToolInvokeParams,
  ToolInvokeResult,
  ToolRegisterParams,
  ToolCancelNotification,
} from "./protocol.js";
import { RpcError } from "./errors.js";

/** One host tool as `tool.register` takes it. */
export type HostToolSpec = ToolRegisterParams["tools"][number];

/** One running call, as the handler sees it. */
export interface ToolCall {
  /** `tool.invoke.callId`. */
  readonly callId: string;
  /** The tool called. */
  readonly name: string;
  /** The session whose turn called it. */
  readonly sessionId: string;
  /** The model's arguments. */
  readonly args: Record<string, unknown>;
  /** Every `tool.invoke` param as sent (`turnId`, `mode`, `workdir`, `origin`, `userTurn`, `job`, `guard`, …). */
  readonly params: ToolInvokeParams;
  /** Aborted when the daemon sends `tool.cancel` for this call. */
  readonly signal: AbortSignal;
  /** Sends `tool.progress{callId, message}` (re-emitted as the `tool.progress` event; restarts the deadline). */
  progress(message?: string): Promise<void>;
}

/** The handler of every call of the registered tools. */
export type ToolHandler = (call: ToolCall) => ToolInvokeResult | Promise<ToolInvokeResult>;

/** What {@link registerTools} needs of a client (a `SnowpeaClient` has all of it). */
export interface HostToolsClient {
  request(method: string, params?: unknown): Promise<unknown>;
  notify(method: string, params?: unknown): Promise<void>;
  onRequest(method: "tool.invoke", handler: (params: ToolInvokeParams) => unknown): () => void;
  on(event: "tool.cancel", listener: (params: ToolCancelNotification) => void): () => void;
  onStateChange(cb: (state: "connected" | "reconnecting" | "closed") => void): () => void;
}

/** Registered host tools: their names, and `dispose()` to stop answering (the daemon keeps them until `tool.unregister` or the connection closes). */
export interface RegisteredTools {
  readonly registered: string[];
  dispose(): void;
}

/** Registers `tools` and answers their calls with `handler` (module doc). */
export async function registerTools(
  client: HostToolsClient,
  tools: HostToolSpec[],
  handler: ToolHandler,
): Promise<RegisteredTools> {
  const running = new Map<string, AbortController>();
  const offInvoke = client.onRequest("tool.invoke", async (params: ToolInvokeParams) => {
    const abort = new AbortController();
    running.set(params.callId, abort);
    const call: ToolCall = {
      callId: params.callId,
      name: params.name,
      sessionId: params.sessionId,
      args: params.args ?? {},
      params,
      signal: abort.signal,
      progress: (message = "") => client.notify("tool.progress", { callId: params.callId, message }),
    };
    try {
      const cancelled = new Promise<never>((_, reject) =>
        abort.signal.addEventListener("abort", () =>
          reject(new RpcError(-32000, "the call was cancelled (tool.cancel)", { code: "cancelled" })),
        ),
      );
      return await Promise.race([Promise.resolve().then(() => handler(call)), cancelled]);
    } finally {
      running.delete(params.callId);
    }
  });
  const offCancel = client.on("tool.cancel", (p) => running.get(p.callId)?.abort());
  const params = { tools };
  const result = (await client.request("tool.register", params)) as { registered?: string[] };
  let wasConnected = true;
  const offState = client.onStateChange((state) => {
    if (state === "connected" && !wasConnected) {
      // A new connection: the daemon dropped the old one's tools.
      client.request("tool.register", params).catch(() => undefined);
    }
    wasConnected = state === "connected";
  });
  return {
    registered: result.registered ?? [],
    dispose() {
      offInvoke();
      offCancel();
      offState();
      for (const a of running.values()) a.abort();
    },
  };
}
