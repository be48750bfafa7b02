/** The record as API.md "The record" gives it (camelCase, timestamps as ISO-8601 strings). */
export interface ContentInfo {
  size: number;
  contentType: string;
  sha256: string;
}

export type Source = "host" | "model";

export interface ArtifactRecord<Data = unknown> {
  id: string;
  kind: string;
  key: string | null;
  title: string | null;
  data: Data;
  sessionId: string | null;
  turnId: string | null;
  source: Source;
  content: ContentInfo | null;
  createdAt: string;
  /** For a version (`versions`, `version`): the moment that version's tag committed. */
  updatedAt: string;
  /** The number of the record's current version (1 is the first tag), or of this version. */
  version: number;
  /** Whether eviction skips the record. */
  pinned: boolean;
}

export interface Session {
  id: string;
  owner: string | null;
  createdAt: string;
}

export interface Page<T> {
  results: T[];
  /** The absolute URL of the next page, or null at the end. */
  next: string | null;
}

export interface KindsAnswer {
  kinds: { name: string; description: string; schema: unknown }[];
  max: number;
  agentTool: boolean;
}

/** What changed between two versions (`diff`): the fields that differ, and an RFC 6902 JSON Patch
 * from the older version's `data` to the newer's. */
export interface VersionDiff {
  from: number;
  to: number;
  fields: Partial<Record<"kind" | "title" | "sessionId" | "turnId" | "source" | "content", { from: unknown; to: unknown }>>;
  data: { op: string; path: string; value?: unknown; from?: string }[];
}

/** Why a record left a stream: deleted, evicted past `max`, pruned by an operator, or moved to
 * another session by a re-tag (the old session's viewers never see its new data). */
export type DeletedReason = "deleted" | "evicted" | "pruned" | "moved";

interface EventBase {
  seq: number;
  sessionId: string | null;
  at: string;
}

/** A tag committed: the record's small fields (never its content). */
export interface TaggedEvent extends EventBase {
  type: "artifact.tagged";
  record: { id: string; kind: string; key: string | null; title: string | null; data: unknown; source: Source; version: number; pinned: boolean };
}

/** A record left this stream; with reason `moved` it lives on in another session. */
export interface DeletedEvent extends EventBase {
  type: "artifact.deleted";
  record: { id: string; kind: string; key: string | null };
  reason: DeletedReason;
}

export interface PinnedEvent extends EventBase {
  type: "artifact.pinned";
  record: { id: string; kind: string; key: string | null; pinned: boolean };
}

/** The asked `after` is older than the stored events kept: what follows starts at `oldestSeq`. */
export interface ReplayTruncatedEvent {
  type: "replay.truncated";
  after: number;
  oldestSeq: number;
  message: string;
}

/** An event of a stream (API.md "Events"). Narrow on `type`; an `artifact.deleted` with reason
 * `moved` means the record left this session for another (a view of this session drops it). */
export type ArtifactEvent = TaggedEvent | DeletedEvent | PinnedEvent | ReplayTruncatedEvent;
