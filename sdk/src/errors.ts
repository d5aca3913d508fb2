/**
 * Errors a call can end with (protocol § Error codes). A JSON-RPC error from the daemon is an
 * {@link RpcError}; everything else about the connection is one of the other classes, all of
 * them {@link SnowpeaError}s.
 */
import { ERROR_CODES, type ErrorCode } from "./protocol.js";

/** JSON-RPC `method_not_found` (-32601): the only numeric code that means "no such method". */
export const METHOD_NOT_FOUND = -32601;
/** JSON-RPC `invalid_params` (-32602). */
export const INVALID_PARAMS = -32602;
/** JSON-RPC `internal` (-32603). */
export const INTERNAL = -32603;
/** A missing entity (-32004). */
export const NOT_FOUND = -32004;
/** Every protocol error without a more specific number (-32000). */
export const SERVER_ERROR = -32000;

/** Base class of every error this SDK throws. */
export class SnowpeaError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The WebSocket could not be opened, it closed during `system.hello`, or `daemon.json` is unreadable. */
export class ConnectError extends SnowpeaError {}

/** No answer within the call's timeout (including waiting for a reconnect). */
export class TimeoutError extends SnowpeaError {}

/**
 * The connection closed before the answer arrived, or the client was closed. A call that fails
 * this way may or may not have run on the daemon; retrying is up to the caller.
 */
export class ConnectionClosedError extends SnowpeaError {}

/** The daemon sent something that breaks the protocol. */
export class ProtocolError extends SnowpeaError {}

/** The wire shape of a JSON-RPC error object. */
export interface RpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/**
 * A JSON-RPC error: what the daemon answered, or what a server→client request handler throws
 * to refuse (`throw RpcError.withCode("not_found", "no such tab")`).
 */
export class RpcError extends SnowpeaError {
  /** Numeric JSON-RPC `error.code`, e.g. -32601, -32004, -32602, -32000. */
  readonly code: number;
  /** The protocol's string code, `error.data.code` (e.g. `"unauthorized"`), when present. */
  readonly dataCode: ErrorCode | (string & {}) | undefined;
  /** The whole `error.data` as sent (it includes `code` and, when present, `details`). */
  readonly data: unknown;
  /** The method whose call failed, when known. */
  readonly method: string | undefined;
  /** The daemon's message as sent, without the method and code this error's `message` adds. */
  readonly rpcMessage: string;

  constructor(code: number, message: string, data?: unknown, method?: string) {
    const dataCode = readDataCode(data);
    super(`${method ? `${method}: ` : ""}${message}${dataCode ? ` (${dataCode})` : ""}`);
    this.code = code;
    this.dataCode = dataCode;
    this.data = data;
    this.method = method;
    this.rpcMessage = message;
  }

  /** True when `error.data.code` is `code`. */
  is(code: ErrorCode): boolean {
    return this.dataCode === code;
  }

  /** An error with the protocol's numeric code for `code` and `error.data.code` set. */
  static withCode(code: ErrorCode, message: string, details?: Record<string, unknown>): RpcError {
    const numeric: number = ERROR_CODES[code] ?? SERVER_ERROR;
    const data: Record<string, unknown> = { code };
    if (details !== undefined) data.details = details;
    return new RpcError(numeric, message, data);
  }

  /** Parses a wire error object (tolerating missing fields). */
  static fromObject(error: unknown, method?: string): RpcError {
    const e = (typeof error === "object" && error !== null ? error : {}) as Partial<RpcErrorObject>;
    const code = typeof e.code === "number" ? e.code : INTERNAL;
    const message = typeof e.message === "string" ? e.message : "error without a message";
    return new RpcError(code, message, e.data, method);
  }

  /** The wire error object. */
  toObject(): RpcErrorObject {
    const out: RpcErrorObject = { code: this.code, message: this.rpcMessage };
    if (this.data !== undefined) out.data = this.data;
    return out;
  }
}

function readDataCode(data: unknown): string | undefined {
  if (typeof data === "object" && data !== null && "code" in data) {
    const code = (data as { code: unknown }).code;
    if (typeof code === "string") return code;
  }
  return undefined;
}
