"""The scale profile against the embedded default, measured in one run (docs/benchmarks.md).

    .venv/bin/python bench/scale.py db     [--n 1000] [--rows 20000]   # PostgreSQL vs SQLite
    .venv/bin/python bench/scale.py procs  [--seconds 10]              # 1 vs 2 daphne processes

``db``: tags/s through ``services.artifact_tag`` (plain, and with 4 KiB contents) and list latency
(``selectors.artifacts_page``, first page and a page 100 deep, limit 50, over --rows records) on a
SQLite file in a temporary data dir (the baseline) and on PostgreSQL (``BENCH_PG_URL``, default
postgres://postgres@127.0.0.1:5432/artifacts_bench_scale, created if missing). Each database runs in
its own child process (settings are chosen at start).

``procs``: tags/s over HTTP (POST /<slug>/v1/artifacts with an agent key) against one daphne
process and against two, on PostgreSQL + Redis (``BENCH_REDIS_URL``), each process on its own port;
the load comes from client processes that spread their requests over the ports, as a proxy would.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/artifacts_bench_scale")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
AGENTS = 8


def ensure_pg_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    exists = subprocess.run(
        [
            "psql",
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "test",
            "-tAc",
            f"SELECT 1 FROM pg_database WHERE datname = '{name}'",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not exists:
        subprocess.run(
            [
                "psql",
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-d",
                "test",
                "-qc",
                f"CREATE DATABASE {name}",
            ],
            check=True,
        )


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="agent_site.settings",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="bench-" + "x" * 40,
        ARTIFACTS_DATA_DIR=tempfile.mkdtemp(prefix="artifacts-scale-"),
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


# --- db: one database, in a child process -----------------------------------------------------


def db_child(n: int, rows: int) -> dict[str, float]:
    import secrets

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.db import connection, transaction
    from django.utils import timezone

    from artifacts_app import selectors, services
    from artifacts_app.models import Artifact

    run = secrets.token_hex(3)
    plain = services.agent_create(slug=f"plain-{run}", max_artifacts=10**9)
    blobby = services.agent_create(slug=f"blob-{run}", max_artifacts=10**9)
    listed = services.agent_create(slug=f"list-{run}", max_artifacts=10**9)
    payloads = [os.urandom(4096) for _ in range(n + 1)]

    def rate(fn) -> float:
        fn(n)
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        return n / (time.perf_counter() - start)

    tag = rate(lambda i: services.artifact_tag(agent=plain, kind="note", data={"i": i}))
    blob = rate(
        lambda i: services.artifact_tag(
            agent=blobby, kind="note", data={"i": i}, contents=payloads[i]
        )
    )
    # List over `rows` records, inserted in bulk (the tag path is measured above).
    now = timezone.now()
    with transaction.atomic():
        Artifact.objects.bulk_create(
            [
                Artifact(
                    id=f"art_{run}{i:08d}",
                    agent=listed,
                    kind="note",
                    data={"i": i},
                    created_at=now,
                    updated_at=now - timezone.timedelta(seconds=i),
                )
                for i in range(rows)
            ],
            batch_size=5000,
        )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

    def latency(depth: int) -> float:
        cursor = None
        for _ in range(depth):
            cursor = selectors.artifacts_page(agent=listed, limit=50, cursor=cursor).next_cursor
        samples = []
        for _ in range(200):
            start = time.perf_counter()
            selectors.artifacts_page(agent=listed, limit=50, cursor=cursor)
            samples.append(time.perf_counter() - start)
        return statistics.median(samples) * 1000

    return {
        "vendor": connection.vendor,
        "tags_per_s": tag,
        "blob_tags_per_s": blob,
        "list_first_ms": latency(0),
        "list_deep_ms": latency(100),
    }


def db_main(args: argparse.Namespace) -> None:
    ensure_pg_database(PG_URL)
    results = {}
    for name, extra in (("SQLite", {}), ("PostgreSQL", {"DATABASE_URL": PG_URL})):
        out = subprocess.run(
            [sys.executable, __file__, "db-child", "--n", str(args.n), "--rows", str(args.rows)],
            env=child_env(**extra),
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
        results[name] = json.loads(out.strip().splitlines()[-1])
    base, pg = results["SQLite"], results["PostgreSQL"]
    print(f"n={args.n} tags per case, list over {args.rows} records, limit 50, median of 200")
    print(f"{'case':<28}{'SQLite':>12}{'PostgreSQL':>14}{'PG / SQLite':>14}")
    for key, label in (
        ("tags_per_s", "tag (tags/s)"),
        ("blob_tags_per_s", "tag + 4 KiB (tags/s)"),
        ("list_first_ms", "list, first page (ms)"),
        ("list_deep_ms", "list, page 101 (ms)"),
    ):
        print(f"{label:<28}{base[key]:>12.2f}{pg[key]:>14.2f}{pg[key] / base[key]:>13.2f}x")


# --- procs: 1 vs 2 daphne processes --------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, timeout: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"no server on port {port}")


def load_child(ports: list[int], slug: str, key: str, seconds: float, concurrency: int) -> None:
    """Keep `concurrency` requests in flight for `seconds`, round-robin over the ports and agents."""
    import asyncio

    import httpx

    slugs, keys = slug.split(","), key.split(",")

    async def run() -> int:
        clients = [httpx.AsyncClient(base_url=f"http://127.0.0.1:{p}") for p in ports]
        done = 0
        errors = 0
        stop = time.monotonic() + seconds

        async def worker(w: int) -> None:
            nonlocal done, errors
            i = 0
            while time.monotonic() < stop:
                client = clients[(w + i) % len(clients)]
                i += 1
                a = (w + i) % len(slugs)
                response = await client.post(
                    f"/{slugs[a]}/v1/artifacts",
                    json={"kind": "note", "data": {"w": w, "i": i}},
                    headers={"Authorization": f"Bearer {keys[a]}"},
                )
                if response.status_code in (200, 201):
                    done += 1
                else:
                    errors += 1

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        for client in clients:
            await client.aclose()
        if errors:
            print(f"errors: {errors}", file=sys.stderr)
        return done

    print(json.dumps({"done": asyncio.run(run())}))


WRK_SCRIPT = """
local slugs = {%s}
local keys = {%s}
local i = 0
request = function()
  i = i + 1
  local a = (i %% #slugs) + 1
  return wrk.format("POST", "/" .. slugs[a] .. "/v1/artifacts",
    {["Authorization"] = "Bearer " .. keys[a], ["Content-Type"] = "application/json"},
    '{"kind": "note", "data": {"i": ' .. i .. '}}')
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %%d %%d\\n", summary.requests, summary.errors.status))
end
"""


def wrk_load(ports: list[int], slug: str, key: str, args: argparse.Namespace) -> int:
    """wrk (C, one thread per port) as the proxy: the connections split evenly over the ports."""
    quote = lambda items: ", ".join(f'"{x}"' for x in items)  # noqa: E731
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(WRK_SCRIPT % (quote(slug.split(",")), quote(key.split(","))))
    per_port = max(1, args.concurrency // len(ports))
    procs = [
        subprocess.Popen(
            [
                "wrk",
                "-t1",
                f"-c{per_port}",
                f"-d{int(args.seconds)}s",
                "-s",
                fh.name,
                f"http://127.0.0.1:{p}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for p in ports
    ]
    ok = 0
    for proc in procs:
        out = proc.communicate()[0]
        line = next(x for x in out.splitlines() if x.startswith("RESULT"))
        requests, failed = map(int, line.split()[1:])
        if failed:
            print(f"wrk: {failed} non-2xx answers", file=sys.stderr)
        ok += requests - failed
    os.unlink(fh.name)
    return ok


def procs_main(args: argparse.Namespace) -> None:
    ensure_pg_database(PG_URL)
    prefix = f"bench_scale_{os.getpid()}"
    # Servers use psycopg's pool (docs/operations.md): a connect per request would dominate.
    env = child_env(
        DATABASE_URL=PG_URL + "?pool=1",
        REDIS_URL=REDIS_URL,
        ARTIFACTS_REDIS_PREFIX=prefix,
        ARTIFACTS_PROCESSES="2",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    setup = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, secrets; django.setup();"
            "from django.core.management import call_command; call_command('migrate', verbosity=0);"
            "from artifacts_app import services;"
            f"run = secrets.token_hex(3)\n"
            f"for i in range({AGENTS}):\n"
            "    slug = f'bench-{run}-{i}'; services.agent_create(slug=slug, max_artifacts=10**9)\n"
            "    print(slug, services.agent_key_create(agent=slug)[1])",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    # Several agents: one agent's tags serialise on its row lock (DESIGN.md §1) whatever the
    # number of processes; the question here is how the processes scale.
    pairs = [line.split() for line in setup.stdout.strip().splitlines()[-AGENTS:]]
    slug = ",".join(p[0] for p in pairs)
    key = ",".join(p[1] for p in pairs)
    results = {}
    for count in (1, 2):
        ports = [free_port() for _ in range(count)]
        servers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(p),
                    "agent_site.asgi:application",
                ],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for p in ports
        ]
        try:
            for p in ports:
                wait_port(p)
            if shutil.which("wrk"):
                results[count] = wrk_load(ports, slug, key, args) / args.seconds
                continue
            loaders = [
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "load-child",
                        "--ports",
                        ",".join(map(str, ports)),
                        "--slug",
                        slug,
                        "--key",
                        key,
                        "--seconds",
                        str(args.seconds),
                        "--concurrency",
                        str(args.concurrency),
                    ],
                    env=env,
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for _ in range(args.loaders)
            ]
            done = sum(
                json.loads(p.communicate()[0].strip().splitlines()[-1])["done"] for p in loaders
            )
            results[count] = done / args.seconds
        finally:
            for server in servers:
                server.terminate()
            for server in servers:
                try:
                    server.wait(10)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
    load = "wrk" if shutil.which("wrk") else f"{args.loaders} Python load process(es)"
    print(
        f"PostgreSQL + Redis, {load}, {args.concurrency} connections, {args.seconds}s, {AGENTS} agents"
    )
    print(f"  1 daphne process : {results[1]:8.0f} tags/s")
    print(
        f"  2 daphne processes: {results[2]:8.0f} tags/s   = {results[2] / results[1]:.2f}x  (target >= 1.5x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["db", "procs", "db-child", "load-child"])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--loaders", type=int, default=1)
    parser.add_argument("--ports", default="")
    parser.add_argument("--slug", default="")
    parser.add_argument("--key", default="")
    args = parser.parse_args()
    if args.mode == "db":
        db_main(args)
    elif args.mode == "db-child":
        print(json.dumps(db_child(args.n, args.rows)))
    elif args.mode == "procs":
        procs_main(args)
    else:
        load_child(
            [int(p) for p in args.ports.split(",")],
            args.slug,
            args.key,
            args.seconds,
            args.concurrency,
        )


if __name__ == "__main__":
    main()
