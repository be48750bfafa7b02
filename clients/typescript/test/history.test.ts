/** Versions, pins, diffs, restore, declare and the `moved` event, against a real daphne. */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { z } from "zod";

import { ArtifactsError, type ArtifactEvent, type ArtifactsClient, type ArtifactRecord, connect, defineArtifacts } from "agent-artifacts";

import { type Served, startServer } from "./server.js";

let served: Served;
let client: ArtifactsClient;

const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 10)}`;

async function refusal(promise: Promise<unknown>): Promise<ArtifactsError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ArtifactsError, `expected an ArtifactsError, got ${error}`);
    return error;
  }
  assert.fail("expected a refusal");
}

/** A keyed record tagged three times: v1 with content, v2 a new verdict, v3 a new title and bytes. */
async function history(): Promise<ArtifactRecord> {
  const url = unique("https://x/pull");
  await client.tag({ kind: "reviewed-pr", key: url, data: { url, verdict: "comment" }, contents: "first" });
  await client.tag({ kind: "reviewed-pr", key: url, data: { url, verdict: "approve" } });
  return client.tag({
    kind: "reviewed-pr", key: url, title: "T", data: { url, verdict: "approve" },
    contents: new Uint8Array([0, 116, 104]), contentType: "application/x-bin",
  });
}

before(async () => {
  served = await startServer();
  client = connect({ baseUrl: served.base, key: served.keys.reviewer, agent: "reviewer", backoffMs: 10 });
});

after(async () => {
  await served?.stop();
});

describe("versions", () => {
  test("versions lists newest first, each as its tag stored it; version and its content", async () => {
    const record = await history();
    assert.equal(record.version, 3);
    assert.equal(record.pinned, false);
    const versions = await client.versions(record.id, { pageSize: 2 }); // walks the pages
    assert.deepEqual(versions.map((v) => v.version), [3, 2, 1]);
    assert.equal((versions[2]!.data as { verdict: string }).verdict, "comment");
    assert.equal(versions[0]!.title, "T");
    assert.deepEqual(await client.version(record.id, 1), versions[2]);
    assert.equal(await (await client.content(record.id, { version: 1 })).text(), "first");
    assert.equal(await (await client.content(record.id, { version: 2 })).text(), "first"); // a re-tag keeps it
    assert.deepEqual(await (await client.content(record.id, { version: 3 })).bytes(), new Uint8Array([0, 116, 104]));
    const session = client.forSession((await client.createSession()).id);
    assert.deepEqual((await session.versions(record.id)).map((v) => v.version), [3, 2, 1]);
    assert.equal((await session.version(record.id, 2)).version, 2);
  });

  test("diff names the fields that changed and patches data", async () => {
    const record = await history();
    const diff = await client.diff(record.id, 3);
    assert.deepEqual([diff.from, diff.to], [2, 3]);
    assert.deepEqual(diff.fields.title, { from: null, to: "T" });
    assert.ok(diff.fields.content);
    assert.deepEqual(diff.data, []);
    const older = await client.diff(record.id, 3, { from: 1 });
    assert.equal(older.from, 1);
    assert.deepEqual(older.data, [{ op: "replace", path: "/verdict", value: "approve" }]);
  });

  test("restore makes a new version from an old one", async () => {
    const record = await history();
    const restored = await client.restore(record.id, 1);
    assert.equal(restored.version, 4);
    assert.equal((restored.data as { verdict: string }).verdict, "comment");
    assert.equal(restored.source, "host");
    assert.deepEqual((await client.versions(record.id)).map((v) => v.version), [4, 3, 2, 1]);
  });

  const refusals: [string, (id: string) => Promise<unknown>, number, string][] = [
    ["version 0", (id) => client.version(id, 0), 400, "invalid_version"],
    ["a version past the history", (id) => client.version(id, 99), 404, "unknown_version"],
    ["versions of a missing record", () => client.versions("art_missing"), 404, "unknown_artifact"],
    ["diff from 0", (id) => client.diff(id, 3, { from: 0 }), 400, "invalid_version"],
    ["restore of a missing version", (id) => client.restore(id, 99), 404, "unknown_version"],
    ["content of a missing version", (id) => client.content(id, { version: 99 }), 404, "unknown_version"],
    ["pin of a missing record", () => client.pin("art_missing"), 404, "unknown_artifact"],
  ];
  for (const [name, call, status, code] of refusals) {
    test(`${name}: ${status} ${code}`, async () => {
      const record = await history();
      const error = await refusal(call(record.id));
      assert.equal(error.status, status, error.message);
      assert.equal(error.code, code);
      assert.ok(error.message.length > 10);
    });
  }

  test("a version number that is not a whole number is refused before sending", async () => {
    const error = await refusal(client.version("art_x", 1.5));
    assert.equal(error.code, "invalid_version");
    assert.equal(error.status, undefined);
  });

  test("a user reads the history of its own sessions but may not restore or pin; staff may pin", async () => {
    const { id: sessionId } = await client.createSession({ owner: "uma" });
    const key = unique("mine");
    const record = await client.tag({ kind: "report", key, data: "a", sessionId });
    await client.tag({ kind: "report", key, data: "b", sessionId });
    const uma = connect({ baseUrl: served.base, key: served.userToken, agent: "reviewer" });
    assert.deepEqual((await uma.versions(record.id)).map((v) => v.data), ["b", "a"]);
    assert.equal((await refusal(uma.restore(record.id, 1))).status, 403);
    assert.equal((await refusal(uma.pin(record.id))).status, 403);
    const stan = connect({ baseUrl: served.base, key: served.staffToken, agent: "reviewer" });
    assert.equal((await stan.pin(record.id)).pinned, true);
    assert.equal((await stan.unpin(record.id)).pinned, false);
    assert.equal((await refusal(stan.restore(record.id, 1))).status, 403);
  });
});

describe("pins", () => {
  test("a pinned record is never evicted; with every record pinned a new one is refused 409", async () => {
    const tiny = connect({ baseUrl: served.base, key: served.keys.tiny, agent: "tiny" }); // max 2
    for (const record of await tiny.list()) await tiny.delete(record.id);
    const first = await tiny.tag({ key: unique("a"), data: 1 });
    const second = await tiny.tag({ key: unique("b"), data: 2 });
    assert.equal((await tiny.pin(first.id)).pinned, true);
    assert.equal((await tiny.pin(first.id)).pinned, true); // twice is still pinned
    const third = await tiny.tag({ key: unique("c"), data: 3 }); // evicts the unpinned one
    assert.deepEqual(new Set((await tiny.list()).map((r) => r.id)), new Set([first.id, third.id]));
    assert.equal((await refusal(tiny.get(second.id))).status, 404);
    await tiny.pin(third.id);
    const full = await refusal(tiny.tag({ key: unique("d"), data: 4 }));
    assert.equal(full.status, 409);
    assert.equal(full.code, "cap_reached");
    assert.deepEqual(new Set((await tiny.list()).map((r) => r.id)), new Set([first.id, third.id]));
    assert.equal((await tiny.unpin(third.id)).pinned, false);
    assert.equal((await tiny.tag({ key: unique("e"), data: 5 })).pinned, false);
  });
});

describe("the moved event", () => {
  test("a record moved to another session leaves the old session's stream as moved, without its new data", async () => {
    const { id: old } = await client.createSession();
    const { id: next } = await client.createSession();
    const key = unique("mover");
    await client.tag({ kind: "report", key, data: "in old", sessionId: old });
    await client.tag({ kind: "report", key, data: "secret of next", sessionId: next });
    const marker = unique("marker"); // the last event of the old session: read until it comes
    await client.tag({ kind: "report", key: marker, data: "m", sessionId: old });
    const seen: ArtifactEvent[] = [];
    for await (const event of client.subscribe({ sessionId: old, after: 0 })) {
      seen.push(event);
      if (event.type === "artifact.tagged" && event.record.key === marker) break;
    }
    const mine = seen.filter((e) => e.type !== "replay.truncated" && e.record.key === key);
    assert.deepEqual(
      mine.map((e) => [e.type, e.type === "artifact.deleted" ? e.reason : null]),
      [["artifact.tagged", null], ["artifact.deleted", "moved"]],
    );
    assert.ok(seen.every((e) => e.type !== "artifact.tagged" || e.record.data !== "secret of next"));
    for await (const event of client.subscribe({ sessionId: next, after: 0 })) {
      assert.equal(event.type, "artifact.tagged");
      if (event.type === "artifact.tagged") assert.equal(event.record.data, "secret of next");
      break;
    }
  });
});

describe("declare", () => {
  const kinds = defineArtifacts({
    kinds: {
      "reviewed-pr": {
        description: "A pull request this agent reviewed.",
        schema: z.object({ url: z.string(), verdict: z.string().default("comment") }),
        keepVersions: 3,
      },
      report: { description: "A generated report." },
    },
    agentTool: true,
    max: 50,
    keepVersions: 5,
  });

  test("declare sends the zod schemas as JSON Schema; the server then validates and fills defaults", async () => {
    const declared = connect({ baseUrl: served.base, key: served.keys.declared, agent: "declared", kinds });
    const answer = await declared.declare();
    assert.deepEqual(answer.kinds.map((k) => k.name).sort(), ["report", "reviewed-pr"]);
    assert.equal(answer.max, 50);
    assert.equal(answer.agentTool, true);
    const schema = answer.kinds.find((k) => k.name === "reviewed-pr")!.schema as { required: string[] };
    assert.deepEqual(schema.required, ["url"]);
    assert.deepEqual(await declared.kinds(), answer);
    // A client without the zod schemas still gets the server's defaults and refusals.
    const bare = connect({ baseUrl: served.base, key: served.keys.declared, agent: "declared" });
    const url = unique("https://x/pull");
    assert.deepEqual((await bare.tag({ kind: "reviewed-pr", key: url, data: { url } })).data, { url, verdict: "comment" });
    const refused = await refusal(bare.tag({ kind: "reviewed-pr", data: { verdict: "x" } }));
    assert.equal(refused.code, "schema_invalid");
    assert.deepEqual((refused.details as { loc: unknown[] }[]).map((d) => d.loc), [["url"]]);
    assert.equal((await refusal(bare.tag({ kind: "other", data: 1 }))).code, "unknown_kind");
    assert.equal((await bare.tool("openai") as { function: { strict: boolean } }).function.strict, true);
    for (let i = 0; i < 4; i++) await bare.tag({ kind: "reviewed-pr", key: url, data: { url, verdict: `v${i}` } });
    assert.deepEqual((await bare.versions((await bare.list({ key: url }))[0]!.id)).map((v) => v.version), [5, 4, 3]);
  });

  test("declare is refused for an agent declared in code (409) and for a bad schema (400)", async () => {
    const inCode = await refusal(connect({ baseUrl: served.base, key: served.keys.reviewer, agent: "reviewer", kinds }).declare());
    assert.equal(inCode.status, 409);
    assert.equal(inCode.code, "kinds_in_code");
    const declared = connect({ baseUrl: served.base, key: served.keys.declared, agent: "declared" });
    const remote = await refusal(
      declared.declare({ kinds: { x: { description: "x", schema: z.object({}).meta({ $ref: "https://example.com/s.json" }) } } }),
    );
    assert.equal(remote.status, 400);
    assert.equal(remote.code, "invalid_schema");
    const user = connect({ baseUrl: served.base, key: served.userToken, agent: "declared" });
    assert.equal((await refusal(user.declare(kinds))).status, 403);
  });

  test("a zod schema JSON Schema cannot express is refused before sending", async () => {
    const declared = connect({ baseUrl: served.base, key: served.keys.declared, agent: "declared" });
    const error = await refusal(declared.declare({ kinds: { when: { description: "A date.", schema: z.date() } } }));
    assert.equal(error.code, "invalid_schema");
    assert.equal(error.status, undefined);
    assert.match(error.message, /"when"/);
  });
});
