import { type Contents, largeContents, type Progress, uploadLarge, withContents } from "./contents.js";
import { ArtifactsError, errorFrom } from "./errors.js";
import { subscribe, type SubscribeOptions } from "./events.js";
import { type ArtifactsSpec, type DataOf, declaration, type Where } from "./kinds.js";
import type { ArtifactEvent, ArtifactRecord, KindsAnswer, Page, Session, Source, VersionDiff } from "./records.js";
import { isModelError, toolCallKey, ToolResult } from "./tool.js";
import { CapturedTurn, type TurnScope, turns } from "./turns.js";

export type { Contents, Progress } from "./contents.js";
export { CapturedTurn } from "./turns.js";

const RETRY_STATUSES = new Set([502, 503, 504]);

export interface ConnectOptions<S extends ArtifactsSpec = ArtifactsSpec> {
  /** Where the service is, e.g. `http://127.0.0.1:8000`. */
  baseUrl: string;
  /** An agent key of this agent (`manage.py create_agent_key <slug>`), or a user token. */
  key: string;
  /** The agent's slug. */
  agent: string;
  /** The kinds from `defineArtifacts`: `tag` parses `data` with a kind's zod schema before sending. */
  kinds?: S;
  /** Attempts after the first, for requests that are safe to repeat (default 3). */
  retries?: number;
  /** The first wait between attempts, doubled each time (default 200 ms). */
  backoffMs?: number;
  /** Bytes or a Blob past this size (default 8 MiB) go as known contents if the agent stores
   * them already, else as a resumable upload (tus) that goes on after a dropped connection. */
  uploadThreshold?: number;
}

export interface TagInput<K extends string = string, D = unknown> {
  kind?: K;
  key?: string | null;
  title?: string | null;
  data: D;
  sessionId?: string | null;
  turnId?: string | null;
  source?: Source;
  contents?: Contents;
  contentType?: string;
  /** Large contents' progress: bytes the server holds, and bytes in all. */
  onProgress?: Progress;
}

export interface ListFilters<K extends string = string, D = unknown> {
  kind?: K;
  sessionId?: string;
  source?: Source;
  key?: string;
  /** Full text (API.md "Search"): every word must match, the last also as a prefix;
   * `"a phrase"`; `-word` excludes. */
  q?: string;
  /** Conditions over `data`, typed by the kind's zod schema when `kind` names one (or JSON text). */
  where?: Where<D> | string;
}

function listQuery(filters: object): Record<string, string | number | undefined> {
  const query: Record<string, string | number | undefined> = {};
  for (const [name, value] of Object.entries(filters)) {
    if (value === undefined) continue;
    query[name] = name === "where" && typeof value !== "string" ? JSON.stringify(value) : (value as string | number);
  }
  return query;
}

export type ToolFormat = "anthropic" | "openai" | "openai-responses";

/** A record's content as the server streams it: read it once, as a stream, bytes or text. */
export interface Content {
  contentType: string;
  size: number;
  /** The sha256 of the bytes (the ETag). */
  sha256: string;
  body: ReadableStream<Uint8Array>;
  bytes(): Promise<Uint8Array>;
  text(): Promise<string>;
}

interface Call {
  method: string;
  path?: string;
  url?: string;
  retry: boolean;
  query?: Record<string, string | number | undefined>;
  json?: unknown;
  form?: () => Promise<FormData>;
}

function pick<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined && v !== null)) as Partial<T>;
}

/** The REST API of one agent (API.md "HTTP routes"). Made by `connect`. */
export class ArtifactsClient<S extends ArtifactsSpec = ArtifactsSpec> {
  readonly baseUrl: string;
  readonly agent: string;
  readonly kindsSpec: S | undefined;
  private readonly key: string;
  private readonly prefix: string;
  private readonly retries: number;
  private readonly backoffMs: number;
  private readonly uploadThreshold: number;

  constructor(options: ConnectOptions<S>) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.agent = options.agent;
    this.key = options.key;
    this.kindsSpec = options.kinds;
    this.retries = options.retries ?? 3;
    this.backoffMs = options.backoffMs ?? 200;
    this.uploadThreshold = options.uploadThreshold ?? 8 * 1024 * 1024;
    this.prefix = `${this.baseUrl}/${encodeURIComponent(options.agent)}/v1/`;
  }

  // -- transport ---------------------------------------------------------------------------------

  private async send(call: Call): Promise<Response> {
    const url = new URL(call.url ?? this.prefix + call.path);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    for (let attempt = 1; ; attempt++) {
      const headers: Record<string, string> = { Authorization: `Bearer ${this.key}`, Accept: "application/json" };
      let body: string | FormData | undefined;
      if (call.form) body = await call.form();
      else if (call.json !== undefined) {
        body = JSON.stringify(call.json);
        headers["Content-Type"] = "application/json";
      }
      let response: Response;
      try {
        response = await fetch(url, { method: call.method, headers, body });
      } catch (error) {
        // A refused connection never reached the server: repeating it is always safe.
        const code = (error as { cause?: { code?: string } }).cause?.code;
        const safe = call.retry || code === "ECONNREFUSED";
        if (!safe || attempt > this.retries) {
          const why = safe ? "retried" : "not retried: repeating it could tag twice";
          throw new ArtifactsError(
            "connection_error",
            `No answer from the server after ${attempt} attempt(s) (${code ?? String(error)}); ${why}.`,
            { cause: error },
          );
        }
        await this.sleep(attempt);
        continue;
      }
      if (call.retry && RETRY_STATUSES.has(response.status) && attempt <= this.retries) {
        await response.body?.cancel();
        await this.sleep(attempt);
        continue;
      }
      return response;
    }
  }

  private sleep(attempt: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, this.backoffMs * 2 ** (attempt - 1)));
  }

  private async json<T>(call: Call): Promise<T> {
    const response = await this.send(call);
    if (!response.ok) throw await errorFrom(response);
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  // -- tagging -----------------------------------------------------------------------------------

  /** Tag an artifact (upsert by `key`). `data` is parsed with the kind's zod schema first, so its
   * coercions and defaults apply and bad data is refused before anything is sent. */
  async tag<K extends string>(input: TagInput<K, DataOf<S, K>>): Promise<ArtifactRecord> {
    const scope = this.scope();
    const data = this.parse(input.kind, input.data);
    const body = pick({
      kind: input.kind,
      key: input.key,
      title: input.title,
      sessionId: input.sessionId ?? scope?.sessionId,
      turnId: input.turnId ?? scope?.turn.turnId,
      source: input.source,
      contentType: input.contentType,
    }) as Record<string, unknown>;
    body.data = data;
    const keyed = input.key != null;
    const post = (call: { json?: unknown; form?: () => Promise<FormData>; retry: boolean }) =>
      this.json<ArtifactRecord>({ method: "POST", path: "artifacts", ...call, retry: keyed && call.retry });
    const large = largeContents(input.contents, this.uploadThreshold);
    const record = large
      ? await uploadLarge(large, body, {
          post,
          uploads: this.prefix + "uploads",
          key: this.key,
          contentType: input.contentType,
          onProgress: input.onProgress,
        })
      : await withContents(input.contents, body, post);
    scope?.turn.records.push(record);
    return record;
  }

  private parse(kind: string | undefined, data: unknown): unknown {
    const schema = kind === undefined ? undefined : this.kindsSpec?.kinds[kind]?.schema;
    if (schema === undefined) return data;
    const parsed = schema.safeParse(data);
    if (parsed.success) return parsed.data;
    const details = parsed.error.issues.map((issue) => ({
      loc: issue.path.map((part) => (typeof part === "symbol" ? String(part) : part)),
      msg: issue.message,
    }));
    const first = details[0];
    const where = first && first.loc.length ? `\`${first.loc.join(".")}\`: ` : "";
    throw new ArtifactsError(
      "schema_invalid",
      `\`data\` does not match kind ${JSON.stringify(kind)}: ${where}${first?.msg ?? "invalid"}` +
        (details.length > 1 ? ` (${details.length - 1} more problem(s) in details).` : "."),
      { details },
    );
  }

  // -- reading -----------------------------------------------------------------------------------

  /** One page of records (newest-updated first) and the URL of the next. */
  page<K extends string = string>(
    filters: ListFilters<K, DataOf<S, K>> & { limit?: number; cursor?: string } = {},
  ): Promise<Page<ArtifactRecord>> {
    return this.json({ method: "GET", path: "artifacts", retry: true, query: listQuery(filters) });
  }

  /** Every record matching the filters (and `q` / `where`), newest-updated first, page after page. */
  async list<K extends string = string>(
    filters: ListFilters<K, DataOf<S, K>> & { pageSize?: number } = {},
  ): Promise<ArtifactRecord[]> {
    const { pageSize = 200, ...rest } = filters;
    return this.all<ArtifactRecord>("artifacts", { ...listQuery(rest), limit: pageSize });
  }

  private async all<T>(path: string, query: Record<string, string | number | undefined>): Promise<T[]> {
    const rows: T[] = [];
    let page = await this.json<Page<T>>({ method: "GET", path, retry: true, query });
    rows.push(...page.results);
    while (page.next) {
      page = await this.json<Page<T>>({ method: "GET", url: page.next, retry: true });
      rows.push(...page.results);
    }
    return rows;
  }

  get(id: string): Promise<ArtifactRecord> {
    return this.json({ method: "GET", path: artifactPath(id), retry: true });
  }

  async delete(id: string): Promise<void> {
    await this.json({ method: "DELETE", path: artifactPath(id), retry: false });
  }

  /** The record's content (or that `version`'s), streamed: read `body`, or `bytes()` / `text()`
   * for small ones. */
  async content(id: string, options: { version?: number } = {}): Promise<Content> {
    const at = options.version === undefined ? "" : `/versions/${versionNumber(options.version)}`;
    const response = await this.send({ method: "GET", path: `${artifactPath(id)}${at}/content`, retry: true });
    if (!response.ok) throw await errorFrom(response);
    return {
      contentType: response.headers.get("content-type") ?? "application/octet-stream",
      size: Number(response.headers.get("content-length") ?? "0"),
      sha256: (response.headers.get("etag") ?? "").replace(/^W\//, "").replace(/"/g, ""),
      body: response.body as ReadableStream<Uint8Array>,
      bytes: async () => new Uint8Array(await response.arrayBuffer()),
      text: () => response.text(),
    };
  }

  // -- versions, pins and diffs (API.md "Versions, pins and diffs") -----------------------------

  /** The record's versions the caller may see, newest first, each as its tag stored it (with
   * `version` = its number; 1 is the first tag). Every page. */
  versions(id: string, options: { pageSize?: number } = {}): Promise<ArtifactRecord[]> {
    return this.all<ArtifactRecord>(`${artifactPath(id)}/versions`, { limit: options.pageSize ?? 200 });
  }

  /** One version: the record's fields as that tag stored them. */
  async version(id: string, version: number): Promise<ArtifactRecord> {
    return this.json({ method: "GET", path: `${artifactPath(id)}/versions/${versionNumber(version)}`, retry: true });
  }

  /** What changed from version `from` (default: the newest visible one before `version`) to `version`. */
  async diff(id: string, version: number, options: { from?: number } = {}): Promise<VersionDiff> {
    const from = options.from === undefined ? undefined : versionNumber(options.from, "from");
    return this.json({
      method: "GET",
      path: `${artifactPath(id)}/versions/${versionNumber(version)}/diff`,
      retry: true,
      query: { from },
    });
  }

  /** A new version with that version's kind, title and data, in the record's current session (agent key). */
  async restore(id: string, version: number): Promise<ArtifactRecord> {
    // Not repeated on a dropped answer: each restore makes a new version.
    return this.json({ method: "POST", path: `${artifactPath(id)}/versions/${versionNumber(version)}/restore`, retry: false });
  }

  /** Pin the record: eviction skips it (agent key, staff). */
  pin(id: string): Promise<ArtifactRecord> {
    return this.json({ method: "PUT", path: `${artifactPath(id)}/pin`, retry: true });
  }

  unpin(id: string): Promise<ArtifactRecord> {
    return this.json({ method: "DELETE", path: `${artifactPath(id)}/pin`, retry: true });
  }

  // -- sessions and kinds ------------------------------------------------------------------------

  /** Create a session (`id` omitted: generated; `owner` a username or none). */
  createSession(options: { id?: string; owner?: string } = {}): Promise<Session> {
    // Not repeated on a dropped answer: a second try could make a second (generated) session.
    return this.json({ method: "POST", path: "sessions", retry: false, json: pick(options) });
  }

  session(id: string): Promise<Session> {
    return this.json({ method: "GET", path: `sessions/${encodeURIComponent(id)}`, retry: true });
  }

  /** Every session the caller may see, newest first. */
  sessions(options: { pageSize?: number } = {}): Promise<Session[]> {
    return this.all<Session>("sessions", { limit: options.pageSize ?? 200 });
  }

  /** Declare the agent's kinds on the server (`PUT artifacts/kinds`; for an agent with no Python
   * module): each kind's zod schema goes as JSON Schema (draft 2020-12, as zod reads input, so
   * fields with defaults are optional). Replaces the whole declaration; answers what `kinds()`
   * then answers. A schema JSON Schema cannot express (a date, a transform's output) is refused
   * here with `invalid_schema`, before sending. */
  async declare(spec: ArtifactsSpec = this.kindsSpec ?? { kinds: {} }): Promise<KindsAnswer> {
    // The body replaces the whole declaration: repeating it changes nothing more.
    return this.json({ method: "PUT", path: "artifacts/kinds", retry: true, json: declaration(spec) });
  }

  /** What the server knows of this agent's kinds: `{kinds: [{name, description, schema}], max, agentTool}`. */
  kinds(): Promise<KindsAnswer> {
    return this.json({ method: "GET", path: "artifacts/kinds", retry: true });
  }

  // -- the model's tool --------------------------------------------------------------------------

  /** The model-facing tag_artifact tool, generated by the server from the agent's kinds. */
  tool(format: ToolFormat = "anthropic"): Promise<Record<string, unknown>> {
    return this.json({ method: "GET", path: "tools/tag_artifact", retry: true, query: { format } });
  }

  /** Run a model's tag_artifact call (the object, or the JSON text OpenAI gives). Tags with
   * source "model"; a refusal the model can fix comes back as a refused `ToolResult`. */
  async runTool(input: unknown, options: { sessionId?: string; turnId?: string } = {}): Promise<ToolResult> {
    const scope = this.scope();
    const body = {
      input,
      ...pick({ sessionId: options.sessionId ?? scope?.sessionId, turnId: options.turnId ?? scope?.turn.turnId }),
    };
    const response = await this.send({
      method: "POST",
      path: "tools/tag_artifact",
      retry: toolCallKey(input) != null,
      json: body,
    });
    if (response.ok) {
      const result = ToolResult.tagged((await response.json()) as ArtifactRecord, response.status === 201);
      scope?.turn.records.push(result.record!);
      return result;
    }
    const error = await errorFrom(response);
    if (isModelError(response.status, error.details)) return ToolResult.refused(error.code, error.message, error.details);
    throw error;
  }

  // -- events and evals --------------------------------------------------------------------------

  /** The agent's event stream, or a session's: an async iterator with replay (`after`) and
   * reconnection (see `subscribe`). */
  subscribe(options: SubscribeOptions & { sessionId?: string } = {}): AsyncGenerator<ArtifactEvent, void, undefined> {
    const ws = this.prefix.replace(/^http/, "ws");
    const path = options.sessionId ? `sessions/${encodeURIComponent(options.sessionId)}/events` : "events";
    return subscribe(ws + path, this.key, options);
  }

  /** Run one agent turn and capture what it tagged through this client (and its `forSession`
   * facades), including in async work the callback starts. Tags and tool calls made inside that
   * name no turn get `turnId` (and `sessionId`, when given). */
  async captureTurn(
    options: { turnId?: string; sessionId?: string },
    fn: () => Promise<unknown> | unknown,
  ): Promise<CapturedTurn> {
    const turn = new CapturedTurn(options.turnId);
    await turns.run({ client: this, turn, sessionId: options.sessionId }, fn);
    return turn;
  }

  private scope(): TurnScope | undefined {
    const scope = turns.getStore();
    return scope && scope.client === this ? scope : undefined;
  }

  /** A session-bound facade: fills `sessionId` (and `turnId`) into what it tags and lists. */
  forSession(sessionId: string, options: { turnId?: string } = {}): SessionArtifacts<S> {
    return new SessionArtifacts(this, sessionId, options.turnId);
  }
}

/** The artifacts of one session, as an agent turn sees them (`client.forSession(id, {turnId})`). */
export class SessionArtifacts<S extends ArtifactsSpec = ArtifactsSpec> {
  constructor(
    readonly client: ArtifactsClient<S>,
    readonly sessionId: string,
    readonly turnId: string | undefined,
  ) {}

  tag<K extends string>(input: Omit<TagInput<K, DataOf<S, K>>, "sessionId">): Promise<ArtifactRecord> {
    return this.client.tag({ ...input, sessionId: this.sessionId, turnId: input.turnId ?? this.turnId } as TagInput<
      K,
      DataOf<S, K>
    >);
  }

  list<K extends string = string>(
    filters: Omit<ListFilters<K, DataOf<S, K>>, "sessionId"> & { pageSize?: number } = {},
  ): Promise<ArtifactRecord[]> {
    return this.client.list<K>({ ...filters, sessionId: this.sessionId } as ListFilters<K, DataOf<S, K>> & { pageSize?: number });
  }

  get(id: string): Promise<ArtifactRecord> {
    return this.client.get(id);
  }

  content(id: string, options: { version?: number } = {}): Promise<Content> {
    return this.client.content(id, options);
  }

  versions(id: string, options: { pageSize?: number } = {}): Promise<ArtifactRecord[]> {
    return this.client.versions(id, options);
  }

  version(id: string, version: number): Promise<ArtifactRecord> {
    return this.client.version(id, version);
  }

  delete(id: string): Promise<void> {
    return this.client.delete(id);
  }

  tool(format: ToolFormat = "anthropic"): Promise<Record<string, unknown>> {
    return this.client.tool(format);
  }

  runTool(input: unknown, options: { turnId?: string } = {}): Promise<ToolResult> {
    return this.client.runTool(input, { sessionId: this.sessionId, turnId: options.turnId ?? this.turnId });
  }

  subscribe(options: SubscribeOptions = {}): AsyncGenerator<ArtifactEvent, void, undefined> {
    return this.client.subscribe({ ...options, sessionId: this.sessionId });
  }
}

/** A client of one agent: `connect({ baseUrl, key, agent, kinds })`. */
export function connect<S extends ArtifactsSpec = ArtifactsSpec>(options: ConnectOptions<S>): ArtifactsClient<S> {
  return new ArtifactsClient(options);
}

function artifactPath(id: string): string {
  return `artifacts/${encodeURIComponent(id)}`;
}

/** A version number as the URL takes it; anything but a whole number is the caller's mistake. */
function versionNumber(value: number, name = "version"): number {
  if (!Number.isSafeInteger(value)) {
    throw new ArtifactsError("invalid_version", `\`${name}\` is a version number (a whole number from 1), not ${JSON.stringify(value)}.`, {
      details: { field: name },
    });
  }
  return value;
}
