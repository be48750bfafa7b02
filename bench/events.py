"""Live events: tag → event latency and delivered messages/s, beside two baselines in the same run.

    .venv/bin/python bench/events.py [--clients 1,100,500] [--burst 1000] [--rate 1000] [--redis]
                                     [--client-procs 1]

For each number of subscribers (all on one session), four servers are measured with the same client
harness (real sockets, the `websockets` client; in one process, or split over --client-procs
processes, since one client process saturates before the servers do at 500 subscribers):
  bare   a bare `websockets` server broadcasting the same JSON messages (websockets.broadcast);
  plain  daphne with the plain Channels pattern: every socket its own layer channel in one group, one
         group_send per event (in-memory layer, channels' default capacity 100);
  ours   daphne with the site's streams; events come from real tags (services.artifact_tag) in the
         server process, so latency is tag → event;
  ours fan-out: the same daphne, fake events handed to events.publish from a thread as a commit
         hook does: the fan-out alone, without the database (tags cost ~3 ms each on SQLite);
  ours+redis (with --redis, REDIS_URL or redis://127.0.0.1:6379/0): two daphne processes on one
         database and Redis; subscribers on A, tags through B.
"missing" counts deliveries not received within 60 s of the burst (a drop by the server, or a
harness that could not keep up: at 500 sockets the one client process is the limit, see bare).
Two phases each: a burst (--burst events as fast as the server makes them: deliveries/s, and how
many were lost), then a paced run of --paced-s seconds at --rate deliveries/s (events/s = rate /
clients; latency p50/p99 from the moment the event was made, a tag's start for ours).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from _setup import ROOT, django_setup

PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server on {port} exited")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"server on {port} did not listen")


# --- the bare websockets baseline ------------------------------------------------------------


async def serve_bare(port: int) -> None:
    from urllib.parse import parse_qs, urlsplit

    from websockets.asyncio.server import broadcast, serve

    sys.path.insert(0, str(ROOT / "bench"))
    from events_app import fake_event

    clients: set = set()

    async def handler(ws) -> None:
        parts = urlsplit(ws.request.path)
        if parts.path == "/emit":
            query = parse_qs(parts.query)
            n, rate = int(query["n"][0]), float(query.get("rate", ["0"])[0])
            start = time.perf_counter()
            for i in range(n):
                if rate:
                    delay = start + i / rate - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                broadcast(clients, json.dumps(fake_event(i)))
                if not rate and i % 50 == 0:
                    await asyncio.sleep(0)
            await ws.send("done")
            return
        clients.add(ws)
        try:
            await ws.wait_closed()
        finally:
            clients.discard(ws)

    async with serve(handler, "127.0.0.1", port, max_queue=None):
        await asyncio.Future()


# --- the client harness ----------------------------------------------------------------------


class Server:
    def __init__(self, name: str, ws_url: str, emit) -> None:
        self.name, self.ws_url, self.emit = name, ws_url, emit


async def receive_on(
    ws_url: str, headers: dict, clients: int, expected: int, go
) -> tuple[int, list[float], float, float]:
    """Connect ``clients`` sockets, await ``go()`` (which starts the events), then read until
    ``expected`` deliveries in all or 60 s; answers (received, latencies s, started, last) in
    ``time.time()`` seconds, so that figures of several client processes can be merged."""
    from websockets.asyncio.client import connect

    latencies: list[float] = []
    last = [0.0]
    total = [0]
    done = asyncio.Event()

    async def client(ws) -> None:
        async for raw in ws:
            now = time.time()
            latencies.append(now - json.loads(raw)["record"]["data"]["t"])
            total[0] += 1
            last[0] = now
            if total[0] >= expected:
                done.set()

    sockets = []
    for i in range(clients):
        sockets.append(await connect(ws_url, additional_headers=headers, max_queue=None))
        if i % 50 == 49:
            await asyncio.sleep(0.05)
    tasks = [asyncio.create_task(client(ws)) for ws in sockets]
    await asyncio.sleep(0.3)
    started = time.time()
    await go()
    try:
        await asyncio.wait_for(done.wait(), 60)
    except TimeoutError:
        pass
    await asyncio.sleep(0.5 if total[0] >= expected else 2)  # let stragglers (or nothing) arrive
    for t in tasks:
        t.cancel()
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    return total[0], latencies, started, last[0] or time.time()


def client_child(spec: str) -> None:
    """--client-child: one of several client processes; waits for "go" on stdin, prints JSON."""
    conf = json.loads(spec)

    async def go() -> None:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    received, latencies, started, last = asyncio.run(
        receive_on(conf["url"], conf["headers"], conf["clients"], conf["expected"], go)
    )
    step = max(1, len(latencies) // 50_000)  # a uniform sample is enough for percentiles
    print(
        json.dumps({"received": received, "latencies": latencies[::step], "last": last}), flush=True
    )


def pct(latencies: list[float], p: float) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000 if ordered else 0


async def measure(
    server: Server, clients: int, n: int, rate: float, headers: dict, procs: int = 1
) -> dict:
    expected = n * clients
    emitted = [0.0]

    async def emit() -> None:
        started = time.perf_counter()
        await server.emit(n, rate)
        emitted[0] = time.perf_counter() - started

    if procs <= 1 or clients < procs:
        received, latencies, started, last = await receive_on(
            server.ws_url, headers, clients, expected, emit
        )
    else:
        shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
        children = [
            subprocess.Popen(
                [
                    PY,
                    __file__,
                    "--client-child",
                    json.dumps(
                        {
                            "url": server.ws_url,
                            "headers": headers,
                            "clients": share,
                            "expected": n * share,
                        }
                    ),
                ],
                cwd=ROOT / "bench",
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for share in shares
        ]
        loop = asyncio.get_running_loop()
        for child in children:
            line = await loop.run_in_executor(None, child.stdout.readline)
            if line.strip() != "ready":
                raise SystemExit(f"a client process did not connect: {line!r}")
        started = time.time()
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        await emit()
        outs = await asyncio.gather(
            *(loop.run_in_executor(None, child.communicate) for child in children)
        )
        results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
        received = sum(r["received"] for r in results)
        latencies = [x for r in results for x in r["latencies"]]
        last = max(r["last"] for r in results)
    elapsed = last - started
    return {
        "server": server.name,
        "clients": clients,
        "events": n,
        "emit_s": emitted[0],
        "delivered": received,
        "lost": expected - received,
        "per_s": received / elapsed if elapsed > 0 else 0,
        "p50": pct(latencies, 0.5),
        "p99": pct(latencies, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", default="1,100,500")
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument(
        "--rate", type=float, default=1000, help="paced phase: deliveries/s (events/s × clients)"
    )
    parser.add_argument("--paced-s", type=float, default=3, help="paced phase length, seconds")
    parser.add_argument("--redis", action="store_true")
    parser.add_argument(
        "--client-procs",
        type=int,
        default=1,
        help="client processes the subscribers are split over (one process saturates near 500)",
    )
    parser.add_argument("--serve-bare", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--client-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        asyncio.run(serve_bare(args.serve_bare))
        return
    if args.client_child:
        client_child(args.client_child)
        return

    os.environ.pop("REDIS_URL", None)
    os.environ.pop("DATABASE_URL", None)
    django_setup()
    from artifacts_app import services

    slug = f"bench-{os.getpid()}"
    fanout_only = f"fan-{os.getpid()}"
    for name in (slug, fanout_only):
        services.agent_create(slug=name, max_artifacts=10**9)
        services.session_create(agent=name, sid="s_bench")
    staff = f"bench-staff-{os.getpid()}"
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user(staff, is_staff=True)
    key = services.user_token_create(user=staff)[1]  # staff watch every agent's sessions
    headers = {"Authorization": f"Bearer {key}"}

    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'bench'}",
        "DJANGO_DEBUG": "0",
        "ARTIFACTS_WS_BUFFER": "100000",  # a burst is not a slow client
    }
    procs: list[subprocess.Popen] = []

    def daphne(mode: str, extra: dict | None = None) -> int:
        port = free_port()
        proc = subprocess.Popen(
            [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "events_app:application"],
            cwd=ROOT / "bench",
            env={**env, "BENCH_MODE": mode, **(extra or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        wait_port(port, proc)
        return port

    def http_emitter(port: int, source: str = "tag", agent: str = slug):
        async def emit(n: int, rate: float) -> None:
            async with httpx.AsyncClient(timeout=600) as http:
                r = await http.post(
                    f"http://127.0.0.1:{port}/_bench/emit",
                    params={
                        "n": n,
                        "rate": rate,
                        "slug": agent,
                        "sid": "s_bench",
                        "source": source,
                    },
                )
                r.raise_for_status()

        return emit

    servers: list[Server] = []
    bare_port = free_port()
    procs.append(subprocess.Popen([PY, __file__, "--serve-bare", str(bare_port)], cwd=ROOT))
    wait_port(bare_port, procs[-1])

    async def bare_emit(n: int, rate: float) -> None:
        from websockets.asyncio.client import connect

        async with connect(f"ws://127.0.0.1:{bare_port}/emit?n={n}&rate={rate}") as ws:
            await ws.recv()

    servers.append(Server("bare websockets", f"ws://127.0.0.1:{bare_port}/", bare_emit))
    plain = daphne("plain", {"ARTIFACTS_LAYER_CAPACITY": "100"})
    servers.append(Server("plain channels", f"ws://127.0.0.1:{plain}/", http_emitter(plain)))
    ours = daphne("ours")
    path = f"/{slug}/v1/sessions/s_bench/events"
    servers.append(Server("ours in-memory", f"ws://127.0.0.1:{ours}{path}", http_emitter(ours)))
    fan_path = f"ws://127.0.0.1:{ours}/{fanout_only}/v1/sessions/s_bench/events"
    servers.append(Server("ours fan-out", fan_path, http_emitter(ours, "publish", fanout_only)))
    if args.redis:
        redis = {
            "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
            "ARTIFACTS_REDIS_PREFIX": f"bench-{os.getpid()}",
        }
        a, b = daphne("ours", redis), daphne("ours", redis)
        servers.append(Server("ours redis A←B", f"ws://127.0.0.1:{a}{path}", http_emitter(b)))

    rows = []
    try:
        for clients in [int(c) for c in args.clients.split(",")]:
            for server in servers:
                burst = asyncio.run(
                    measure(server, clients, args.burst, 0, headers, args.client_procs)
                )
                per_s = args.rate / clients  # events/s, so that deliveries/s is --rate
                count = max(3, int(per_s * args.paced_s))
                pacedr = asyncio.run(
                    measure(server, clients, count, per_s, headers, args.client_procs)
                )
                rows.append((burst, pacedr))
                print(
                    f"{clients:>4} {server.name:<16} burst {burst['per_s']:>9,.0f} deliveries/s "
                    f"missing {burst['lost']:>6} (events made in {burst['emit_s']:.2f}s) | "
                    f"paced {args.rate:.0f} deliveries/s p50 {pacedr['p50']:6.1f} ms p99 {pacedr['p99']:7.1f} ms "
                    f"missing {pacedr['lost']}",
                    flush=True,
                )
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    print("\nratios (burst deliveries/s):")
    by = {(b["clients"], b["server"]): b for b, _ in rows}
    for clients in sorted({b["clients"] for b, _ in rows}):
        plain_r = by[(clients, "plain channels")]["per_s"]
        bare_r = by[(clients, "bare websockets")]["per_s"]
        for name in ("ours in-memory", "ours fan-out", "ours redis A←B"):
            if (clients, name) in by:
                r = by[(clients, name)]["per_s"]
                print(
                    f"{clients:>4} {name:<16} {r / plain_r:5.1f}x plain, "
                    f"{100 * r / bare_r:5.1f}% of bare"
                )


if __name__ == "__main__":
    Path(ROOT / "var").mkdir(exist_ok=True)
    main()
