/**
 * `@snowpea/sdk`: the TypeScript client of the Snowpea daemon.
 *
 * ```ts
 * import { connect } from "@snowpea/sdk";
 * const client = await connect({ port, token, clientVersion: "1.0.0" });
 * const { sessionId } = await client.createSession({ workdir: process.cwd(), mode: "accept" });
 * client.on("session.event", (e) => { if (e.kind === "message.delta") process.stdout.write(e.payload.text); });
 * await client.promptAndWait(sessionId, "what does this repo do?");
 * await client.close();
 * ```
 *
 * Every method's params and result and every event payload is exported from the generated
 * bindings (`protocol.ts`), re-exported here.
 */
export * from "./protocol.js";
export {
  connect,
  connectFromHome,
  backoffDelay,
  SnowpeaClient,
  type CallOptions,
  type ClientEventMap,
  type ConnectOptions,
  type ConnectionState,
  type ParamsArgs,
  type ReconnectOptions,
  type RequestHandler,
  type SessionEvent,
  type TurnOutcome,
  type Unsubscribe,
} from "./client.js";
export {
  SnowpeaError,
  ConnectError,
  ConnectionClosedError,
  ProtocolError,
  RpcError,
  TimeoutError,
  METHOD_NOT_FOUND,
  INVALID_PARAMS,
  INTERNAL,
  NOT_FOUND,
  SERVER_ERROR,
  type RpcErrorObject,
} from "./errors.js";
export {
  registerTools,
  type HostToolSpec,
  type HostToolsClient,
  type RegisteredTools,
  type ToolCall,
  type ToolHandler,
} from "./host-tools.js";
export { readDaemonInfo, defaultHome, type DaemonInfo } from "./daemon.js";
export { Sequencer, isSeq, type LiveOutcome, type SequencedEvent } from "./sequencer.js";
export {
  defaultTransport,
  wsTransport,
  standardTransport,
  type Transport,
  type TransportFactory,
} from "./transport.js";
