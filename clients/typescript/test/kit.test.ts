/** The kit against a real daphne of the server (started by test/server.ts). */
import assert from "node:assert/strict";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { once } from "node:events";
import { openAsBlob } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";

import { z } from "zod";

import {
  ArtifactsError,
  type ArtifactEvent,
  type ArtifactsClient,
  type TaggedEvent,
  type ArtifactsSpec,
  type TagInput,
  connect,
  defineArtifacts,
  subscribe,
} from "agent-artifacts";

import { CuttingProxy } from "./proxy.js";
import { type Served, startServer } from "./server.js";

const kinds = defineArtifacts({
  kinds: {
    "reviewed-pr": {
      description: "A pull request this agent reviewed.",
      schema: z.object({ url: z.string(), verdict: z.string().default("comment") }),
    },
    report: { description: "A generated report." },
  },
  agentTool: true,
  max: 1000,
});

let served: Served;
let client: ArtifactsClient<typeof kinds>;
let tmp: string;

const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 10)}`;
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

async function refusal(promise: Promise<unknown>): Promise<ArtifactsError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ArtifactsError, `expected an ArtifactsError, got ${error}`);
    return error;
  }
  assert.fail("expected a refusal");
}

/** The stream's artifact.tagged events for `keys`, in arrival order, until all have come. */
async function tagged(stream: AsyncGenerator<ArtifactEvent, void>, keys: string[], ms = 15_000): Promise<TaggedEvent[]> {
  const want = new Set(keys);
  const seen: TaggedEvent[] = [];
  const deadline = Date.now() + ms;
  while (seen.length < want.size) {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, fail) => {
      timer = setTimeout(() => fail(new Error(`${seen.length} of ${want.size} events within ${ms} ms`)), deadline - Date.now());
    });
    const { value, done } = await Promise.race([stream.next(), late]).finally(() => clearTimeout(timer));
    if (done) assert.fail(`the stream ended before ${[...want].join(", ")} came (${seen.length} seen)`);
    if (value.type === "artifact.tagged" && want.has(value.record.key as string)) seen.push(value);
  }
  return seen;
}

before(async () => {
  served = await startServer();
  client = connect({ baseUrl: served.base, key: served.keys.reviewer, agent: "reviewer", kinds, backoffMs: 10 });
  tmp = await mkdtemp(join(tmpdir(), "kit-test-"));
});

after(async () => {
  await rm(tmp, { recursive: true, force: true });
  await served?.stop();
});

describe("defineArtifacts", () => {
  test("refuses what the server would refuse", () => {
    assert.throws(() => defineArtifacts({ kinds: { report: { description: " " } } }), /non-empty description/);
    assert.throws(() => defineArtifacts({ kinds: {}, agentTool: true }), /agentTool/);
    assert.throws(() => defineArtifacts({ kinds: { "bad name": { description: "x" } } }), /must match/);
    assert.throws(() => defineArtifacts({ kinds: { ok: { description: "x" } }, max: 0 }), /max/);
    assert.equal(defineArtifacts(kinds), kinds);
  });
});

describe("tag, get, delete", () => {
  test("tag parses data with the kind's zod schema: its defaults are what is stored", async () => {
    const url = unique("https://github.com/o/r/pull");
    const record = await client.tag({ kind: "reviewed-pr", key: url, title: `Reviewed ${url}`, data: { url } });
    assert.match(record.id, /^art_/);
    assert.deepEqual(record.data, { url, verdict: "comment" });
    assert.equal(record.source, "host");
    assert.deepEqual(await client.get(record.id), record);
    const again = await client.tag({ kind: "reviewed-pr", key: url, data: { url, verdict: "approve" } });
    assert.equal(again.id, record.id); // the key is the upsert handle
    await client.delete(record.id);
    const gone = await refusal(client.get(record.id));
    assert.equal(gone.status, 404);
    assert.equal(gone.code, "unknown_artifact");
  });

  test("data the zod schema refuses is refused before sending, with {loc, msg} details", async () => {
    const key = unique("zod");
    const error = await refusal(client.tag({ kind: "reviewed-pr", key, data: { verdict: "x" } as never }));
    assert.equal(error.code, "schema_invalid");
    assert.equal(error.status, undefined); // no request was made
    assert.deepEqual((error.details as { loc: unknown[] }[]).map((d) => d.loc), [["url"]]);
    assert.deepEqual(await client.list({ key }), []);
  });

  test("the server's own refusal of the same data has the same {loc, msg} shape, as a 400", async () => {
    const bare = connect({ baseUrl: served.base, key: served.keys.reviewer, agent: "reviewer" });
    const error = await refusal(bare.tag({ kind: "reviewed-pr", data: { verdict: "x" } }));
    assert.equal(error.status, 400);
    assert.equal(error.code, "schema_invalid");
    const details = error.details as { loc: unknown[]; msg: string }[];
    assert.deepEqual(details.map((d) => d.loc), [["url"]]);
    assert.equal(typeof details[0]!.msg, "string");
  });

  test("a freeform agent takes any kind; an omitted kind is 'artifact'", async () => {
    const notes = connect({ baseUrl: served.base, key: served.keys.notes, agent: "notes" });
    const record = await notes.tag({ data: { any: ["json", 1] } });
    assert.equal(record.kind, "artifact");
    assert.equal((await notes.tag({ kind: "whatever.v2", data: 3 })).kind, "whatever.v2");
    const answer = await notes.kinds();
    assert.deepEqual(answer.kinds, []);
    assert.equal(answer.agentTool, false);
  });
});

// TagInput, key by key: tsc holds these to the interface (every key, no other; the required ones).
const TAG_INPUT_KEYS: Record<keyof TagInput, true> = {
  kind: true,
  key: true,
  title: true,
  data: true,
  sessionId: true,
  turnId: true,
  source: true,
  contents: true,
  contentType: true,
  onProgress: true,
};
// The kit's own keys that are no field of the server's: how large contents report progress.
const KIT_ONLY = new Set(["onProgress"]);
// The contents travel as `contents` or `contentsBase64` (or a multipart part), and large ones as
// known contents or an upload, picked by the kit: one key here.
const CONTENTS_FIELDS = new Set(["contentsBase64", "upload", "contentsSha256", "contentsSize"]);
type RequiredKeys<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? never : K }[keyof T];
const TAG_INPUT_REQUIRED: Record<RequiredKeys<TagInput>, true> = { data: true };

describe("the tag's input against the server's schema", () => {
  test("TagInput names every field of the server's TagRequest and requires what it requires", async () => {
    const response = await fetch(`${served.base}/api/schema/?format=json`);
    assert.equal(response.status, 200);
    type Body = { properties: Record<string, unknown>; required: string[] };
    const schema = (await response.json()) as { components: { schemas: { TagRequest: Body } } };
    const request = schema.components.schemas.TagRequest;
    const fields = Object.keys(request.properties).filter((name) => !CONTENTS_FIELDS.has(name));
    const keys = Object.keys(TAG_INPUT_KEYS).filter((name) => !KIT_ONLY.has(name));
    assert.deepEqual(keys.sort(), fields.sort());
    assert.deepEqual(Object.keys(TAG_INPUT_REQUIRED).sort(), [...request.required].sort());
  });
});

describe("contents", () => {
  test("a string is stored as text, with its content type", async () => {
    const record = await client.tag({ kind: "report", data: "t", contents: "# hello", contentType: "text/markdown" });
    assert.equal(record.content?.contentType, "text/markdown");
    const content = await client.content(record.id);
    assert.equal(content.contentType, "text/markdown");
    assert.equal(await content.text(), "# hello");
  });

  test("small bytes go inline; their type defaults to application/octet-stream", async () => {
    const record = await client.tag({ kind: "report", data: "b", contents: new Uint8Array([0, 1, 2]) });
    assert.equal(record.content?.contentType, "application/octet-stream");
    assert.deepEqual(await (await client.content(record.id)).bytes(), new Uint8Array([0, 1, 2]));
  });

  test("big bytes, a file-backed Blob, a web stream and a Node stream all go multipart", async () => {
    const blob = randomBytes(5 * 1024 * 1024 + 7);
    const path = join(tmp, "big.bin");
    await writeFile(path, blob);
    const cases = [
      ["bytes", new Uint8Array(blob)],
      ["file", await openAsBlob(path)],
      ["web stream", (await openAsBlob(path)).stream()],
      ["node stream", Readable.from([blob.subarray(0, 1000), blob.subarray(1000)])],
    ] as const;
    for (const [name, contents] of cases) {
      const record = await client.tag({ kind: "report", key: unique(name.replace(" ", "-")), data: name, contents, contentType: "application/x-test" });
      assert.equal(record.content?.sha256, sha256(blob), name);
      assert.equal(record.content?.size, blob.length, name);
      assert.equal(record.content?.contentType, "application/x-test", name);
      const content = await client.content(record.id);
      assert.equal(content.sha256, sha256(blob));
      let size = 0;
      const hash = createHash("sha256");
      for await (const chunk of content.body) {
        hash.update(chunk);
        size += chunk.length;
      }
      assert.equal(size, blob.length);
      assert.equal(hash.digest("hex"), sha256(blob));
    }
  });

  test("a record without content answers 404 no_content", async () => {
    const record = await client.tag({ kind: "report", data: "none" });
    const error = await refusal(client.content(record.id));
    assert.equal(error.status, 404);
    assert.equal(error.code, "no_content");
  });
});

describe("list, sessions, forSession", () => {
  test("list follows every page, newest-updated first; page gives one and the next URL", async () => {
    const { id: sessionId } = await client.createSession();
    const made: string[] = [];
    for (let i = 0; i < 120; i++) made.push((await client.tag({ kind: "report", key: unique(`p${i}`), data: i, sessionId })).id);
    const listed = await client.list({ sessionId, pageSize: 50 });
    assert.deepEqual(listed.map((r) => r.id), made.reverse());
    const first = await client.page({ sessionId, limit: 50 });
    assert.equal(first.results.length, 50);
    assert.match(first.next!, /^http/);
    assert.deepEqual((await client.list({ sessionId, kind: "reviewed-pr" })).length, 0);
  });

  test("createSession, session and sessions", async () => {
    const id = unique("s");
    const made = await client.createSession({ id, owner: "uma" });
    assert.equal(made.id, id);
    assert.equal(made.owner, "uma");
    assert.equal((await client.session(id)).owner, "uma");
    assert.ok((await client.sessions()).some((s) => s.id === id));
    const taken = await refusal(client.createSession({ id }));
    assert.equal(taken.status, 409);
  });

  test("forSession fills sessionId and turnId, and lists only that session", async () => {
    const { id: sessionId } = await client.createSession();
    const artifacts = client.forSession(sessionId, { turnId: "t-3" });
    const url = unique("https://x/pull");
    const record = await artifacts.tag({ kind: "reviewed-pr", key: url, title: `Reviewed ${url}`, data: { url, verdict: "approve" } });
    assert.equal(record.sessionId, sessionId);
    assert.equal(record.turnId, "t-3");
    await client.tag({ kind: "reviewed-pr", key: unique("https://x/elsewhere"), data: { url: "elsewhere" } });
    assert.deepEqual((await artifacts.list({ kind: "reviewed-pr" })).map((r) => r.id), [record.id]);
    assert.equal((await artifacts.get(record.id)).id, record.id);
    const result = await artifacts.runTool({ artifact: { kind: "report", key: null, title: null, data: "by the model" } });
    assert.equal(result.record?.sessionId, sessionId);
    assert.equal(result.record?.turnId, "t-3");
    await artifacts.delete(record.id);
    assert.equal((await refusal(artifacts.get(record.id))).status, 404);
  });

  test("a user sees what its sessions hold and nothing else; it may not tag or delete", async () => {
    const { id: mine } = await client.createSession({ owner: "uma" });
    const { id: other } = await client.createSession();
    const seen = await client.tag({ kind: "report", data: "for uma", sessionId: mine });
    const hidden = await client.tag({ kind: "report", data: "not for uma", sessionId: other });
    const uma = connect({ baseUrl: served.base, key: served.userToken, agent: "reviewer" });
    assert.deepEqual(await uma.get(seen.id), seen);
    assert.deepEqual((await uma.list({ sessionId: mine })).map((r) => r.id), [seen.id]);
    assert.equal((await refusal(uma.get(hidden.id))).status, 404); // hidden and missing look the same
    assert.equal((await refusal(uma.delete(seen.id))).status, 403);
    const stan = connect({ baseUrl: served.base, key: served.staffToken, agent: "reviewer" });
    await stan.delete(hidden.id); // staff may delete
    assert.equal((await refusal(client.get(hidden.id))).status, 404);
  });
});

describe("search", () => {
  test("list takes q and where; where is typed by the kind's zod schema", async () => {
    const url = unique("https://x/search");
    const approved = await client.tag({ kind: "reviewed-pr", key: url, data: { url, verdict: "approve" } });
    const words = unique("kumquat").replace("-", " ");
    const report = await client.tag({ kind: "report", data: { note: words, score: 7 } });
    assert.deepEqual((await client.list({ q: words })).map((r) => r.id), [report.id]);
    const typed = await client.list({ kind: "reviewed-pr", where: { url, verdict: { $in: ["approve", "reject"] } } });
    assert.deepEqual(typed.map((r) => r.id), [approved.id]);
    const loose = await client.list({ kind: "report", where: { score: { $gte: 7 }, note: words } });
    assert.deepEqual(loose.map((r) => r.id), [report.id]);
    const text = await client.page({ where: JSON.stringify({ url }) });
    assert.deepEqual(text.results.map((r) => r.id), [approved.id]);
    // @ts-expect-error: `verdict` is a string in the kind's schema
    await client.list({ kind: "reviewed-pr", where: { verdict: 3 } });
    // @ts-expect-error: the kind's schema has no `score`
    await client.list({ kind: "reviewed-pr", where: { score: 1 } });
    const error = await refusal(client.list({ where: { "a[0]": 1 } }));
    assert.equal(error.status, 400);
    assert.equal(error.code, "invalid_query");
    assert.deepEqual(error.details, { field: "where", part: "a[0]" });
  });
});

describe("the model's tool", () => {
  test("tool answers each provider's definition", async () => {
    const anthropic = await client.tool();
    assert.equal(anthropic.name, "tag_artifact");
    assert.ok(anthropic.input_schema);
    assert.equal((await client.tool("openai") as { function: { strict: boolean } }).function.strict, true);
    assert.equal((await client.tool("openai-responses")).strict, true);
    const error = await refusal(client.tool("gemini" as never));
    assert.equal(error.status, 400);
    assert.equal(error.code, "unknown_format");
  });

  test("runTool tags as the model; the model's mistakes come back as results, the host's are thrown", async () => {
    const key = unique("https://x/pull");
    const call = { artifact: { kind: "reviewed-pr", key, title: null, data: { url: key, verdict: "approve" } } };
    const result = await client.runTool(call, { turnId: "t-1" });
    assert.ok(result.ok && result.created);
    assert.equal(result.record?.source, "model");
    assert.equal(result.content, `Tagged reviewed-pr artifact ${result.record?.id}, version 1 (created).`);
    assert.deepEqual(result.anthropic("toolu_1"), { type: "tool_result", tool_use_id: "toolu_1", content: result.content });
    const replaced = await client.runTool(JSON.stringify(call)); // OpenAI's JSON text as it is
    assert.equal(replaced.created, false);
    assert.equal(replaced.content, `Tagged reviewed-pr artifact ${result.record?.id}, version 2 (replaced the artifact with this key).`);
    assert.deepEqual(replaced.openai("call_1"), { role: "tool", tool_call_id: "call_1", content: replaced.content });
    const refused = await client.runTool({ artifact: { ...call.artifact, data: { verdict: "x" } } });
    assert.ok(refused.isError);
    assert.equal((refused.details as { field: string }).field, "artifact.data.url");
    assert.match(refused.content, /^Not tagged: `artifact\.data\.url`/);
    assert.equal(refused.anthropic("toolu_2").is_error, true);
    assert.equal(refused.openaiResponses("fc_1").type, "function_call_output");
    const host = await refusal(client.runTool(call, { sessionId: "s-missing" }));
    assert.equal(host.code, "unknown_session");
  });
});

describe("refusals", () => {
  const cases: [string, () => Promise<unknown>, number, string | null][] = [
    ["bad token", () => connect({ baseUrl: served.base, key: "aak_nope_nope", agent: "reviewer" }).kinds(), 401, "invalid_token"],
    ["user tags", () => connect({ baseUrl: served.base, key: served.userToken, agent: "reviewer" }).tag({ kind: "report", data: "x" }), 403, "forbidden"],
    ["another agent's key", () => connect({ baseUrl: served.base, key: served.keys.notes, agent: "reviewer" }).list(), 403, null],
    ["staff runs the tool", () => connect({ baseUrl: served.base, key: served.staffToken, agent: "reviewer" }).runTool({ artifact: {} }), 403, "forbidden"],
    ["missing record", () => client.get("art_missing"), 404, "unknown_artifact"],
    ["unknown agent", () => connect({ baseUrl: served.base, key: served.keys.reviewer, agent: "nosuch" }).kinds(), 404, "unknown_agent"],
    ["unknown kind", () => client.tag({ kind: "nope", data: "x" }), 400, "unknown_kind"],
    ["null data", () => client.tag({ kind: "report", data: null }), 400, "data_required"],
    ["bad session id", () => client.createSession({ id: "s bad" }), 400, "invalid_session_id"],
    ["data over 1 MiB", () => client.tag({ kind: "report", data: "x".repeat(1024 * 1024 + 1) }), 413, "data_too_large"],
  ];
  for (const [name, call, status, code] of cases) {
    test(`${name}: ${status}${code ? ` ${code}` : ""}, with a message`, async () => {
      const error = await refusal(call());
      assert.equal(error.status, status, error.message);
      if (code) assert.equal(error.code, code);
      assert.ok(error.message.length > 10);
    });
  }

  test("413 names the limit in its message and details", async () => {
    const error = await refusal(client.tag({ kind: "report", data: "x".repeat(1024 * 1024 + 1) }));
    assert.match(error.message, /ARTIFACTS_MAX_DATA_BYTES/);
    assert.equal((error.details as { limit: number }).limit, 1024 * 1024);
  });

  test("a refused connection is retried, then reported as connection_error", async () => {
    const listener = createServer().listen(0, "127.0.0.1");
    await once(listener, "listening");
    const port = (listener.address() as { port: number }).port;
    await new Promise((done) => listener.close(done)); // nothing listens there now
    const dead = connect({ baseUrl: `http://127.0.0.1:${port}`, key: "k", agent: "reviewer", retries: 2, backoffMs: 5 });
    const error = await refusal(dead.tag({ kind: "report", data: "x" }));
    assert.equal(error.code, "connection_error");
    assert.match(error.message, /3 attempt/);
  });
});

describe("subscribe", () => {
  test("a session's stream replays what was stored, then continues live with no gap", async () => {
    const { id: sessionId } = await client.createSession();
    const before = [unique("before"), unique("before"), unique("before")];
    for (const key of before) await client.tag({ kind: "report", key, data: "b", sessionId });
    const stream = client.subscribe({ sessionId, after: 0 });
    const replayed = await tagged(stream, before);
    const later = [unique("after"), unique("after"), unique("after")];
    for (const key of later) await client.tag({ kind: "report", key, data: "a", sessionId });
    const live = await tagged(stream, later);
    await stream.return();
    const events = [...replayed, ...live];
    assert.deepEqual(events.map((e) => e.record?.key), [...before, ...later]);
    const seqs = events.map((e) => e.seq!);
    assert.deepEqual(seqs, Array.from({ length: 6 }, (_, i) => seqs[0]! + i)); // consecutive, none twice
  });

  test("a dropped connection reconnects with after and misses nothing", async () => {
    const proxy = await new CuttingProxy(served.port).start();
    try {
      const { id: sessionId } = await client.createSession();
      const stream = subscribe(`${proxy.ws}/reviewer/v1/sessions/${sessionId}/events`, served.keys.reviewer, {
        after: 0,
        maxBackoffMs: 200,
      });
      const first = unique("first");
      await client.tag({ kind: "report", key: first, data: 1, sessionId });
      const [one] = await tagged(stream, [first]);
      proxy.cut(); // the network fails under the open stream
      const during = [unique("during"), unique("during"), unique("during")];
      for (const key of during) await client.tag({ kind: "report", key, data: 2, sessionId });
      const rest = await tagged(stream, during);
      await stream.return();
      assert.ok(proxy.connections >= 2, "it reconnected");
      assert.deepEqual(rest.map((e) => e.record?.key), during);
      assert.deepEqual(rest.map((e) => e.seq), [one!.seq! + 1, one!.seq! + 2, one!.seq! + 3]);
    } finally {
      await proxy.close();
    }
  });

  test("aborting the signal ends the stream, even while a next() waits", async () => {
    const controller = new AbortController();
    const stream = client.subscribe({ signal: controller.signal });
    const waiting = stream.next();
    setTimeout(() => controller.abort(), 200);
    assert.deepEqual(await waiting, { value: undefined, done: true });
  });

  test("refused streams throw with the close code: 4401 bad credentials, 4403 not allowed", async () => {
    const bad = await refusal(subscribe(`${served.ws}/reviewer/v1/events`, "aak_nope_nope").next());
    assert.equal(bad.status, 4401);
    assert.equal(bad.code, "unauthorized");
    const user = connect({ baseUrl: served.base, key: served.userToken, agent: "reviewer" });
    const forbidden = await refusal(user.subscribe().next()); // the agent's stream is not a user's
    assert.equal(forbidden.status, 4403);
    assert.equal(forbidden.code, "forbidden");
  });

  test("past the server's limit of failed authentications a stream is refused with 4408, not retried", async () => {
    // A server of its own that allows one failure per address: the shared one must keep its count.
    const strict = await startServer({ ARTIFACTS_AUTH_FAILURE_LIMIT: "1" });
    try {
      const url = `${strict.ws}/reviewer/v1/events`;
      assert.equal((await refusal(subscribe(url, "aak_nope_nope").next())).status, 4401);
      const limited = await refusal(subscribe(url, "aak_nope_nope").next());
      assert.equal(limited.status, 4408);
      assert.equal(limited.code, "too_many_attempts");
      // A good key from the same address goes on: the stream stays open (no events to send).
      const controller = new AbortController();
      const first = subscribe(url, strict.keys.reviewer, { signal: controller.signal }).next();
      const open = new Promise((done) => setTimeout(() => done("open"), 500));
      assert.equal(await Promise.race([first.then(() => "ended"), open]), "open");
      controller.abort();
      assert.deepEqual(await first, { value: undefined, done: true });
    } finally {
      await strict.stop();
    }
  });
});

describe("captureTurn", () => {
  test("captures what the turn tagged, fills its turnId, and keeps concurrent turns apart", async () => {
    const { id: sessionId } = await client.createSession();
    await client.tag({ kind: "reviewed-pr", key: unique("https://x/before"), data: { url: "before" }, sessionId });
    const url = unique("https://x/pull");
    const runTheAgentTurn = async () => {
      await new Promise((resolve) => setTimeout(resolve, 10)); // async work the turn started
      await client.runTool({ artifact: { kind: "reviewed-pr", key: url, title: null, data: { url, verdict: "approve" } } });
      await client.forSession(sessionId).tag({ kind: "report", data: "notes" });
    };
    const [turn, other] = await Promise.all([
      client.captureTurn({ turnId: "t-3", sessionId }, runTheAgentTurn),
      client.captureTurn({ turnId: "t-4" }, async () => {
        await client.tag({ kind: "report", data: "the other turn" });
      }),
    ]);
    assert.ok(turn.taggedArtifact("reviewed-pr", (record) => record.source === "model"));
    assert.ok(!turn.taggedArtifact("reviewed-pr", (record) => record.source === "host"));
    assert.ok(turn.taggedArtifact("report"));
    assert.ok(turn.taggedArtifact());
    assert.deepEqual(turn.records.map((r) => [r.kind, r.turnId, r.sessionId]), [
      ["reviewed-pr", "t-3", sessionId],
      ["report", "t-3", sessionId],
    ]);
    assert.deepEqual(other.records.map((r) => [r.data, r.turnId]), [["the other turn", "t-4"]]);
    assert.ok(!other.taggedArtifact("reviewed-pr"));
    const outside = await client.tag({ kind: "report", data: "outside" });
    assert.equal(outside.turnId, null);
  });
});

// The types: what defineArtifacts declares shapes what tag accepts (checked by tsc, not at run time).
export function typeChecks(c: ArtifactsClient<typeof kinds>, spec: ArtifactsSpec) {
  void c.tag({ kind: "reviewed-pr", data: { url: "u" } });
  // @ts-expect-error: `url` is required by the kind's schema
  void c.tag({ kind: "reviewed-pr", data: { verdict: "x" } });
  void c.tag({ kind: "free-kind", data: 42 });
  void spec;
}
