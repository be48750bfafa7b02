"""CPU time per request (the request's thread's, ``time.thread_time``) of the request middleware
(``artifacts_app.monitoring.RequestMiddleware``: the request id, the counters, the access line).

    .venv/bin/python bench/monitoring.py [--n 500] [--rounds 7]
    .venv/bin/python bench/monitoring.py --before /tmp/before [--n 1000] [--rounds 6]

The same requests, in-process, through the site's chain built with and without the middleware, in
interleaved rounds (medians): a tag on its lean road (``rest/lean.py``: the chain and the view on
one thread, as daphne runs it) and a 50-row list page through Django's handler (the test
``Client``). The access line is written as production writes it (JSON, ``DJANGO_DEBUG=0``) to
``/dev/null``. CPU time moves far less with the machine's load than wall-clock rates
(bench/tag_cpu.py), so a few tens of microseconds show; the thread's own, because SQLite's
checkpoint thread works after each burst of commits and its time is not the middleware's.
bench/peers.py ``--cases http`` gives the same change over HTTP.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _setup import ROOT, django_setup

MIDDLEWARE = "artifacts_app.monitoring.RequestMiddleware"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=500, help="requests per case per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--before",
        type=Path,
        help="an earlier commit's source tree: measure the server's CPU per tag over HTTP, this "
        "tree's daphne beside that one's, instead of the in-process chain",
    )
    args = parser.parse_args()
    if args.before is not None:
        return http_main(args)
    os.environ.setdefault("ARTIFACTS_LOG_FORMAT", "json")
    django_setup()

    import orjson
    from django.conf import settings
    from django.test import Client, RequestFactory, override_settings

    from artifacts_app import services
    from artifacts_app.rest import lean

    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 (for the process's life)

    agent = services.agent_create(slug=f"m-{os.getpid()}", max_artifacts=10**9)
    _, key = services.agent_key_create(agent=agent)
    for i in range(60):
        services.artifact_tag(agent=agent, kind="note", data={"i": i})
    with_mw = list(settings.MIDDLEWARE)
    without = [path for path in with_mw if path != MIDDLEWARE]
    assert len(without) == len(with_mw) - 1
    factory = RequestFactory()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    body = orjson.dumps({"kind": "note", "data": {"text": "x" * 200}})

    def tag_case(middleware: list[str]):
        with override_settings(MIDDLEWARE=middleware):
            chain = lean.chain(lean.tag)

        def run(n: int) -> None:
            for _ in range(n):
                request = factory.post(
                    f"/{agent.slug}/v1/artifacts", body, content_type="application/json", **auth
                )
                response = lean.respond(chain, request, agent.slug)
                assert response.status_code == 201, response.content

        return run

    def list_case(middleware: list[str]):
        def run(n: int) -> None:
            with override_settings(MIDDLEWARE=middleware):
                client = Client()
                for _ in range(n):
                    response = client.get(f"/{agent.slug}/v1/artifacts?limit=50", **auth)
                    assert response.status_code == 200

        return run

    cases = {
        "tag (lean road)": (tag_case(without), tag_case(with_mw)),
        "list, 50 rows (Django's road)": (list_case(without), list_case(with_mw)),
    }
    results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in cases}
    for off, on in cases.values():
        off(20)
        on(20)  # warm-up: imports, query plans, the metric children
    for round_ in range(args.rounds):
        for name, (off, on) in cases.items():
            # Each side first every other round: a burst's work that outlives it (SQLite's
            # checkpoint thread, whose CPU time is this process's) falls on both sides alike.
            order = ((0, off), (1, on)) if round_ % 2 == 0 else ((1, on), (0, off))
            for side, run in order:
                started = time.thread_time()
                run(args.n)
                results[name][side].append((time.thread_time() - started) / args.n * 1e6)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench/monitoring.py, --n {args.n} --rounds {args.rounds}, load average {load}")
    print("| request | without the middleware | with it | difference |")
    print("|---|---:|---:|---:|")
    for name, (off, on) in results.items():
        a, b = statistics.median(off), statistics.median(on)
        print(f"| {name} | {a:.0f} µs | {b:.0f} µs | {b - a:+.0f} µs ({(b / a - 1) * 100:+.1f}%) |")
    print(
        "rounds (µs):",
        {k: ([round(x) for x in v[0]], [round(x) for x in v[1]]) for k, v in results.items()},
    )


def http_main(args: argparse.Namespace) -> None:
    """The server's CPU per tag over HTTP: a daphne of this tree beside one of ``--before``'s,
    each on its own SQLite site, answering the same sequential tags in interleaved rounds; the
    CPU time (user + system, ``/proc/<pid>/stat``) each server process spent per request, which
    the machine's load moves far less than its rate."""
    import sys

    import httpx

    sys.path.insert(0, str(ROOT))
    from tests.servers import DaphneServer, sqlite_site

    trees = {"before": args.before.resolve(), "after": ROOT}
    servers: dict[str, tuple[DaphneServer, str]] = {}
    work = Path(tempfile.mkdtemp(prefix="monitoring-bench-"))
    try:
        for name, tree in trees.items():
            (work / name).mkdir()
            env, key = sqlite_site(work / name, PYTHONPATH=str(tree))
            # As docs/operations.md runs it: -v0 (the site's own access line, JSON; none of daphne's).
            server = DaphneServer(env, cwd=tree, args=("-v0",), log_path=work / f"{name}.log")
            servers[name] = (server.start(), key)
        clock = os.sysconf("SC_CLK_TCK")

        def cpu(server: DaphneServer) -> float:
            assert server.process is not None
            with open(f"/proc/{server.process.pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / clock

        def run(name: str) -> float:
            server, key = servers[name]
            body = {"kind": "report", "data": {"text": "x" * 200}}
            with httpx.Client(
                base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}
            ) as client:
                for _ in range(20):
                    client.post("/reviewer/v1/artifacts", json=body)
                before = cpu(server)
                for _ in range(args.n):
                    assert client.post("/reviewer/v1/artifacts", json=body).status_code == 201
                return (cpu(server) - before) / args.n * 1e6

        results: dict[str, list[float]] = {name: [] for name in trees}
        for round_ in range(args.rounds):
            for name in trees if round_ % 2 == 0 else reversed(list(trees)):
                results[name].append(run(name))
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        before, after = (statistics.median(results[name]) for name in trees)
        print(f"bench/monitoring.py --http, --n {args.n} --rounds {args.rounds}, load {load}")
        print("| server CPU per tag over HTTP | before | after | difference |")
        print("|---|---:|---:|---:|")
        print(
            f"| median of rounds | {before:.0f} µs | {after:.0f} µs | "
            f"{after - before:+.0f} µs ({(after / before - 1) * 100:+.1f}%) |"
        )
        print("rounds (µs):", {k: [round(x) for x in v] for k, v in results.items()})
    finally:
        for server, _ in servers.values():
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
