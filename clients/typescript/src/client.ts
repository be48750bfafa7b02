import { AsyncLocalStorage } from "node:async_hooks";
import { createWriteStream, openAsBlob } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";

import { ArtifactsError, errorFrom } from "./errors.js";
import { subscribe, type SubscribeOptions } from "./events.js";
import type { ArtifactsSpec, DataOf } from "./kinds.js";
import type { ArtifactEvent, ArtifactRecord, KindsAnswer, Page, Session, Source } from "./records.js";
import { isModelError, toolCallKey, ToolResult } from "./tool.js";

/** Bytes up to this size go inline (base64 in the JSON body); bigger ones, and streams, go multipart. */
const INLINE_LIMIT = 4 * 1024 * 1024;
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
}

/** Contents of a tag: text, bytes, a Blob (e.g. `fs.openAsBlob(path)`, streamed from disk), or a stream. */
export type Contents =
  | string
  | Uint8Array
  | Blob
  | WebReadableStream<Uint8Array>
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array>;

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
}

export interface ListFilters {
  kind?: string;
  sessionId?: string;
  source?: Source;
  key?: string;
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

interface TurnScope {
  client: object;
  turn: CapturedTurn;
  sessionId: string | undefined;
}

const turns = new AsyncLocalStorage<TurnScope>();

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

function isAsyncIterable(value: unknown): value is AsyncIterable<Uint8Array> {
  return value != null && typeof (value as AsyncIterable<Uint8Array>)[Symbol.asyncIterator] === "function";
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

  constructor(options: ConnectOptions<S>) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.agent = options.agent;
    this.key = options.key;
    this.kindsSpec = options.kinds;
    this.retries = options.retries ?? 3;
    this.backoffMs = options.backoffMs ?? 200;
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
    const record = await this.withContents(input.contents, body, async (call) =>
      this.json<ArtifactRecord>({ method: "POST", path: "artifacts", ...call, retry: keyed && call.retry }),
    );
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

  private async withContents<T>(
    contents: Contents | undefined,
    body: Record<string, unknown>,
    run: (call: { json?: unknown; form?: () => Promise<FormData>; retry: boolean }) => Promise<T>,
  ): Promise<T> {
    if (contents === undefined) return run({ json: body, retry: true });
    if (typeof contents === "string") return run({ json: { ...body, contents }, retry: true });
    if (contents instanceof Uint8Array && contents.byteLength <= INLINE_LIMIT) {
      return run({ json: { ...body, contentsBase64: Buffer.from(contents).toString("base64") }, retry: true });
    }
    const form = (blob: Blob) => async () => {
      const data = new FormData();
      data.append("record", JSON.stringify(body));
      data.append("contents", blob, "contents");
      return data;
    };
    if (contents instanceof Uint8Array) return run({ form: form(new Blob([contents])), retry: true });
    if (contents instanceof Blob) return run({ form: form(contents), retry: true });
    // A stream of unknown length: spooled to a temporary file (memory stays flat), then sent as a
    // file-backed Blob, so the upload has a Content-Length and can be repeated.
    const dir = await mkdtemp(join(tmpdir(), "agent-artifacts-"));
    try {
      const path = join(dir, "contents");
      const source = isAsyncIterable(contents)
        ? Readable.from(contents)
        : Readable.fromWeb(contents as WebReadableStream<Uint8Array>);
      await pipeline(source, createWriteStream(path));
      return await run({ form: form(await openAsBlob(path)), retry: true });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  // -- reading -----------------------------------------------------------------------------------

  /** One page of records (newest-updated first) and the URL of the next. */
  page(filters: ListFilters & { limit?: number; cursor?: string } = {}): Promise<Page<ArtifactRecord>> {
    return this.json({ method: "GET", path: "artifacts", retry: true, query: { ...filters } });
  }

  /** Every record matching the filters, newest-updated first, page after page. */
  async list(filters: ListFilters & { pageSize?: number } = {}): Promise<ArtifactRecord[]> {
    const { pageSize = 200, ...rest } = filters;
    return this.all<ArtifactRecord>("artifacts", { ...rest, limit: pageSize });
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
    return this.json({ method: "GET", path: `artifacts/${encodeURIComponent(id)}`, retry: true });
  }

  async delete(id: string): Promise<void> {
    await this.json({ method: "DELETE", path: `artifacts/${encodeURIComponent(id)}`, retry: false });
  }

  /** The record's content, streamed: read `body`, or `bytes()` / `text()` for small ones. */
  async content(id: string): Promise<Content> {
    const response = await this.send({ method: "GET", path: `artifacts/${encodeURIComponent(id)}/content`, retry: true });
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

  list(filters: Omit<ListFilters, "sessionId"> & { pageSize?: number } = {}): Promise<ArtifactRecord[]> {
    return this.client.list({ ...filters, sessionId: this.sessionId });
  }

  get(id: string): Promise<ArtifactRecord> {
    return this.client.get(id);
  }

  content(id: string): Promise<Content> {
    return this.client.content(id);
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
