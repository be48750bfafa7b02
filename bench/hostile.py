"""One hostile agent key beside honest agents: how much can it hurt them?

    .venv/bin/python bench/hostile.py [--agents 20] [--requests 50] [--slow-bodies 20]
        [--trickle-seconds 3] [--pattern-length 23] [--ref-depth 13] [--bad-tokens-per-second 100]
        [--max-seconds 90] [--rounds 2] [--attacks schema,slow,tokens] [--database-url URL] [--json]

One real daphne process (``tests.servers.DaphneServer``) on a free loopback port, SQLite in a
temporary data dir (or, with ``--database-url``, a PostgreSQL database the bench makes and drops),
DEBUG off, the server's settings otherwise as shipped. Two phases, the same
honest load in each:

- **honest load**: ``--agents`` agents (freeform, each with its own agent key), one thread each,
  tag JSON records (``POST artifacts``) ``--requests`` times, one after another; the latency of
  each tag is kept;
- **phase A (quiet)**: the honest load alone;
- **phase B (hostile)**: the same honest load while one more agent's key, its own and valid, from
  a process of its own (so its client work does not slow the honest clients),
  (a) declares the worst kinds it can (``PUT artifacts/kinds``): a ``pattern`` ``^(a+)+$``
  (exponential backtracking on ``"a" * n + "!"``, n ≥ 20; where the server answers such a tag in
  under 20 ms, it does not backtrack, and n doubles up to 256 Ki) and a ``$ref`` fan-out
  (``d_i = {"anyOf": [{"$ref": d_i+1}, {"$ref": d_i+1}]}``, a leaf no object matches) at
  ``--ref-depth``, or the deepest the server accepts, and tags them in a loop with the data that
  costs most (each such tag is refused, after the server has done the work);
  (b) holds ``--slow-bodies`` request bodies open (half ``PUT …/content``, half multipart
  ``POST artifacts``, authenticated, 64 MiB announced) sending one byte every
  ``--trickle-seconds``;
  (c) sends bad bearer tokens, ``--bad-tokens-per-second``, on fresh connections.
  The hostile load starts before the honest one and stops when the honest load is done, or at
  ``--max-seconds`` (then the honest agents finish what they were sending). ``--attacks`` runs only
  some of (a) ``schema``, (b) ``slow``, (c) ``tokens``, to see which one does the harm.

Each round runs A then B (``--rounds``, so a slow spell of the shared machine hits both). Reported
per phase: the honest tags' p50/p99/max and errors, the server's RSS at the start and its peak
(psutil on the daphne pid, sampled every 20 ms), the growth, the most threads it ran and, on
PostgreSQL, the most connections it held; for B what the hostile key got back. Then the median over rounds of p99(B)/p99(A) against the goal (≤ 1.5×),
and the largest growth in one B phase and over the whole run against the goal (< 64 MiB). Stops by
itself; talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import secrets
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MiB = 1024 * 1024
sys.path.insert(0, str(ROOT))

from tests.servers import HOST, DaphneServer  # noqa: E402


def prepare(env: dict[str, str], agents: int) -> dict[str, str]:
    """Migrate; the honest agents, the hostile one and a record it owns; answers keys and ids."""
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from artifacts_app import services

    keys: dict[str, str] = {}
    for i in range(agents):
        agent = services.agent_create(slug=f"honest-{i}", max_artifacts=10**6)
        _, keys[f"honest-{i}"] = services.agent_key_create(agent=agent)
    hostile = services.agent_create(slug="hostile", max_artifacts=10**6)
    _, keys["hostile"] = services.agent_key_create(agent=hostile)
    record = services.artifact_tag(agent=hostile, kind="blob", data={}, contents=b"x").record
    keys["hostile_record"] = record.id
    return keys


class Postgres:
    """A database of the bench's own on a PostgreSQL server: made now, dropped by ``drop``."""

    def __init__(self, server_url: str) -> None:
        from urllib.parse import urlsplit, urlunsplit

        import psycopg

        parts = urlsplit(server_url)
        self.name = f"bench_hostile_{secrets.token_hex(4)}"
        self.admin_url = server_url
        self.url = urlunsplit(parts._replace(path=f"/{self.name}"))
        self._admin = psycopg.connect(server_url, autocommit=True)
        self._admin.execute(f'CREATE DATABASE "{self.name}"')

    def connections(self) -> int:
        """The server's connections to this database right now (the daphne process's)."""
        row = self._admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (self.name,)
        ).fetchone()
        return int(row[0]) if row else 0

    def drop(self) -> None:
        self._admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        self._admin.close()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class RSS:
    """The daphne process's RSS: at the start, the peak while running (sampled every 20 ms)."""

    def __init__(self, pid: int, connections: Callable[[], int] | None = None) -> None:
        import psutil

        self.proc = psutil.Process(pid)
        self.start = self.peak = self.proc.memory_info().rss
        self.threads = self.proc.num_threads()
        self.connections = connections
        self.db_connections = connections() if connections else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            self.threads = max(self.threads, self.proc.num_threads())
            n += 1
            if self.connections is not None and n % 10 == 0:  # every 0.2 s
                self.db_connections = max(self.db_connections or 0, self.connections())
            time.sleep(0.02)

    def __enter__(self) -> RSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.end = self.proc.memory_info().rss


# --------------------------------------------------------------------------------------------
# The honest load


def honest_load(base: str, keys: dict[str, str], agents: int, requests: int) -> dict:
    import httpx

    latencies: list[float] = []
    errors: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    phase = secrets.token_hex(3)

    def agent(i: int) -> None:
        slug = f"honest-{i}"
        url = f"{base}/{slug}/v1/artifacts"
        headers = {"Authorization": f"Bearer {keys[slug]}"}
        mine: list[float] = []
        with httpx.Client(headers=headers, timeout=300) as client:
            for n in range(requests):
                body = {
                    "kind": "note",
                    "key": f"{phase}-{n % 10}",  # new records and re-tags, as an agent's day goes
                    "title": f"note {n}",
                    "data": {"n": n, "agent": i, "text": "lorem ipsum " * 8, "tags": ["a", "b"]},
                }
                start = time.perf_counter()
                try:
                    answer = client.post(url, json=body)
                    status = str(answer.status_code)
                except httpx.HTTPError as error:
                    status = type(error).__name__
                mine.append(time.perf_counter() - start)
                if status not in ("200", "201"):
                    with lock:
                        errors[status] += 1
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(agents)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"latencies": latencies, "errors": dict(errors), "seconds": time.perf_counter() - start}


# --------------------------------------------------------------------------------------------
# The hostile key


def fan_out_schema(depth: int) -> dict:
    defs: dict[str, dict] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(depth)
    }
    defs[f"d{depth}"] = {"type": "string"}  # the tag's data is an object: every branch fails
    return {"$defs": defs, "$ref": "#/$defs/d0"}


class Hostile:
    """Everything the hostile key does in phase B, each part on its own threads, until ``stop``."""

    def __init__(self, base: str, key: str, record: str, args: argparse.Namespace) -> None:
        self.base, self.key, self.record, self.args = base, key, record, args
        self.done = threading.Event()
        self.answers: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self.lock = threading.Lock()
        self.kinds: dict[str, str] = {}
        self.threads: list[threading.Thread] = []

    def count(self, part: str, what: str) -> None:
        with self.lock:
            self.answers[part][what] += 1

    # (a) the worst schemas and data ---------------------------------------------------------

    def declare(self) -> list[tuple[str, dict]]:
        """Declare the worst kinds the server accepts; answers (kind, data) to tag with."""
        import httpx

        url = f"{self.base}/hostile/v1/artifacts/kinds"
        headers = {"Authorization": f"Bearer {self.key}"}
        pattern = {
            "description": "Backtracking.",
            "schema": {
                "type": "object",
                "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
            },
        }
        plain = {"description": "What the slow bodies carry."}
        kinds: dict[str, dict] = {"blob": plain, "slow": plain}
        plan: list[tuple[str, dict]] = []
        answer = httpx.put(
            url, headers=headers, json={"kinds": {**kinds, "pattern": pattern}}, timeout=60
        )
        self.kinds["pattern"] = f"^(a+)+$: {answer.status_code}"
        if answer.status_code == 200:
            plan.append(("pattern", {"s": "a" * max(20, self.args.pattern_length) + "!"}))
            kinds["pattern"] = pattern
        for depth in range(self.args.ref_depth, 0, -1):
            fan = {"description": "Fan-out.", "schema": fan_out_schema(depth)}
            answer = httpx.put(
                url, headers=headers, json={"kinds": {**kinds, "fanout": fan}}, timeout=60
            )
            if answer.status_code == 200:
                self.kinds["fanout"] = f"depth {depth}: 200"
                plan.append(("fanout", {"x": 1}))
                break
            self.kinds["fanout"] = f"depth {self.args.ref_depth}..{depth}: {answer.status_code}"
        return plan

    def schema_loop(self, plan: list[tuple[str, dict]]) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(headers=headers, timeout=600) as client:
            n = 0
            while plan and not self.done.is_set():
                kind, data = plan[n % len(plan)]
                n += 1
                start = time.perf_counter()
                try:
                    answer = client.post(
                        f"{self.base}/hostile/v1/artifacts", json={"kind": kind, "data": data}
                    )
                    what = f"{answer.status_code} {answer.json().get('error', {}).get('code', '')}"
                except (httpx.HTTPError, ValueError) as error:
                    what = type(error).__name__
                self.count(f"tag {kind}", what.strip())
                fast = time.perf_counter() - start < 0.02
                if kind == "pattern" and fast and len(data["s"]) < 256 * 1024:
                    # Not backtracking (a linear engine; 20 characters or more cost a
                    # backtracking engine 0.1 s and up): the worst data is then the longest.
                    data["s"] = "a" * (2 * len(data["s"])) + "!"
                    self.kinds["pattern data"] = f"grown to {len(data['s'])} characters"

    # (b) slow bodies --------------------------------------------------------------------------

    def slow_body(self, i: int) -> None:
        announced = 64 * MiB
        if i % 2 == 0:
            head = (
                f"PUT /hostile/v1/artifacts/{self.record}/content HTTP/1.1\r\n"
                f"Host: {HOST}\r\nAuthorization: Bearer {self.key}\r\n"
                f"Content-Type: application/octet-stream\r\nContent-Length: {announced}\r\n\r\n"
            )
            part = "put content"
        else:
            head = (
                f"POST /hostile/v1/artifacts HTTP/1.1\r\n"
                f"Host: {HOST}\r\nAuthorization: Bearer {self.key}\r\n"
                f"Content-Type: multipart/form-data; boundary=B\r\n"
                f"Content-Length: {announced}\r\n\r\n"
                '--B\r\nContent-Disposition: form-data; name="record"\r\n\r\n{"kind": "slow",'
                ' "data": {}}\r\n--B\r\nContent-Disposition: form-data; name="contents";'
                ' filename="f"\r\nContent-Type: application/octet-stream\r\n\r\n'
            )
            part = "multipart tag"
        sent = 0
        try:
            with socket.create_connection((HOST, self.port), timeout=5) as sock:
                sock.sendall(head.encode())
                sock.settimeout(0.2)
                while not self.done.wait(self.args.trickle_seconds):
                    sock.sendall(b"a")
                    sent += 1
                    try:
                        answer = sock.recv(65536)
                    except TimeoutError:
                        continue
                    status = answer.split(b"\r\n", 1)[0].decode(errors="replace") or "closed"
                    self.count(f"slow body ({part})", f"answered after {sent} bytes: {status}")
                    return  # the server answered (413, 408, 503 …) or closed
                self.count(f"slow body ({part})", f"held to the end ({sent} bytes sent)")
        except OSError as error:
            self.count(f"slow body ({part})", f"{type(error).__name__} after {sent} bytes")

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    # (c) bad bearer tokens --------------------------------------------------------------------

    def bad_tokens(self) -> None:
        """One of ``TOKEN_SENDERS`` threads: its share of the rate, a new connection each time."""
        import httpx

        gap = self.TOKEN_SENDERS / self.args.bad_tokens_per_second
        url = f"{self.base}/honest-0/v1/artifacts?limit=1"
        fresh = httpx.Limits(
            max_keepalive_connections=0
        )  # a new connection each time, as a scanner
        with httpx.Client(limits=fresh, timeout=30) as client:
            next_at = time.monotonic()
            while not self.done.is_set():
                token = "aak_" + secrets.token_urlsafe(24)
                try:
                    answer = client.get(url, headers={"Authorization": f"Bearer {token}"})
                    self.count("bad token", str(answer.status_code))
                except httpx.HTTPError as error:
                    self.count("bad token", type(error).__name__)
                next_at += gap
                time.sleep(max(0.0, next_at - time.monotonic()))

    TOKEN_SENDERS = 4

    # ------------------------------------------------------------------------------------------

    def start(self) -> None:
        attacks = self.args.attacks.split(",")
        targets: list[tuple[Callable[..., None], tuple]] = []
        if "schema" in attacks:
            targets.append((self.schema_loop, (self.declare(),)))
        if "tokens" in attacks:
            targets += [(self.bad_tokens, ())] * self.TOKEN_SENDERS
        if "slow" in attacks:
            targets += [(self.slow_body, (i,)) for i in range(self.args.slow_bodies)]
        for target, args in targets:
            thread = threading.Thread(target=target, args=args, daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop(self) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(timeout=60)


def hostile_process(base, key, record, options, started, stop, results) -> None:
    """The hostile key in a process of its own, so that its client work never slows the honest
    clients of this one: starts, says so, runs until told to stop, answers what it got back."""
    hostile = Hostile(base, key, record, argparse.Namespace(**options))
    hostile.start()
    started.set()
    stop.wait()
    hostile.stop()
    results.put(
        {"kinds": hostile.kinds, "answers": {k: dict(v) for k, v in hostile.answers.items()}}
    )


# --------------------------------------------------------------------------------------------


def summary(name: str, run: dict, rss: RSS) -> dict:
    lat = [x * 1000 for x in run["latencies"]]
    row = {
        "phase": name,
        "tags": len(lat),
        "seconds": round(run["seconds"], 1),
        "p50_ms": round(statistics.median(lat), 1),
        "p99_ms": round(percentile(lat, 99), 1),
        "max_ms": round(max(lat), 1),
        "errors": run["errors"],
        "rss_start_mib": round(rss.start / MiB, 1),
        "rss_peak_mib": round(rss.peak / MiB, 1),
        "rss_growth_mib": round((rss.peak - rss.start) / MiB, 1),
        "threads_peak": rss.threads,
        "db_connections_peak": rss.db_connections,
    }
    print(
        f"{name:<8} {row['tags']:>5} tags in {row['seconds']:>6} s  p50 {row['p50_ms']:>8} ms  "
        f"p99 {row['p99_ms']:>9} ms  max {row['max_ms']:>9} ms  errors {row['errors'] or 0}  "
        f"RSS {row['rss_start_mib']} → peak {row['rss_peak_mib']} MiB "
        f"(+{row['rss_growth_mib']}), threads ≤ {rss.threads}"
        + ("" if rss.db_connections is None else f", database connections ≤ {rss.db_connections}"),
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--requests", type=int, default=50, help="tags per honest agent")
    parser.add_argument("--slow-bodies", type=int, default=20)
    parser.add_argument("--trickle-seconds", type=float, default=3.0)
    parser.add_argument("--pattern-length", type=int, default=23)
    parser.add_argument("--ref-depth", type=int, default=13)
    parser.add_argument("--bad-tokens-per-second", type=float, default=100.0)
    parser.add_argument("--max-seconds", type=float, default=90.0, help="bound on the hostile load")
    parser.add_argument("--rounds", type=int, default=2, help="quiet + hostile, this many times")
    parser.add_argument(
        "--attacks", default="schema,slow,tokens", help="which of the hostile's parts to run"
    )
    parser.add_argument(
        "--database-url",
        default="",
        help="a PostgreSQL server (postgres://user@host:port/db) on which the bench makes, and at "
        "the end drops, a database of its own; default: SQLite in the temp dir",
    )
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="artifacts-bench-hostile-")
    database = Postgres(args.database_url) if args.database_url else None
    env = {
        "ARTIFACTS_DATA_DIR": data_dir,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench-" + "x" * 40,
        "DATABASE_URL": database.url if database else "",
        "REDIS_URL": "",
    }
    where = database.name if database else data_dir
    print(f"preparing {where} ({args.agents} honest agents, one hostile) …", flush=True)
    server = DaphneServer({**os.environ, **env, "PYTHONPATH": str(ROOT)})
    try:
        keys = prepare(env, args.agents)
        server.start()
        assert server.process is not None
        pid = server.process.pid
        base = server.base_url
        honest_load(base, keys, args.agents, 2)  # warm-up: imports, connections, query plans
        time.sleep(1)

        connections = database.connections if database else None
        first = RSS(pid).start
        rounds = []
        for n in range(args.rounds):  # quiet then hostile, so a slow spell hits both
            print(f"round {n + 1}:", flush=True)
            time.sleep(1)
            with RSS(pid, connections) as rss_a:
                quiet = honest_load(base, keys, args.agents, args.requests)
            a = summary("quiet", quiet, rss_a)
            time.sleep(1)
            spawn = multiprocessing.get_context("spawn")
            started, stop, results = spawn.Event(), spawn.Event(), spawn.Queue()
            hostile = spawn.Process(
                target=hostile_process,
                args=(base, keys["hostile"], keys["hostile_record"], vars(args), started, stop),
                kwargs={"results": results},
                daemon=True,
            )
            with RSS(pid, connections) as rss_b:
                hostile.start()
                if not started.wait(120):
                    raise RuntimeError("the hostile process did not start")
                time.sleep(1)  # the slow bodies are open, the bad tokens flowing
                result: dict = {}
                honest = threading.Thread(
                    target=lambda into: into.update(
                        honest_load(base, keys, args.agents, args.requests)
                    ),
                    args=(result,),
                )
                honest.start()
                honest.join(timeout=args.max_seconds)
                stop.set()  # at the bound, or once the honest load is done
                got = results.get(timeout=180)
                hostile.join(30)
                honest.join()
            b = summary("hostile", result, rss_b)
            print(f"  hostile kinds declared: {got['kinds']}")
            for part, answers in sorted(got["answers"].items()):
                print(f"    {part}: {answers}")
            rounds.append(
                {
                    "quiet": a,
                    "hostile": b,
                    "kinds": got["kinds"],
                    "answers": got["answers"],
                    "p99_ratio": round(b["p99_ms"] / a["p99_ms"], 2),
                    "p50_ratio": round(b["p50_ms"] / a["p50_ms"], 2),
                }
            )
        ratio = statistics.median(r["p99_ratio"] for r in rounds)
        growth = max(r["hostile"]["rss_growth_mib"] for r in rounds)
        overall = (max(r["hostile"]["rss_peak_mib"] for r in rounds) * MiB - first) / MiB
        p99s = ", ".join(f"{r['p99_ratio']}x" for r in rounds)
        p50s = ", ".join(f"{r['p50_ratio']}x" for r in rounds)
        print(
            f"honest p99 hostile/quiet, median of {len(rounds)} round(s): {ratio:.2f}x "
            f"({p99s}; goal ≤ 1.5x: {'met' if ratio <= 1.5 else 'MISSED'}); p50 {p50s}"
        )
        print(
            f"server RSS growth under the hostile load: largest {growth} MiB in one phase, "
            f"{overall:.1f} MiB over the whole run (goal < 64 MiB: "
            f"{'met' if max(growth, overall) < 64 else 'MISSED'})"
        )
        if args.json:
            print(json.dumps({"rounds": rounds, "p99_ratio": ratio, "rss_growth_mib": growth}))
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
        if database is not None:
            database.drop()


if __name__ == "__main__":
    main()
