"""Webhooks: commit → receiver latency, throughput to one receiver against a bare httpx loop, and
what 100 webhooks on one agent cost its tags — all in one run, on the database the settings choose
(SQLite in a temporary data dir unless DATABASE_URL says otherwise).

    .venv/bin/python bench/webhooks.py [--paced 250] [--backlog 2000] [--tags 400]

The receiver is another process (an asyncio HTTP/1.1 server answering 204 on kept-alive
connections, recording each event's seq and arrival time on the machine's monotonic clock). The
deliverer is this process's ``webhooks.Runner`` (as the site's own process runs it).

1. Latency: one webhook, tags at 50/s (``--paced`` tags); from the tag's return (committed) to the
   receiver reading the request. Goal p50 ≤ 100 ms, p99 ≤ 500 ms.
2. Throughput: ``--backlog`` events stored while the deliverer is stopped, then delivered to one
   webhook (one connection, in seq order), against a bare ``httpx.Client`` loop posting the same
   bodies and headers to the same receiver. Goal ≥ 500/s and ≥ 0.5× the bare loop.
3. Tags with 100 webhooks on the agent against the same tags with none: as fast as they go with
   the deliverer stopped (the tag's own road: the outbox adds nothing to it), then each tag's time
   at ``--paced-rate`` tags/s (every event sent 100 times) with the deliverer running in this
   process, then with it in its own process (``manage.py deliver_webhooks``, the same database).
   Goal: tags slowed ≤ 10%.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

from _setup import django_setup

HOST = "127.0.0.1"


# --- the receiver (its own process) -------------------------------------------------------------


def serve(port: int) -> None:
    records: list[tuple[str, int, float]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                at = time.monotonic()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                if method == "GET" and path == "/stats":
                    out = json.dumps(records).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(out)}\r\n\r\n".encode()
                        + out
                    )
                elif method == "DELETE" and path == "/stats":
                    records.clear()
                    writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
                else:
                    seq = json.loads(body).get("seq", -1) if body else -1
                    records.append((path, seq, at))
                    writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, HOST, port, backlog=512)
        print("ready", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# --- the run ------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--paced", type=int, default=250, help="tags at 50/s for the latency")
    parser.add_argument("--backlog", type=int, default=2000, help="events for the throughput")
    parser.add_argument("--tags", type=int, default=400, help="tags per case for the tag cost")
    parser.add_argument(
        "--paced-rate", type=float, default=10, help="tags/s, half to the agent with 100 webhooks"
    )
    parser.add_argument("--paced-seconds", type=float, default=12, help="of each paced case")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    port = _free_port()
    receiver = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)], stdout=subprocess.PIPE, text=True
    )
    assert receiver.stdout is not None and receiver.stdout.readline().strip() == "ready"
    os.environ.setdefault("ARTIFACTS_WEBHOOK_ALLOW_HTTP", "1")
    os.environ.setdefault("ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.1/32")
    os.environ.setdefault("ARTIFACTS_WEBHOOK_MAX_PER_AGENT", "200")
    os.environ.setdefault("ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER", "0")
    try:
        django_setup()
        run(args, port)
    finally:
        receiver.terminate()
        receiver.wait(10)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def run(args: argparse.Namespace, port: int) -> None:
    import httpx
    import orjson
    from django.db import connection

    from artifacts_app import services, webhooks
    from artifacts_app.models import Event, Webhook
    from artifacts_app.webhooks import engine, signing

    base = f"http://{HOST}:{port}"
    control = httpx.Client(base_url=base)

    def stats(path: str) -> list[tuple[int, float]]:
        return [(seq, at) for p, seq, at in control.get("/stats").json() if p == path]

    def wait_for(path: str, count: int, seconds: float = 120) -> list[tuple[int, float]]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got = stats(path)
            if len(got) >= count:
                return got
            time.sleep(0.02)
        raise SystemExit(f"{path}: {len(stats(path))} of {count} within {seconds} s")

    stamp = os.urandom(3).hex()
    print(f"database: {connection.vendor}; receiver: {base}")

    # 1. Latency at 50 tags/s.
    agent = services.agent_create(slug=f"lat-{stamp}", max_artifacts=10**9)
    services.webhook_create(agent=agent, url=f"{base}/lat")
    runner = webhooks.Runner().start()
    time.sleep(0.5)
    committed: dict[int, float] = {}
    next_at = time.monotonic()
    for i in range(args.paced):
        services.artifact_tag(agent=agent, kind="note", data={"i": i})
        agent.refresh_from_db(fields=["last_seq"])
        committed[agent.last_seq] = time.monotonic()
        next_at += 1 / 50
        time.sleep(max(0.0, next_at - time.monotonic()))
    got = wait_for("/lat", args.paced)
    lat = [(at - committed[seq]) * 1000 for seq, at in got if seq in committed]
    print(
        f"latency, 50 tags/s, {len(lat)} events: p50 {pct(lat, 0.5):.1f} ms, "
        f"p99 {pct(lat, 0.99):.1f} ms, max {max(lat):.1f} ms"
    )

    # 2. Throughput of a backlog to one receiver, against a bare httpx loop.
    runner.stop()
    thr = services.agent_create(slug=f"thr-{stamp}", max_artifacts=10**9)
    webhook, secret = services.webhook_create(agent=thr, url=f"{base}/thr")
    for i in range(args.backlog):
        services.artifact_tag(agent=thr, kind="note", data={"i": i})
    payloads = list(Event.objects.filter(agent=thr).order_by("seq").values_list("seq", "payload"))
    bodies = [
        (
            seq,
            orjson.dumps({**payload, "agent": thr.slug}),
        )
        for seq, payload in payloads
    ]
    with httpx.Client(base_url=base) as bare:
        start = time.perf_counter()
        for seq, body in bodies:
            msg_id = engine.message_id(webhook.public_id, seq, 0, 0)
            headers = signing.headers(secret, msg_id, int(time.time()), body)
            bare.post("/bare", content=body, headers=headers)
        bare_rate = len(bodies) / (time.perf_counter() - start)
    start = time.perf_counter()
    runner = webhooks.Runner().start()
    wait_for("/thr", len(bodies))
    ours_rate = len(bodies) / (time.perf_counter() - start)
    print(
        f"throughput, {len(bodies)} events to one receiver: ours {ours_rate:.0f}/s, "
        f"bare httpx loop {bare_rate:.0f}/s, ratio {ours_rate / bare_rate:.2f}"
    )

    # 3. Tags with 100 webhooks on the agent against none: the tag's own road (the deliverer
    # stopped), then tag times at a paced rate with the deliverer sending every event 100 times.
    runner.stop()
    plain = services.agent_create(slug=f"plain-{stamp}", max_artifacts=10**9)
    hooked = services.agent_create(slug=f"hooked-{stamp}", max_artifacts=10**9)
    for n in range(100):
        services.webhook_create(agent=hooked, url=f"{base}/h{n}")

    def tag_rate(target, n: int) -> float:
        start = time.perf_counter()
        for i in range(n):
            services.artifact_tag(agent=target, kind="note", data={"i": i})
        return n / (time.perf_counter() - start)

    rounds = 4
    per = max(1, args.tags // rounds)
    plain_rates, hooked_rates = [], []
    for _ in range(rounds):
        plain_rates.append(tag_rate(plain, per))
        hooked_rates.append(tag_rate(hooked, per))
    p, h = statistics.median(plain_rates), statistics.median(hooked_rates)
    print(
        f"tags/s, {per} per round, median of {rounds}: no webhooks {p:.0f}, 100 webhooks "
        f"(deliverer stopped: the tag's road) {h:.0f} (slowed {100 * (1 - h / p):.1f}%)"
    )

    # Fresh webhooks (their cursors at the agent's last seq): the rounds' events are not sent.
    for webhook_id in Webhook.objects.filter(agent=hooked).values_list("public_id", flat=True):
        services.webhook_delete(agent=hooked, webhook_id=webhook_id)
    for n in range(100):
        services.webhook_create(agent=hooked, url=f"{base}/h{n}")
    runner = webhooks.Runner().start()
    time.sleep(1.0)  # its watch joins the agents

    rate = args.paced_rate
    count = int(rate * args.paced_seconds / 2)

    def paced_case(where: str) -> None:
        # Interleaved, one tag to each agent in turn: the machine's drift hits both alike.
        base_times, hooked_times = [], []
        next_at = time.monotonic()
        for i in range(count):
            for target, times in ((plain, base_times), (hooked, hooked_times)):
                start = time.perf_counter()
                services.artifact_tag(agent=target, kind="note", data={"i": i})
                times.append((time.perf_counter() - start) * 1000)
                next_at += 1 / rate
                time.sleep(max(0.0, next_at - time.monotonic()))
        delivered_at = time.monotonic()
        seq_last = (
            Event.objects.filter(agent=hooked).order_by("-seq").values_list("seq", flat=True)[0]
        )
        while not all(any(s == seq_last for s, _ in stats(f"/h{n}")) for n in (0, 50, 99)):
            time.sleep(0.05)
        slowed = 100 * (pct(hooked_times, 0.5) / pct(base_times, 0.5) - 1)
        print(
            f"tag time at {rate / 2:g} + {rate / 2:g} tags/s ({50 * rate:g} deliveries/s), "
            f"deliverer {where}: "
            f"none p50 {pct(base_times, 0.5):.2f} ms p99 {pct(base_times, 0.99):.2f} ms; "
            f"100 webhooks p50 {pct(hooked_times, 0.5):.2f} ms "
            f"p99 {pct(hooked_times, 0.99):.2f} ms (p50 slowed {slowed:.1f}%); "
            f"their deliveries done {time.monotonic() - delivered_at:.1f} s after the last tag"
        )

    paced_case("in this process")
    runner.stop()
    command = subprocess.Popen(
        [sys.executable, "manage.py", "deliver_webhooks"],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert command.stdout is not None and "delivering" in command.stdout.readline()
        time.sleep(1.0)
        paced_case("in its own process (manage.py deliver_webhooks)")
    finally:
        command.terminate()
        command.wait(20)


if __name__ == "__main__":
    main()
