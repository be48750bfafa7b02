import { z } from "zod";

import { ArtifactsError } from "./errors.js";

/** One kind an agent declares: a non-empty description and an optional zod schema for `data`. */
export interface KindSpec<S extends z.ZodType = z.ZodType> {
  description: string;
  schema?: S;
  /** Versions kept per record of this kind (default: the agent's). */
  keepVersions?: number;
}

export interface ArtifactsSpec<K extends Record<string, KindSpec> = Record<string, KindSpec>> {
  kinds: K;
  /** Expose the model-facing tag_artifact tool. */
  agentTool?: boolean;
  /** Retention cap (records), default 1000 on the server. */
  max?: number;
  /** Versions kept per record, default 10 on the server (1 keeps no history). */
  keepVersions?: number;
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
  for (const [where, keep] of [["keepVersions", spec.keepVersions], ...names.map((n) => [`${n}.keepVersions`, spec.kinds[n]!.keepVersions])]) {
    if (keep !== undefined && !(Number.isInteger(keep) && (keep as number) >= 1)) {
      throw new TypeError(`${where} must be an integer ≥ 1, not ${keep}.`);
    }
  }
  return spec;
}

/** The body of `PUT artifacts/kinds` for a spec: each zod schema as JSON Schema (draft 2020-12),
 * read as zod reads *input*, so a field with a default is optional and its default is declared. */
export function declaration(spec: ArtifactsSpec): Record<string, unknown> {
  const kinds: Record<string, unknown> = {};
  for (const [name, kind] of Object.entries(spec.kinds)) {
    const body: Record<string, unknown> = { description: kind.description };
    if (kind.schema !== undefined) body.schema = jsonSchema(name, kind.schema);
    if (kind.keepVersions !== undefined) body.keepVersions = kind.keepVersions;
    kinds[name] = body;
  }
  const body: Record<string, unknown> = { kinds };
  if (spec.agentTool !== undefined) body.agentTool = spec.agentTool;
  if (spec.max !== undefined) body.max = spec.max;
  if (spec.keepVersions !== undefined) body.keepVersions = spec.keepVersions;
  return body;
}

function jsonSchema(kind: string, schema: z.ZodType): Record<string, unknown> {
  let converted: Record<string, unknown>;
  try {
    converted = z.toJSONSchema(schema, { io: "input", target: "draft-2020-12" }) as Record<string, unknown>;
  } catch (error) {
    throw new ArtifactsError(
      "invalid_schema",
      `The zod schema of kind ${JSON.stringify(kind)} has no JSON Schema form: ${(error as Error).message}`,
      { details: { kind }, cause: error },
    );
  }
  delete converted.$schema; // the contract's dialect already; the server needs no pointer to it
  return converted;
}

/** The `data` type a kind's schema gives after parsing (`unknown` for a kind without schema). */
export type DataOf<Spec extends ArtifactsSpec, Kind extends string> = Kind extends keyof Spec["kinds"]
  ? Spec["kinds"][Kind] extends { schema: infer S extends z.ZodType }
    ? z.input<S>
    : unknown
  : unknown;

// -- search (API.md "Search") ---------------------------------------------------------------------

type Scalar = string | number | boolean | null;
type Depth = [never, 0, 1, 2, 3, 4, 5, 6, 7];

/** The dotted paths into `T` (up to 8 names deep) and the value at each. */
type PathValues<T, D extends number = 8> = [D] extends [never]
  ? never
  : T extends readonly unknown[]
    ? never
    : T extends object
      ? {
          [K in keyof T & string]-?:
            | { path: K; value: NonNullable<T[K]> | Extract<T[K], null> }
            | (NonNullable<T[K]> extends readonly unknown[]
                ? never
                : NonNullable<T[K]> extends object
                  ? PathValues<NonNullable<T[K]>, Depth[D]> extends infer Sub
                    ? Sub extends { path: infer P extends string; value: infer V }
                      ? { path: `${K}.${P}`; value: V }
                      : never
                    : never
                  : never);
        }[keyof T & string]
      : never;

/** What a path's value may be compared with: equality, order (numbers and strings), sets,
 * presence, and `$contains` for arrays. */
export type Condition<V> =
  | (V extends Scalar ? V : never)
  | {
      $eq?: V extends Scalar ? V : never;
      $ne?: V extends Scalar ? V : never;
      $gt?: V extends number | string ? V : never;
      $gte?: V extends number | string ? V : never;
      $lt?: V extends number | string ? V : never;
      $lte?: V extends number | string ? V : never;
      $in?: V extends Scalar ? V[] : never;
      $nin?: V extends Scalar ? V[] : never;
      $exists?: boolean;
      $contains?: V extends readonly (infer E)[] ? (E extends Scalar ? E : never) : never;
    };

/** `where` over `data` of type `T`: dotted paths to conditions, `$and` / `$or` lists. For a kind
 * without a schema (`unknown`), any path and any scalar. */
export type Where<T = unknown> = unknown extends T
  ? { [path: string]: Scalar | Record<string, unknown> | Where<unknown>[] }
  : {
      [P in PathValues<T> as P["path"]]?: Condition<P["value"]>;
    } & { $and?: Where<T>[]; $or?: Where<T>[] };
