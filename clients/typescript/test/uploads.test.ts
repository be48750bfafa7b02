/** Large contents (API.md "Large contents") against a real daphne: tus-js-client, unchanged, and
 * the kit's own road — known contents first, else a resumable upload that goes on after a
 * dropped connection. */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { after, before, test } from "node:test";

import * as tus from "tus-js-client";

import { connect } from "agent-artifacts";

import { BudgetProxy } from "./proxy.js";
import { type Served, startServer } from "./server.js";

const MiB = 1024 * 1024;
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

let served: Served;

before(async () => {
  served = await startServer();
});

after(async () => {
  await served?.stop();
});

test("tus-js-client uploads in chunks, and one tag uses the upload", async () => {
  const data = randomBytes(5 * MiB + 7);
  const url = await new Promise<string>((done, fail) => {
    const upload = new tus.Upload(data, {
      endpoint: `${served.base}/notes/v1/uploads`,
      headers: { Authorization: `Bearer ${served.keys.notes}` },
      chunkSize: MiB,
      metadata: { contentType: "text/csv", filename: "rows.csv" },
      retryDelays: [0, 200, 500],
      onError: fail,
      onSuccess: () => done(upload.url as string),
    });
    upload.start();
  });
  const response = await fetch(`${served.base}/notes/v1/artifacts`, {
    method: "POST",
    headers: { Authorization: `Bearer ${served.keys.notes}`, "Content-Type": "application/json" },
    body: JSON.stringify({ data: { rows: 1 }, upload: url.slice(url.lastIndexOf("/") + 1) }),
  });
  assert.equal(response.status, 201, await response.clone().text());
  const record = (await response.json()) as { content: { sha256: string; contentType: string } };
  assert.equal(record.content.sha256, sha256(data));
  assert.equal(record.content.contentType, "text/csv");
});

test("the kit sends large contents resumably, and known contents not at all", async () => {
  const data = randomBytes(20 * MiB);
  const proxy = await new BudgetProxy(served.port, 12 * MiB).start(); // mid-way through a PATCH
  const progress: number[] = [];
  try {
    const client = connect({ baseUrl: proxy.base, key: served.keys.notes, agent: "notes", uploadThreshold: MiB });
    const record = await client.tag({
      key: "big-ts-1",
      data: { run: 1 },
      contents: data,
      contentType: "application/x-parquet",
      onProgress: (held) => progress.push(held),
    });
    assert.equal(record.content?.sha256, sha256(data));
    assert.equal(record.content?.contentType, "application/x-parquet");
  } finally {
    await proxy.close();
  }
  assert.equal(proxy.cuts, 1);
  assert.equal(progress.at(-1), data.length);
  const watched = await new BudgetProxy(served.port, 4 * MiB).start(); // would cut an upload
  try {
    const client = connect({ baseUrl: watched.base, key: served.keys.notes, agent: "notes", uploadThreshold: MiB });
    const again = await client.tag({ key: "big-ts-2", data: { run: 2 }, contents: new Blob([data]) });
    assert.equal(again.content?.sha256, sha256(data));
  } finally {
    await watched.close();
  }
  assert.equal(watched.cuts, 0);
});
