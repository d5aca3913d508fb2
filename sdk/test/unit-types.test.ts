// Type-level test of the generated bindings: every domain type is exported by name from
// "@snowpea/sdk" and the params, results, notifications and event payloads that carry it
// refer to that one type (issue 13 §1). The checks are compile-time: a wrong type makes
// `tsc -p tsconfig.test.json` (run by `npm test`) fail, before any test runs.
import { test } from "node:test";
import assert from "node:assert/strict";
import type {
  AgentRow,
  CatalogItem,
  Checkpoint,
  CheckpointRestoredEvent,
  CheckpointRestoreResult,
  CheckpointSkip,
  CheckpointUpdatedEvent,
  Command,
  CommandsChangedNotification,
  ContentBlock,
  EventMap,
  Job,
  McpCatalogEntry,
  McpServer,
  McpServerDraft,
  McpServerTool,
  Memory,
  MemoryHit,
  MethodMap,
  PermissionMode,
  ServerMethodMap,
  SessionAttachment,
  SessionEventPayloadMap,
  SetupItem,
  SetupStatus,
  SiteEntry,
  Skill,
  TeamGuide,
  TokenUsage,
} from "@snowpea/sdk";

/** `true` when A and B are the same type (mutually assignable is not enough: `any` fails). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only for `true`. */
function assertType<T extends true>(): T | undefined {
  return undefined;
}
type Result<M extends keyof MethodMap> = MethodMap[M]["result"];
type Params<M extends keyof MethodMap> = MethodMap[M]["params"];
type Elem<T> = T extends readonly (infer E)[] ? E : never;

test("params and results refer to the named domain types", () => {
  // scheduler / memory / mcp
  assertType<Equal<Elem<NonNullable<Result<"job.list">["jobs"]>>, Job>>();
  assertType<Equal<Result<"job.update">, Job>>();
  assertType<Equal<Elem<NonNullable<Result<"site.get">["entries"]>>, SiteEntry>>();
  assertType<Equal<Result<"site.mark">["entry"], SiteEntry>>();
  assertType<Equal<NonNullable<Params<"mcp.update">["patch"]>, McpServerDraft>>();
  assertType<Equal<Elem<NonNullable<Result<"mcp.list">["servers"]>>, McpServer>>();
  assertType<Equal<Elem<NonNullable<McpServer["tools"]>>, McpServerTool>>();
  assertType<Equal<Elem<NonNullable<Result<"mcp.add">["tools"]>>, McpServerTool>>();
  assertType<Equal<Elem<NonNullable<Result<"mcp.test">["tools"]>>, McpServerTool>>();
  assertType<Equal<Elem<NonNullable<Result<"mcp.catalog">["entries"]>>, McpCatalogEntry>>();
  assertType<Equal<Elem<NonNullable<Result<"memory.list">["entries"]>>, Memory>>();
  assertType<Equal<Elem<NonNullable<Result<"memory.search">["hits"]>>, MemoryHit>>();
  assertType<Equal<Elem<NonNullable<Result<"agent.list">["agents"]>>, AgentRow>>();
  // setup
  assertType<Equal<Result<"setup.status">, SetupStatus>>();
  assertType<Equal<Result<"setup.applyDefaults">["status"], SetupStatus>>();
  assertType<Equal<Elem<NonNullable<SetupStatus["required"]>>, SetupItem>>();
  assertType<Equal<Elem<NonNullable<Result<"setup.catalog">["vendors"]>>, CatalogItem>>();
  assertType<Equal<Elem<NonNullable<Result<"setup.catalog">["tts"]>>, CatalogItem>>();
  // team guides, skills, commands
  assertType<Equal<Result<"team.guide.set">["guide"], TeamGuide>>();
  assertType<Equal<NonNullable<Result<"team.guide.get">["guide"]>, TeamGuide>>();
  assertType<Equal<Elem<NonNullable<Result<"team.guide.list">["guides"]>>, TeamGuide>>();
  assertType<Equal<Elem<NonNullable<Result<"skill.list">["skills"]>>, Skill>>();
  assertType<Equal<Elem<NonNullable<Result<"skill.search">["skills"]>>, Skill>>();
  assertType<Equal<Elem<NonNullable<Result<"command.list">["commands"]>>, Command>>();
  // checkpoints
  assertType<Equal<Elem<NonNullable<Result<"checkpoint.list">["checkpoints"]>>, Checkpoint>>();
  assertType<Equal<Elem<NonNullable<CheckpointRestoreResult["skipped"]>>, CheckpointSkip>>();
  // tool content, attachments, usage
  assertType<Equal<Elem<NonNullable<Result<"session.toolContent">["content"]>>, ContentBlock>>();
  assertType<Equal<Elem<NonNullable<ServerMethodMap["tool.invoke"]["result"]["content"]>>, ContentBlock>>();
  assertType<Equal<Elem<NonNullable<Result<"session.attachments">["attachments"]>>, SessionAttachment>>();
  assertType<Equal<Result<"llm.sample">["usage"], TokenUsage>>();
  assert.ok(true);
});

test("notifications and session events refer to the same domain types", () => {
  assertType<Equal<EventMap["commands.changed"], CommandsChangedNotification>>();
  assertType<Equal<Elem<NonNullable<CommandsChangedNotification["commands"]>>, Command>>();
  assertType<Equal<SessionEventPayloadMap["checkpoint.updated"], CheckpointUpdatedEvent>>();
  assertType<Equal<CheckpointUpdatedEvent["checkpoint"], Checkpoint>>();
  assertType<Equal<Elem<NonNullable<CheckpointRestoredEvent["skipped"]>>, CheckpointSkip>>();
  assertType<Equal<Elem<NonNullable<SessionEventPayloadMap["tool.result"]["content"]>>, ContentBlock>>();
  assertType<Equal<NonNullable<SessionEventPayloadMap["subagent.done"]["usage"]>, TokenUsage>>();
  assert.ok(true);
});

test("the plan/accept/auto value list is one named type", () => {
  assertType<Equal<PermissionMode, "plan" | "accept" | "auto">>();
  assertType<Equal<Params<"session.setMode">["mode"], PermissionMode>>();
  assertType<Equal<NonNullable<Params<"session.create">["mode"]>, PermissionMode>>();
  assertType<Equal<NonNullable<Job["mode"]>, PermissionMode>>();
  assertType<Equal<SessionEventPayloadMap["mode.changed"]["mode"], PermissionMode>>();
  const mode: PermissionMode = "accept";
  assert.equal(mode, "accept");
});

test("a domain type is usable as a value's type", () => {
  const item: SetupItem = { done: true, id: "provider", title: "A provider" };
  const status: SetupStatus = { required: [item] };
  assert.equal(status.required?.[0]?.id, "provider");
});
