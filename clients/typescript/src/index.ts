export { ArtifactsClient, CapturedTurn, connect, SessionArtifacts } from "./client.js";
export type { ConnectOptions, Content, Contents, ListFilters, TagInput, ToolFormat } from "./client.js";
export { ArtifactsError } from "./errors.js";
export { subscribe } from "./events.js";
export type { SubscribeOptions } from "./events.js";
export { defineArtifacts } from "./kinds.js";
export type { ArtifactsSpec, Condition, DataOf, KindSpec, Where } from "./kinds.js";
export type {
  ArtifactEvent,
  ArtifactRecord,
  ContentInfo,
  DeletedEvent,
  DeletedReason,
  KindsAnswer,
  Page,
  PinnedEvent,
  ReplayTruncatedEvent,
  Session,
  Source,
  TaggedEvent,
  VersionDiff,
} from "./records.js";
export { isModelError, ToolResult } from "./tool.js";
