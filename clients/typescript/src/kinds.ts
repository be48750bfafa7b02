import type { z } from "zod";

/** One kind an agent declares: a non-empty description and an optional zod schema for `data`. */
export interface KindSpec<S extends z.ZodType = z.ZodType> {
  description: string;
  schema?: S;
}

export interface ArtifactsSpec<K extends Record<string, KindSpec> = Record<string, KindSpec>> {
  kinds: K;
  /** Expose the model-facing tag_artifact tool. */
  agentTool?: boolean;
  /** Retention cap (records), default 1000 on the server. */
  max?: number;
}

/** The agent's kinds, in the shape of the TypeScript agent SDKs this service is modelled on.
 * Checked here as the server checks a declaration: non-empty descriptions, kind names as in
 * API.md "Names", `agentTool` needs a kind, `max` ≥ 1. */
export function defineArtifacts<const K extends Record<string, KindSpec>>(spec: ArtifactsSpec<K>): ArtifactsSpec<K> {
  const names = Object.keys(spec.kinds ?? {});
  for (const name of names) {
    if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/.test(name)) {
      throw new TypeError(`Kind name ${JSON.stringify(name)} must match [A-Za-z0-9][A-Za-z0-9._:-]{0,63}.`);
    }
    const kind = spec.kinds[name]!;
    if (typeof kind.description !== "string" || kind.description.trim() === "") {
      throw new TypeError(`Kind ${JSON.stringify(name)} needs a non-empty description.`);
    }
  }
  if (spec.agentTool && names.length === 0) {
    throw new TypeError("agentTool: true needs at least one kind declared.");
  }
  if (spec.max !== undefined && !(Number.isInteger(spec.max) && spec.max >= 1)) {
    throw new TypeError(`max must be an integer ≥ 1, not ${spec.max}.`);
  }
  return spec;
}

/** The `data` type a kind's schema gives after parsing (`unknown` for a kind without schema). */
export type DataOf<Spec extends ArtifactsSpec, Kind extends string> = Kind extends keyof Spec["kinds"]
  ? Spec["kinds"][Kind] extends { schema: infer S extends z.ZodType }
    ? z.input<S>
    : unknown
  : unknown;
