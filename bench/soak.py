"""A soak of the production stack: tags at a steady rate through nginx for minutes, with a live
subscriber, measuring latency, errors and each server process's memory from start to end
(docs/benchmarks.md "Soak through nginx").

    bin/deploy-check -- .venv/bin/python bench/soak.py [--seconds 300] [--rate 20]

bin/deploy-check starts the stack (nginx with TLS in front of two daphnes on PostgreSQL, Redis and
S3, all from deploy/) and runs this against it instead of its checks. Each tag carries 1 KiB of
contents (so the bucket is written too) and goes through nginx, spread over the two daphnes; one
websocket subscriber through nginx counts the events and their lag; a webhook receives them too
when the version has webhooks. Memory is each daphne's RSS (and its PostgreSQL backends' are not
counted), sampled every 30 s; the first sample is taken after a 15 s warm-up at the same rate.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from websockets.sync.client import connect

AGENT = "deploycheck"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=300)
    parser.add_argument("--rate", type=float, default=20.0, help="tags per second")
    parser.add_argument("--warmup", type=int, default=15)
    args = parser.parse_args()

    base = os.environ["DEPLOY_CHECK_BASE"]
    ca = os.environ["DEPLOY_CHECK_CA"]
    key = os.environ["DEPLOY_CHECK_AGENT_KEY"]
    pids = [int(p) for p in os.environ["DEPLOY_CHECK_PIDS"].split()]
    auth = {"Authorization": f"Bearer {key}"}
    local = threading.local()

    def client() -> httpx.Client:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=base, verify=ca, timeout=30)
        return local.client

    sent_at: dict[str, float] = {}
    results: list[tuple[float, float, int]] = []  # (started, seconds, status)
    lags: list[float] = []
    received = 0
    stop = threading.Event()

    def subscriber() -> None:
        nonlocal received
        context = ssl.create_default_context(cafile=ca)
        url = base.replace("https://", "wss://") + f"/{AGENT}/v1/events"
        with connect(url, additional_headers=auth, ssl=context, open_timeout=10) as ws:
            while not stop.is_set():
                try:
                    message = json.loads(ws.recv(timeout=1))
                except TimeoutError:
                    continue
                if message.get("type") != "artifact.tagged":
                    continue
                at = sent_at.get(message["record"].get("key") or "")
                if at is not None:
                    received += 1
                    lags.append(time.monotonic() - at)

    def tag(n: int) -> None:
        key = f"soak-{n}"
        started = time.monotonic()
        sent_at[key] = started
        try:
            status = (
                client()
                .post(
                    f"/{AGENT}/v1/artifacts",
                    json={"key": key, "data": {"n": n}, "contents": f"{n:08d}" * 128},
                    headers=auth,
                )
                .status_code
            )
        except httpx.HTTPError:
            status = 0
        results.append((started, time.monotonic() - started, status))

    hooked: list[float] = []
    hook_server = None
    if httpx.get(f"{base}/{AGENT}/v1/webhooks", headers=auth, verify=ca).status_code != 404:

        class Receiver(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                at = sent_at.get((event.get("record") or {}).get("key") or "")
                if event.get("type") == "artifact.tagged" and at is not None:
                    hooked.append(time.monotonic() - at)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        port = int(os.environ["DEPLOY_CHECK_HOOK_PORT"])
        hook_server = ThreadingHTTPServer(("127.0.0.1", port), Receiver)
        threading.Thread(target=hook_server.serve_forever, daemon=True).start()
        created = httpx.post(
            f"{base}/{AGENT}/v1/webhooks",
            json={"url": f"http://127.0.0.1:{port}/soak"},
            headers=auth,
            verify=ca,
        )
        created.raise_for_status()
    listener = threading.Thread(target=subscriber, daemon=True)
    listener.start()
    time.sleep(1)
    samples: list[tuple[float, list[float]]] = []
    pool = ThreadPoolExecutor(max_workers=16)
    t0 = time.monotonic()
    total = args.warmup + args.seconds
    interval = 1 / args.rate
    next_sample = t0 + args.warmup
    n = 0
    while True:
        now = time.monotonic()
        if now - t0 >= total:
            break
        if now >= next_sample:
            samples.append((now - t0, [rss_mib(p) for p in pids]))
            next_sample += 30
        pool.submit(tag, n)
        n += 1
        time.sleep(max(0.0, t0 + n * interval - time.monotonic()))
    pool.shutdown(wait=True)
    samples.append((time.monotonic() - t0, [rss_mib(p) for p in pids]))
    time.sleep(5)  # the last events reach the subscriber and the webhook
    stop.set()
    listener.join(timeout=5)

    measured = [r for r in results if r[0] - t0 >= args.warmup]
    durations = sorted(d for _, d, st in measured if 200 <= st < 300)
    errors = sum(1 for _, _, st in measured if not 200 <= st < 300)
    quantiles = statistics.quantiles(durations, n=100)
    lag_q = statistics.quantiles(sorted(lags), n=100) if len(lags) > 2 else [float("nan")] * 99
    span = samples[-1][0] - samples[0][0]
    print(
        f"soak: {len(measured)} tags in {args.seconds} s through nginx "
        f"({len(measured) / args.seconds:.1f}/s), 2 daphnes"
    )
    print(
        f"latency: p50 {quantiles[49] * 1000:.1f} ms, p99 {quantiles[98] * 1000:.1f} ms, "
        f"max {durations[-1] * 1000:.1f} ms; errors {errors}"
    )
    print(
        f"subscriber: {received} of {n} events received; lag p50 {lag_q[49] * 1000:.1f} ms, "
        f"p99 {lag_q[98] * 1000:.1f} ms"
    )
    if hook_server is not None:
        hook_server.shutdown()
        hook_q = statistics.quantiles(sorted(hooked), n=100) if len(hooked) > 2 else [0.0] * 99
        print(
            f"webhook: {len(hooked)} of {n} events delivered (deliver-webhooks service); "
            f"lag p50 {hook_q[49] * 1000:.1f} ms, p99 {hook_q[98] * 1000:.1f} ms"
        )
    for index in range(len(pids)):
        series = " → ".join(f"{mem[index]:.0f}" for _, mem in samples)
        first, last = samples[0][1][index], samples[-1][1][index]
        print(
            f"daphne {index + 1} RSS MiB over {span:.0f} s: {series} "
            f"(start {first:.0f}, end {last:.0f}, {last - first:+.1f})"
        )
    delivered = hook_server is None or len(hooked) == n
    return 0 if errors == 0 and received == n and delivered else 1


if __name__ == "__main__":
    raise SystemExit(main())
