"""Revocation reaching open streams: what the credentials watch costs, and how soon it closes.

    .venv/bin/python bench/revoke.py [--sockets 500] [--tokens 100] [--idle-s 10] [--revocations 20]

One daphne (the site's application, DEBUG off) on this run's database; --sockets websockets, spread
over --tokens user tokens (each user on its own session's stream) and one agent key (the agent
stream). Two figures, each beside a baseline measured in the same run:
  cost     the server's CPU seconds per second while the sockets sit idle, with the watch at its
           default (ARTIFACTS_STREAM_RECHECK_MS=500) and with the watch slowed to one look an hour
           (a server started with 3,600,000 ms: the same sockets, no looks) — the difference is
           what the looks cost;
  query    one look's statement (selectors.credentials_state) for these credentials, in ms;
  latency  for --revocations tokens revoked one by one from this process (another process than the
           server, as `manage.py revoke_token` is): from the row's revoked_at to the socket's close
           as the client sees it, p50 / p99 / max.
With DATABASE_URL / REDIS_URL set, the server uses them (the scale profile).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from datetime import datetime

from _setup import ROOT, django_setup

PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server on {port} exited")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"server on {port} did not listen")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server(recheck_ms: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_DEBUG": "0",
        "ARTIFACTS_STREAM_RECHECK_MS": str(recheck_ms),
    }
    proc = subprocess.Popen(
        [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "agent_site.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(port, proc)
    return proc, port


async def open_all(port: int, streams: list[tuple[str, str]]) -> list:
    from websockets.asyncio.client import connect

    sockets = []
    for path, token in streams:
        sockets.append(
            await connect(
                f"ws://127.0.0.1:{port}{path}",
                additional_headers={"Authorization": f"Bearer {token}"},
                open_timeout=60,
            )
        )
    return sockets


async def idle_cost(pid: int, seconds: float) -> float:
    await asyncio.sleep(2)  # the opening's own work settles
    before = cpu_seconds(pid)
    await asyncio.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds


def setup(args: argparse.Namespace) -> tuple[list, list]:
    from django.contrib.auth import get_user_model

    from artifacts_app import services

    slug = f"revoke-{os.getpid()}"
    services.agent_create(slug=slug, max_artifacts=1000)
    agent_key = services.agent_key_create(agent=slug)[1]
    users = get_user_model().objects
    tokens = []
    for i in range(args.tokens):
        user = users.create_user(f"{slug}-u{i}", password="x")
        services.session_create(agent=slug, sid=f"s{i}", owner=user)
        tokens.append((f"/{slug}/v1/sessions/s{i}/events", services.user_token_create(user=user)))
    streams = []  # one socket in ten on the agent stream, the others on the users' sessions
    for i in range(args.sockets):
        if i % 10 == 0:
            streams.append((f"/{slug}/v1/events", agent_key))
        else:
            path, (_, secret) = tokens[i % args.tokens]
            streams.append((path, secret))
    return tokens, streams


def query_ms(tokens: list) -> float:
    """One look's statement, for the credentials of these streams (keys, users, sessions)."""
    from artifacts_app import selectors
    from artifacts_app.models import Agent

    agent_id = Agent.objects.values_list("pk", flat=True).latest("pk")
    wanted = [
        selectors.Credentials(key.pk, key.user_id, None, (agent_id, f"s{i}"))
        for i, (_, (key, _)) in enumerate(tokens)
    ]
    selectors.credentials_state(wanted)
    started = time.perf_counter()
    for _ in range(20):
        selectors.credentials_state(wanted)
    return (time.perf_counter() - started) / 20 * 1000


async def run(args: argparse.Namespace, tokens: list, streams: list) -> None:
    from channels.db import database_sync_to_async
    from websockets.exceptions import ConnectionClosed

    from artifacts_app import services
    from artifacts_app.models import ApiKey

    costs = {}
    for label, ms in (("watch off (one look an hour)", 3_600_000), ("watch at 500 ms", 500)):
        proc, port = server(ms)
        try:
            sockets = await open_all(port, streams)
            costs[label] = await idle_cost(proc.pid, args.idle_s)
            if ms == 500:
                latencies = []
                by_secret = {}
                for ws, (_, secret) in zip(sockets, streams, strict=True):
                    by_secret.setdefault(secret, []).append(ws)
                victims = [t for t in tokens if t[1][1] in by_secret][: args.revocations]
                for _, (key, secret) in victims:
                    # At a random phase of the looks, as a revocation comes.
                    await asyncio.sleep(random.uniform(0, 0.5))
                    await database_sync_to_async(services.token_revoke)(token=secret)
                    for ws in by_secret[secret]:
                        try:
                            await asyncio.wait_for(ws.recv(), 10)
                            raise SystemExit("an event arrived on a socket being revoked")
                        except ConnectionClosed as closed:
                            assert closed.rcvd is not None and closed.rcvd.code == 4401
                    seen = datetime.now().astimezone()
                    revoked_at = (
                        await database_sync_to_async(ApiKey.objects.get)(pk=key.pk)
                    ).revoked_at
                    latencies.append((seen - revoked_at).total_seconds())
            for ws in sockets:
                await ws.close()
        finally:
            proc.terminate()
            proc.wait(10)
    print(
        f"{args.sockets} sockets over {args.tokens} user tokens and one agent key; idle {args.idle_s} s"
    )
    for label, cost in costs.items():  # PostgreSQL's own work is not in it
        print(f"  server CPU, {label:30s} {cost * 100:6.2f} % of a core")
    off, on = costs.values()
    print(f"  the looks cost                       {(on - off) * 100:6.2f} % of a core")
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"  revoked_at → close seen ({len(latencies)} revocations): "
        f"p50 {statistics.median(latencies) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
        f"max {latencies[-1] * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sockets", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--idle-s", type=float, default=10)
    parser.add_argument("--revocations", type=int, default=20)
    args = parser.parse_args()
    django_setup()
    tokens, streams = setup(args)
    print(f"one look's statement ({len(tokens) + 1} credentials): {query_ms(tokens):.2f} ms")
    asyncio.run(run(args, tokens, streams))


if __name__ == "__main__":
    main()
