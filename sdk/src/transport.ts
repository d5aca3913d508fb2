/**
 * The WebSocket underneath the client, abstracted so the SDK runs in Node (the `ws` package)
 * and wherever a standard `WebSocket` global exists (browsers, service workers, Deno, Node 22+).
 * Tests and exotic hosts can pass their own {@link TransportFactory}.
 */

/** One open text-frame connection. */
export interface Transport {
  /** Sends one text frame; throws when the connection is no longer open. */
  send(text: string): void;
  /** Starts the close handshake (or drops the connection when `code` is omitted and it cannot). */
  close(code?: number, reason?: string): void;
  /** Drops the connection at once, without a close handshake (falls back to `close`). */
  terminate?(): void;
  /** Sends a ping, for transports that can; a pong counts as traffic (see `onTraffic`). */
  ping?(): void;
  /** Called with each text frame. */
  onMessage: ((text: string) => void) | undefined;
  /** Called once when the connection has closed, for whatever reason. */
  onClose: ((code: number, reason: string) => void) | undefined;
  /** Called on any inbound traffic, pongs included. */
  onTraffic: (() => void) | undefined;
}

/** Opens a connection to `url`; rejects when it cannot be opened. */
export type TransportFactory = (url: string) => Promise<Transport>;

/** The parts of the standard WebSocket API the SDK uses. */
interface StandardWebSocket {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (event: any) => void): void;
}
type StandardWebSocketCtor = new (url: string) => StandardWebSocket;

function isNode(): boolean {
  const p = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return typeof p?.versions?.node === "string";
}

/**
 * The default transport: the `ws` package under Node, otherwise the global `WebSocket`.
 */
export const defaultTransport: TransportFactory = async (url) => {
  if (isNode()) return wsTransport(url);
  const ctor = (globalThis as { WebSocket?: StandardWebSocketCtor }).WebSocket;
  if (!ctor) throw new Error("no WebSocket implementation available; pass options.transport");
  return standardTransport(url, ctor);
};

/** A transport over the `ws` package (Node). */
export async function wsTransport(url: string): Promise<Transport> {
  const { WebSocket } = await import("ws");
  return new Promise<Transport>((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: 10_000 });
    let opened = false;
    const t: Transport = {
      send(text) {
        if (ws.readyState !== WebSocket.OPEN) throw new Error("WebSocket is not open");
        ws.send(text);
      },
      close(code, reason) {
        try {
          ws.close(code ?? 1000, reason);
        } catch {
          ws.terminate();
        }
      },
      terminate() {
        ws.terminate();
      },
      ping() {
        if (ws.readyState === WebSocket.OPEN) ws.ping();
      },
      onMessage: undefined,
      onClose: undefined,
      onTraffic: undefined,
    };
    ws.on("open", () => {
      opened = true;
      resolve(t);
    });
    ws.on("message", (data, isBinary) => {
      t.onTraffic?.();
      if (isBinary) return;
      const text = Array.isArray(data)
        ? Buffer.concat(data).toString("utf8")
        : Buffer.isBuffer(data)
          ? data.toString("utf8")
          : Buffer.from(data as ArrayBuffer).toString("utf8");
      t.onMessage?.(text);
    });
    ws.on("pong", () => t.onTraffic?.());
    ws.on("ping", () => t.onTraffic?.());
    ws.on("error", (err) => {
      if (!opened) reject(err);
      // After open, "close" follows every error.
    });
    ws.on("close", (code, reason) => {
      if (!opened) {
        reject(new Error(`closed before open (${code})`));
        return;
      }
      t.onClose?.(code, reason.toString("utf8"));
    });
  });
}

/** A transport over a standard `WebSocket` constructor (browser, service worker, Node 22+). */
export function standardTransport(url: string, ctor: StandardWebSocketCtor): Promise<Transport> {
  return new Promise<Transport>((resolve, reject) => {
    const ws = new ctor(url);
    let opened = false;
    let closed = false;
    const t: Transport = {
      send(text) {
        if (ws.readyState !== 1) throw new Error("WebSocket is not open");
        ws.send(text);
      },
      close(code, reason) {
        try {
          ws.close(code ?? 1000, reason);
        } catch {
          ws.close();
        }
      },
      onMessage: undefined,
      onClose: undefined,
      onTraffic: undefined,
    };
    ws.addEventListener("open", () => {
      opened = true;
      resolve(t);
    });
    ws.addEventListener("message", (event: { data: unknown }) => {
      t.onTraffic?.();
      if (typeof event.data === "string") t.onMessage?.(event.data);
    });
    ws.addEventListener("error", () => {
      if (!opened) reject(new Error(`cannot open ${url}`));
    });
    ws.addEventListener("close", (event: { code?: number; reason?: string }) => {
      if (closed) return;
      closed = true;
      if (!opened) {
        reject(new Error(`closed before open (${event.code ?? 1006})`));
        return;
      }
      t.onClose?.(event.code ?? 1006, event.reason ?? "");
    });
  });
}
