import { createWriteStream, openAsBlob } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { createHash } from "node:crypto";

import { ArtifactsError, errorFrom } from "./errors.js";
import type { ArtifactRecord } from "./records.js";

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


/** Large contents' progress: bytes the server holds, and bytes in all. */
export type Progress = (held: number, total: number) => void;

const UPLOAD_CHUNK = 16 * 1024 * 1024;
const UPLOAD_RESUMES = 5;
const TUS = { "Tus-Resumable": "1.0.0" };

/** Bytes or a Blob past `threshold`, as a Blob (sliced, never read whole); else undefined. */
export function largeContents(contents: Contents | undefined, threshold: number): Blob | undefined {
  if (contents instanceof Uint8Array && contents.byteLength > threshold) return new Blob([contents]);
  if (contents instanceof Blob && contents.size > threshold) return contents;
  return undefined;
}

interface Uploading {
  post: (call: { json: unknown; retry: boolean }) => Promise<ArtifactRecord>;
  uploads: string;
  key: string;
  contentType?: string;
  onProgress?: Progress;
}

async function blobSha256(blob: Blob): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of Readable.fromWeb(blob.stream() as WebReadableStream<Uint8Array>)) {
    hash.update(chunk as Uint8Array);
  }
  return hash.digest("hex");
}

/** API.md "Large contents": known contents first (nothing sent when the agent stores them), else
 * a tus upload in chunks that goes on from the server's offset after a dropped connection, then
 * the tag that uses it. */
export async function uploadLarge(
  blob: Blob,
  body: Record<string, unknown>,
  how: Uploading,
): Promise<ArtifactRecord> {
  const size = blob.size;
  const sha = await blobSha256(blob);
  try {
    const record = await how.post({ json: { ...body, contentsSha256: sha, contentsSize: size }, retry: true });
    how.onProgress?.(size, size);
    return record;
  } catch (error) {
    if (!(error instanceof ArtifactsError) || error.code !== "contents_unknown") throw error;
  }
  const auth = { Authorization: `Bearer ${how.key}`, Accept: "application/json", ...TUS };
  const metadata = [["filename", "contents"], ["contentType", how.contentType]]
    .filter(([, value]) => value)
    .map(([name, value]) => `${name} ${Buffer.from(value as string).toString("base64")}`)
    .join(",");
  const made = await fetch(how.uploads, {
    method: "POST",
    headers: { ...auth, "Upload-Length": String(size), ...(metadata ? { "Upload-Metadata": metadata } : {}) },
  });
  if (made.status !== 201) throw await errorFrom(made);
  const url = new URL(made.headers.get("Location") ?? "", how.uploads).toString();
  const offsetNow = async () => {
    const head = await fetch(url, { method: "HEAD", headers: auth });
    if (head.status !== 200) throw await errorFrom(head);
    return Number(head.headers.get("Upload-Offset"));
  };
  let offset = 0;
  let resumes = 0;
  while (offset < size) {
    const end = Math.min(offset + UPLOAD_CHUNK, size);
    let response: Response;
    try {
      response = await fetch(url, {
        method: "PATCH",
        headers: { ...auth, "Upload-Offset": String(offset), "Content-Type": "application/offset+octet-stream" },
        body: blob.slice(offset, end),
      });
    } catch (error) {
      if (resumes >= UPLOAD_RESUMES) {
        throw new ArtifactsError("connection_error", `The upload broke off ${resumes + 1} times; give up.`, {
          cause: error,
        });
      }
      resumes++;
      // What reached the server is kept: ask where it stands and go on from there.
      offset = await offsetNow();
      continue;
    }
    if (response.status === 409 || response.status === 423) {
      await response.body?.cancel();
      offset = await offsetNow();
      continue;
    }
    if (response.status !== 204) throw await errorFrom(response);
    offset = Number(response.headers.get("Upload-Offset"));
    how.onProgress?.(offset, size);
  }
  const upload = url.slice(url.lastIndexOf("/") + 1);
  return how.post({ json: { ...body, upload }, retry: true });
}
