import WebSocket from "ws";
import { ArtifactsError } from "./errors.js";
import type { ArtifactEvent } from "./records.js";

/**
 * Close codes after which reconnecting cannot help: bad `after`, bad credentials, not allowed, no
 * such stream, too many failed authentications from this address (retrying would only extend it).
 */
const FINAL: Record<number, string> = {
  4400: "bad_request",
  4401: "unauthorized",
  4403: "forbidden",
  4404: "not_found",
  4408: "too_many_attempts",
};
/** The server closed with this because we read too slowly: reconnect at once. */
const LAGGING = 4429;
/** Unread messages held before the socket is paused (the server then sees a slow reader). */
const HIGH_WATER = 1000;

export interface SubscribeOptions {
  /** Replay the stored events after this seq first (0: everything still stored), then go live. */
  after?: number;
  /** The longest wait between reconnection attempts (default 5000 ms). */
  maxBackoffMs?: number;
  /** Aborting it closes the stream: the iterator then ends, even while a `next()` is waiting. */
  signal?: AbortSignal;
}

function withAfter(url: string, after: number | undefined): string {
  const parsed = new URL(url);
  parsed.searchParams.delete("after");
  if (after !== undefined) parsed.searchParams.set("after", String(after));
  return parsed.toString();
}

/**
 * An event stream (`ws://host/<slug>/v1/events` or `…/sessions/<id>/events`) as an async iterator
 * that never ends by itself: it remembers the last `seq` it yielded, and when the connection drops
 * (network, server restart, 4429 for reading too slowly) it reconnects with `?after=<that seq>`, so
 * nothing is missed or repeated. A refusal (4400, 4401, 4403, 4404, 4408) throws `ArtifactsError` with
 * the close code as `status`. `break` out of the loop, or abort `signal` (which also ends a
 * `next()` that is waiting for an event), to close it.
 *
 * Node 20 has no WebSocket of its own, and a platform WebSocket cannot send an `Authorization`
 * header in any case (API.md never takes a token in the URL): this uses the `ws` package.
 */
export async function* subscribe(
  url: string,
  token: string | null,
  options: SubscribeOptions = {},
): AsyncGenerator<ArtifactEvent, void, undefined> {
  let after = options.after;
  const signal = options.signal;
  const maxBackoff = options.maxBackoffMs ?? 5000;
  let backoff = 100;
  while (!signal?.aborted) {
    const socket = new WebSocket(withAfter(url, after), {
      headers: token ? { Authorization: `Bearer ${token}` } : {},
      maxPayload: 2 ** 24,
    });
    const queue: ArtifactEvent[] = [];
    let closed: { code: number; reason: string } | null = null;
    let wake: (() => void) | null = null;
    const notify = () => {
      const resolve = wake;
      wake = null;
      resolve?.();
    };
    socket.on("message", (raw) => {
      queue.push(JSON.parse(raw.toString()) as ArtifactEvent);
      if (queue.length >= HIGH_WATER) socket.pause();
      notify();
    });
    socket.on("close", (code, reason) => {
      closed = { code, reason: reason.toString() };
      notify();
    });
    socket.on("error", () => {
      /* a "close" follows every error: decided there */
    });
    const abort = () => {
      socket.terminate();
      notify();
    };
    signal?.addEventListener("abort", abort, { once: true });
    try {
      for (;;) {
        const message = queue.shift();
        if (message !== undefined) {
          if (queue.length < HIGH_WATER / 2 && socket.isPaused) socket.resume();
          const seq = (message as { seq?: unknown }).seq;
          if (typeof seq === "number") {
            if (after !== undefined && seq <= after) continue;
            after = seq;
          }
          backoff = 100;
          yield message;
          continue;
        }
        if (closed || signal?.aborted) break;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      signal?.removeEventListener("abort", abort);
      if (!closed) socket.terminate();
    }
    if (signal?.aborted) return;
    const { code, reason } = closed as unknown as { code: number; reason: string };
    if (code in FINAL) {
      throw new ArtifactsError(FINAL[code]!, reason || `The stream was refused (${code}).`, {
        status: code,
        details: { closeCode: code },
      });
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, code === LAGGING ? 0 : backoff);
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        resolve();
      }
      signal?.addEventListener("abort", done, { once: true });
    });
    backoff = Math.min(backoff * 2, maxBackoff);
  }
}
