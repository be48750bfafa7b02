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
  updatedAt: string;
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

/** An event of a stream (API.md "Events"): `artifact.tagged`, `artifact.deleted`, `artifact.pinned`, `replay.truncated`. */
export interface ArtifactEvent {
  type: string;
  seq?: number;
  sessionId?: string | null;
  at?: string;
  record?: { id: string; kind: string; key: string | null; title?: string | null; data?: unknown; source?: Source; [field: string]: unknown };
  reason?: string;
  [field: string]: unknown;
}
