import { AsyncLocalStorage } from "node:async_hooks";

import type { ArtifactRecord } from "./records.js";

/** The tags made through a client while `captureTurn` ran its callback. */
export class CapturedTurn {
  readonly records: ArtifactRecord[] = [];
  constructor(readonly turnId: string | undefined) {}

  /** True when at least one artifact was tagged during the turn, of that kind (any, if omitted),
   * matching the predicate over the record. */
  taggedArtifact(kind?: string | null, predicate?: (record: ArtifactRecord) => boolean): boolean {
    return this.records.some((r) => (kind == null || r.kind === kind) && (predicate === undefined || predicate(r)));
  }
}

export interface TurnScope {
  client: object;
  turn: CapturedTurn;
  sessionId: string | undefined;
}

export const turns = new AsyncLocalStorage<TurnScope>();

