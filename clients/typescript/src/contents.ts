import { createWriteStream, openAsBlob } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";

/** Bytes up to this size go inline (base64 in the JSON body); bigger ones, and streams, go multipart. */
const INLINE_LIMIT = 4 * 1024 * 1024;

/** Contents of a tag: text, bytes, a Blob (e.g. `fs.openAsBlob(path)`, streamed from disk), or a stream. */
export type Contents =
  | string
  | Uint8Array
  | Blob
  | WebReadableStream<Uint8Array>
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array>;

function isAsyncIterable(value: unknown): value is AsyncIterable<Uint8Array> {
  return value != null && typeof (value as AsyncIterable<Uint8Array>)[Symbol.asyncIterator] === "function";
}

/** How a tag's body is sent: JSON (contents inline) or a multipart form (a file part, streamed). */
export interface BodyCall {
  json?: unknown;
  form?: () => Promise<FormData>;
  retry: boolean;
}

/** Runs `run` with the tag's body built for `contents`: inline for text and small bytes,
 * multipart for big bytes, Blobs and streams (a stream is spooled to a temporary file first). */
export async function withContents<T>(
  contents: Contents | undefined,
  body: Record<string, unknown>,
  run: (call: BodyCall) => Promise<T>,
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

