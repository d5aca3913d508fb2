// A fake gateway for the unit tests: JSON-RPC over `ws`, system.hello with token and major
// checks, a per-session event log with session.resume, and hooks to drop connections, skip or
// duplicate live events, and send server→client requests.
import { WebSocketServer, WebSocket } from "ws";
import type { AddressInfo } from "node:net";

export interface StoredEvent {
  sessionId: string;
  seq: number;
  kind: string;
  payload: Record<string, unknown>;
  ts: string;
}

type Handler = (params: any, ws: WebSocket) => unknown | Promise<unknown>;

export class RpcFailure {
  constructor(
    readonly code: number,
    readonly message: string,
    readonly data?: unknown,
  ) {}
}

export class FakeDaemon {
  readonly token = "secret";
  readonly wss: WebSocketServer;
  port = 0;
  /** Every frame clients sent, parsed. */
  readonly received: any[] = [];
  readonly log = new Map<string, StoredEvent[]>();
  readonly methods = new Map<string, Handler>();
  readonly authed = new Set<WebSocket>();
  /** Live events are not broadcast while this returns true (they are still stored). */
  suppress: (e: StoredEvent) => boolean = () => false;
  /** Live events for which this returns true are broadcast twice. */
  duplicate: (e: StoredEvent) => boolean = () => false;
  /** Sent right after the hello answer, in the same tick. */
  afterHello: (ws: WebSocket) => void = () => {};
  /** When false, connections are accepted and then closed right away. */
  accepting = true;
  connections = 0;
  private nextSession = 1;
  private nextRequest = 1;
  private readonly waiting = new Map<number, (reply: any) => void>();

  private constructor(wss: WebSocketServer) {
    this.wss = wss;
    this.methods.set("system.health", () => ({ status: "ok" }));
    this.methods.set("session.create", () => {
      const sessionId = `s${this.nextSession++}`;
      this.log.set(sessionId, []);
      return { sessionId };
    });
    this.methods.set("session.resume", (p) => {
      const events = this.log.get(p.sessionId);
      if (!events) throw new RpcFailure(-32004, "no such session", { code: "not_found" });
      return { sessionId: p.sessionId, events: events.filter((e) => e.seq > (p.afterSeq ?? 0)) };
    });
    this.methods.set("session.prompt", (p) => {
      if (!this.log.has(p.sessionId)) throw new RpcFailure(-32004, "no such session", { code: "not_found" });
      const turnId = `t${Math.random().toString(36).slice(2, 8)}`;
      setTimeout(() => {
        this.emit(p.sessionId, "turn.started", { turnId, prompt: p.text });
        this.emit(p.sessionId, "message.delta", { text: "Hi" });
        this.emit(p.sessionId, "turn.done", { turnId, reason: "complete" });
      }, 5);
      return { turnId };
    });
  }

  static async start(): Promise<FakeDaemon> {
    const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, path: "/ws" });
    await new Promise<void>((resolve) => wss.once("listening", () => resolve()));
    const d = new FakeDaemon(wss);
    d.port = (wss.address() as AddressInfo).port;
    wss.on("connection", (ws) => d.onConnection(ws));
    return d;
  }

  private onConnection(ws: WebSocket): void {
    this.connections++;
    if (!this.accepting) {
      ws.terminate();
      return;
    }
    ws.on("message", (data) => void this.onFrame(ws, JSON.parse(data.toString())));
    ws.on("close", () => this.authed.delete(ws));
  }

  private async onFrame(ws: WebSocket, msg: any): Promise<void> {
    this.received.push(msg);
    if (msg.method === undefined) {
      this.waiting.get(msg.id)?.(msg);
      this.waiting.delete(msg.id);
      return;
    }
    const reply = (body: object) => {
      if (msg.id !== undefined && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ jsonrpc: "2.0", id: msg.id, ...body }));
    };
    if (msg.method === "system.hello") {
      const p = msg.params;
      if (p.token !== this.token) return reply({ error: { code: -32000, message: "bad token", data: { code: "unauthorized" } } });
      if (String(p.protocolVersion).split(".")[0] !== "1")
        return reply({ error: { code: -32000, message: "major mismatch", data: { code: "protocol_incompatible" } } });
      this.authed.add(ws);
      reply({ result: { protocolVersion: "1.25.0", serverVersion: "fake", capabilities: ["sessions"] } });
      this.afterHello(ws);
      return;
    }
    if (!this.authed.has(ws)) return reply({ error: { code: -32000, message: "hello first", data: { code: "unauthorized" } } });
    const handler = this.methods.get(msg.method);
    if (!handler) return reply({ error: { code: -32601, message: `no method ${msg.method}`, data: { code: "method_not_found" } } });
    try {
      reply({ result: await handler(msg.params, ws) });
    } catch (e) {
      if (e instanceof RpcFailure) reply({ error: { code: e.code, message: e.message, data: e.data } });
      else reply({ error: { code: -32603, message: String(e), data: { code: "internal" } } });
    }
  }

  /** Stores an event and broadcasts it to every authenticated connection. */
  emit(sessionId: string, kind: string, payload: Record<string, unknown> = {}): StoredEvent {
    const log = this.log.get(sessionId) ?? [];
    this.log.set(sessionId, log);
    const e: StoredEvent = { sessionId, seq: log.length + 1, kind, payload: { kind, ...payload }, ts: new Date().toISOString() };
    log.push(e);
    if (!this.suppress(e)) {
      const frame = JSON.stringify({ jsonrpc: "2.0", method: "session.event", params: e });
      for (const ws of this.authed) {
        ws.send(frame);
        if (this.duplicate(e)) ws.send(frame);
      }
    }
    return e;
  }

  /** Sends a notification to every authenticated connection. */
  notify(method: string, params: unknown): void {
    for (const ws of this.authed) ws.send(JSON.stringify({ jsonrpc: "2.0", method, params }));
  }

  /** Sends a server→client request to the first authenticated connection; resolves with the reply frame. */
  request(method: string, params: unknown): Promise<any> {
    const ws = [...this.authed][0];
    if (!ws) throw new Error("no client");
    const id = this.nextRequest++ + 1000;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }

  /** Drops every connection without a close handshake. */
  dropAll(): void {
    for (const ws of this.wss.clients) ws.terminate();
  }

  /** Requests the client sent for `method`. */
  calls(method: string): any[] {
    return this.received.filter((m) => m.method === method);
  }

  async stop(): Promise<void> {
    this.dropAll();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}

export async function until<T>(f: () => T | undefined | false, ms = 5000): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() - start > ms) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}
