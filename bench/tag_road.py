"""The tag route's road in-process: the site's ASGI handler answering a JSON tag beside a Django
JSON hello, per request, without daphne or a socket; two trees side by side.

    .venv/bin/python bench/tag_road.py [--rounds 10] [--requests 300] [--before TREE]

What bench/peers.py's ``http`` group and bench/body.py measure over HTTP (the tag against the
hello on the same server), with the network and daphne taken out, so that what the handler, the
middleware and the view cost shows on a loaded machine: one worker process per tree (its own
SQLite data dir, DEBUG off, an agent ``tagger`` and its key), each round runs ``--requests``
sequential tags and as many hellos through ``agent_site.asgi.django_asgi_app`` in each tree in
turn, timed by the wall clock and by the process's CPU time (all its threads: the event loop's
and the requests'), which other work on the machine disturbs much less. The minimum of the rounds
is the figure least disturbed; the median is given beside it. The hello is
``bench/rest_asgi.py``'s ``/bare/django-hello``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _worker() -> None:
    """One tree (``PYTHONPATH``): read ``tag N`` / ``hello N`` lines, answer µs per request, of
    wall-clock time and of the process's CPU time (every thread: the event loop's and the
    request's)."""
    os.environ["ARTIFACTS_DATA_DIR"] = tempfile.mkdtemp(prefix="bench-tag-road-")
    os.environ.update(
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="bench-" + "x" * 40,
        ARTIFACTS_MAX_CONTENT_BYTES="1000000",
    )
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    from django.core.management import call_command

    import bench.rest_asgi  # noqa: F401  (Django set up, /bare/django-hello added)

    call_command("migrate", verbosity=0)
    from agent_site.asgi import django_asgi_app
    from artifacts_app import services

    agent = services.agent_create(slug="tagger", max_artifacts=10**9)
    key = services.agent_key_create(agent=agent)[1]
    seq = [0]

    async def request(method: str, path: str, body: bytes, headers: list) -> int:
        sent = [False]
        status = [0]

        async def receive() -> dict:
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # no disconnect: cancelled once answered
            raise AssertionError

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1"), *headers],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        await django_asgi_app(scope, receive, send)
        return status[0]

    def tag() -> tuple[str, str, bytes, list]:
        seq[0] += 1
        body = b'{"kind": "note", "key": "k-%d", "data": {"n": %d, "text": "%s"}}' % (
            seq[0],
            seq[0],
            b"x" * 64,
        )
        headers = [
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        return "POST", "/tagger/v1/artifacts", body, headers

    def hello() -> tuple[str, str, bytes, list]:
        return "GET", "/bare/django-hello", b"", []

    cases = {"tag": (tag, 201), "hello": (hello, 200)}

    async def run(case: str, n: int) -> tuple[float, float]:
        make, expected = cases[case]
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            status = await request(*make())
            assert status == expected, (case, status)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return wall / n * 1e6, cpu / n * 1e6

    loop = asyncio.new_event_loop()
    for case in cases:
        loop.run_until_complete(run(case, 50))  # warm: imports, query plans, threads
    print("ready", flush=True)
    for line in sys.stdin:
        case, n = line.split()
        wall, cpu = loop.run_until_complete(run(case, int(n)))
        print(f"{wall:.1f} {cpu:.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--before", type=Path, help="an earlier tree, measured in the same rounds")
    args = parser.parse_args()
    trees = {"now": ROOT}
    if args.before is not None:
        trees = {"before": args.before.resolve(), **trees}
    workers = {}
    for name, tree in trees.items():
        workers[name] = subprocess.Popen(
            [sys.executable, __file__, "--worker"],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert workers[name].stdout.readline().strip() == "ready"  # type: ignore[union-attr]
    load_before = os.getloadavg()
    results: dict[str, list[float]] = {}
    try:
        for r in range(args.rounds):
            for name, worker in workers.items():
                for case in ("tag", "hello"):
                    worker.stdin.write(f"{case} {args.requests}\n")  # type: ignore[union-attr]
                    worker.stdin.flush()  # type: ignore[union-attr]
                    wall, cpu = worker.stdout.readline().split()  # type: ignore[union-attr]
                    results.setdefault(f"{name}:{case}", []).append(float(wall))
                    results.setdefault(f"{name}:{case}:cpu", []).append(float(cpu))
            print(f"round {r + 1}/{args.rounds}", flush=True)
    finally:
        for worker in workers.values():
            worker.stdin.close()  # type: ignore[union-attr]
            worker.wait(timeout=30)
    load = " ".join(f"{x:.2f}" for x in load_before)
    after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{args.requests} requests, {args.rounds} rounds; load {load} -> {after}")
    print("µs per request, wall clock / CPU (the process's): min, median (per round)")
    for name in trees:
        for case in ("tag", "hello"):
            for kind, key in (("wall", f"{name}:{case}"), ("CPU", f"{name}:{case}:cpu")):
                values = results[key]
                rounds = ", ".join(f"{v:.0f}" for v in values)
                print(
                    f"  {name:6} {case:5} {kind:4} {min(values):6.0f}, "
                    f"{statistics.median(values):6.0f}   ({rounds})"
                )
    for name in trees:
        for kind, suffix in (("wall", ""), ("CPU", ":cpu")):
            tag, hello = results[f"{name}:tag{suffix}"], results[f"{name}:hello{suffix}"]
            print(
                f"{name}: tag / hello (as rates), {kind}: {min(hello) / min(tag):.2f}x at the "
                f"minimum, {statistics.median(hello) / statistics.median(tag):.2f}x at the median"
            )
    if len(trees) == 2:
        for kind, suffix in (("wall", ""), ("CPU", ":cpu")):
            before, now = results[f"before:tag{suffix}"], results[f"now:tag{suffix}"]
            print(
                f"tag now / before (as rates), {kind}: {min(before) / min(now):.2f}x at the "
                f"minimum, {statistics.median(before) / statistics.median(now):.2f}x at the median"
            )


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        _worker()
    else:
        main()
