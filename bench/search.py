"""Search (API.md "Search") at size: latency of q and where on a first page, the tag rate with the
index against without it, the index's size, and where against LangGraph's PostgresStore.

    .venv/bin/python bench/search.py query --db sqlite|postgresql [--records 1000000] [--agents 50]
    .venv/bin/python bench/search.py tags  --db sqlite|postgresql [--n 1000] [--rounds 5]
    .venv/bin/python bench/search.py peer  [--items 100000] [--runs 300]

``query``: ``--records`` records over ``--agents`` agents, loaded in bulk (multi-row INSERTs: a
tag at a time would take hours on this machine) with their words as the tag writes them
(``search.document``); nested ``data``, and a few KiB of text content on a fifth of them (the
content's words kept on its blob row, as a tag keeps them). Then ``selectors.artifacts_page``'s
first page of 50 for one agent picked at random each call: q of 1 and of 3 words, a where of 2
conditions, both; p50 and p99 over ``--runs`` calls each, and the plain list as the baseline.
Also the index's size (SQLite: dbstat pages of the FTS tables; PostgreSQL: the GIN indexes, the
``(updated_at, id)`` index and the tsvector column).

``tags``: ``services.artifact_tag`` (small data, and 4 KiB text contents) with the index written
and with its write left out, in interleaved rounds on the same database; the ratio of medians.

``peer``: LangGraph's ``PostgresStore`` (``langgraph-checkpoint-postgres``, in ``.venv-bench``:
``.venv-bench/bin/pip install -e '.[bench]'``) and ours on the same PostgreSQL, each with
``--items`` items of the same values under one namespace / one agent; sequential
``search(namespace, filter={...}, limit=10)`` against ``artifacts_page(where={...}, limit=10)``
with the same equality filters: queries per second and the ratio.

PostgreSQL: ``BENCH_PG_URL`` (default postgres://postgres@127.0.0.1:5432/artifacts_bench_search),
dropped and created afresh by ``query`` and ``peer``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/artifacts_bench_search")
BENCH_VENV = ROOT / ".venv-bench" / "bin" / "python"
KINDS = ["review", "report", "plan", "note", "trace"]
STATUSES = ["open", "merged", "closed", "draft"]


def _psql(sql: str) -> None:
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-qc", sql],
        check=True,
        capture_output=True,
    )


def fresh_pg() -> None:
    name = PG_URL.rsplit("/", 1)[1]
    _psql(f"DROP DATABASE IF EXISTS {name}")
    _psql(f"CREATE DATABASE {name}")


def setup(db: str) -> None:
    if db == "postgresql":
        os.environ["DATABASE_URL"] = PG_URL
    else:
        os.environ.pop("DATABASE_URL", None)
    sys.path.insert(0, str(ROOT))
    from bench._setup import django_setup

    django_setup()


# --- the data set -----------------------------------------------------------------------------


def vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(size * 2)}
    return sorted(words)[:size]


class Words:
    """Words drawn with a Zipf-like skew: a few common, most rare (as in text)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = vocabulary(rng)
        self.weights = [1 / (rank + 1) for rank in range(len(self.words))]
        self.cumulative = list(_accumulate(self.weights))

    def some(self, count: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cumulative, k=count)


def _accumulate(values: list[float]) -> list[float]:
    total, out = 0.0, []
    for value in values:
        total += value
        out.append(total)
    return out


def load(records: int, agents_count: int) -> tuple[list, Words]:
    from django.db import connection, transaction

    from artifacts_app import search, services
    from artifacts_app.models import Agent, Artifact, Blob
    from artifacts_app.selectors.search import INDEX_TABLE, ROW_TABLE, VECTOR_COLUMN, agent_rowids

    rng = random.Random(2026)
    words = Words(rng)
    agents = [
        services.agent_create(slug=f"bench-{a}", max_artifacts=records + 1)
        for a in range(agents_count)
    ]
    blobs = []
    for b in range(500):  # 500 distinct text contents of a few KiB, shared by a fifth of records
        text = " ".join(words.some(rng.randint(300, 700)))
        sha = f"{b:064x}"
        blobs.append((sha, len(text), " ".join(search.words(text))))
    Blob.objects.bulk_create(
        [Blob(sha256=sha, size=size, words=text) for sha, size, text in blobs], batch_size=500
    )
    table = connection.ops.quote_name(Artifact._meta.db_table)
    columns = (
        "id, agent_id, kind, key, title, data, session_id, turn_id, source, blob_id, "
        "content_type, version, pinned, created_at, updated_at"
    )
    now = datetime.now(UTC)
    postgres = connection.vendor == "postgresql"
    if postgres:
        columns += f", {VECTOR_COLUMN}"
    width = columns.count(",") + 1
    started = time.perf_counter()
    batch: list[tuple] = []
    fts: list[tuple[int, str, str, str]] = []
    next_rowid = {agent.pk: agent_rowids(agent.pk)[0] for agent in agents}

    def flush() -> None:
        if not batch:
            return
        with transaction.atomic(), connection.cursor() as cursor:
            # PostgreSQL: the tsvector is the last column, its placeholder cast.
            last = "%s::tsvector" if postgres else "%s"
            one = "(" + ", ".join(["%s"] * (width - 1) + [last]) + ")"
            values = ", ".join([one] * len(batch))
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES {values}",
                [value for row in batch for value in row],
            )
            if not postgres:  # rowids in each agent's range, as the tag gives them
                cursor.executemany(
                    f"INSERT INTO {ROW_TABLE} (id, artifact_id) VALUES (%s, %s)",
                    [(rowid, artifact_id) for rowid, artifact_id, _, _ in fts],
                )
                cursor.executemany(
                    f"INSERT INTO {INDEX_TABLE} (rowid, head, tail) VALUES (%s, %s, %s)",
                    [(rowid, head, tail) for rowid, _, head, tail in fts],
                )
        batch.clear()
        fts.clear()

    for n in range(records):
        agent = agents[n % agents_count]
        kind = KINDS[n % len(KINDS)]
        title = " ".join(words.some(rng.randint(2, 6))).capitalize()
        data = {
            "pr": {
                "author": f"user{rng.randint(0, 199)}",
                "number": n,
                "labels": rng.sample(["bug", "docs", "perf", "ui", "api", "infra"], 2),
            },
            "score": rng.randint(0, 99),
            "status": rng.choice(STATUSES),
            "summary": " ".join(words.some(rng.randint(5, 25))),
            "steps": [{"name": " ".join(words.some(2)), "ok": rng.random() < 0.9}],
        }
        blob = blobs[n % len(blobs)] if n % 5 == 0 else None
        key = f"k-{n}"
        doc = search.document(
            kind=kind, key=key, title=title, data=data, content=blob[2] if blob else None
        )
        at = now - timedelta(seconds=records - n)
        artifact_id = f"art_{n:024x}"
        row = [
            artifact_id, agent.pk, kind, key, title, json.dumps(data), None, None, "host",
            blob[0] if blob else None, "text/plain" if blob else None, 1, False, at, at,
        ]  # fmt: skip
        if postgres:
            row.append(doc.tsvector())
        else:
            head, tail = doc.fts()
            fts.append((next_rowid[agent.pk], artifact_id, head, tail))
            next_rowid[agent.pk] += 1
        batch.append(tuple(row))
        if len(batch) == 500:
            flush()
        if n and n % 100_000 == 0:
            print(f"  {n} records, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    flush()
    Agent.objects.filter(pk__in=[a.pk for a in agents]).update(
        artifact_count=records // agents_count
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return agents, words


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def query(args: argparse.Namespace) -> None:
    if args.db == "postgresql":
        fresh_pg()
    setup(args.db)
    from django.db import connection

    from artifacts_app import selectors

    started = time.perf_counter()
    agents, words = load(args.records, args.agents)
    built = time.perf_counter() - started
    rng = random.Random(7)
    common = words.words[50:2000]  # words that recur, as people search for

    cases = {
        "plain list (baseline)": lambda: {},
        "q, 1 word": lambda: {"q": rng.choice(common)},
        "q, 3 words": lambda: {"q": " ".join(rng.sample(common[:300], 3))},
        "where, 2 conditions": lambda: {
            "where": {"pr.author": f"user{rng.randint(0, 199)}", "status": rng.choice(STATUSES)}
        },
        "q + where": lambda: {
            "q": rng.choice(common[:300]),
            "where": {"status": rng.choice(STATUSES), "score": {"$gte": rng.randint(0, 90)}},
        },
    }
    results = {}
    for name, make in cases.items():
        times = []
        found = 0
        for i in range(args.runs + 5):
            agent = rng.choice(agents)
            params = make()
            start = time.perf_counter()
            page = selectors.artifacts_page(agent=agent, limit=50, **params)
            elapsed = (time.perf_counter() - start) * 1000
            if i >= 5:  # warm-up
                times.append(elapsed)
                found += len(page.rows)
        results[name] = {
            "p50_ms": round(statistics.median(times), 2),
            "p99_ms": round(_percentile(times, 0.99), 2),
            "rows_per_page": round(found / args.runs, 1),
        }
    sizes = index_size(connection)
    print(
        json.dumps(
            {
                "db": args.db,
                "records": args.records,
                "agents": args.agents,
                "build_s": round(built),
                "cases": results,
                "index_bytes": sizes,
            },
            indent=1,
        )
    )


def index_size(connection) -> dict[str, int]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            sizes = {}
            for name in ("artifact_search_words", "artifact_data_paths", "artifact_updated"):
                cursor.execute("SELECT pg_relation_size(%s)", [name])
                sizes[name] = cursor.fetchone()[0]
            cursor.execute(
                "SELECT coalesce(sum(pg_column_size(search_words)), 0) FROM artifacts_app_artifact"
            )
            sizes["search_words column"] = int(cursor.fetchone()[0])
            cursor.execute("SELECT pg_total_relation_size('artifacts_app_artifact')")
            sizes["artifact table, all"] = cursor.fetchone()[0]
            return sizes
        cursor.execute(
            "SELECT name, sum(pgsize) FROM dbstat WHERE name LIKE 'artifacts_app_artifact_fts%' "
            "OR name IN ('artifact_updated', 'artifacts_app_artifact') GROUP BY name"
        )
        return {name: int(size) for name, size in cursor.fetchall()}


# --- tags ---------------------------------------------------------------------------------------


def tags(args: argparse.Namespace) -> None:
    if args.db == "postgresql":
        fresh_pg()
    setup(args.db)
    from artifacts_app import services
    from artifacts_app.services import _write

    agent = services.agent_create(slug="bench-tags", max_artifacts=10_000_000)
    indexed = _write._index_write
    text = ("lorem ipsum dolor sit amet " * 160)[:4096]
    rounds: dict[str, list[float]] = {}
    counter = iter(range(10**9))

    def run(name: str, contents: bool) -> None:
        def one(_: int) -> None:
            n = next(counter)
            services.artifact_tag(
                agent=agent,
                kind="note",
                key=f"k{n}",
                title=f"Tag {n}",
                data={"pr": {"author": f"u{n % 50}", "n": n}, "summary": "a short summary"},
                contents=f"{text}{n}" if contents else None,
                content_type="text/plain" if contents else None,
            )

        from bench._setup import rate

        rounds.setdefault(name, []).append(rate(one, args.n))

    for _ in range(args.rounds):
        for contents in (False, True):
            suffix = ", 4 KiB text" if contents else ""
            _write._index_write = indexed
            run(f"with index{suffix}", contents)
            _write._index_write = lambda *a, **k: None
            run(f"without index{suffix}", contents)
    _write._index_write = indexed
    medians = {name: round(statistics.median(values), 1) for name, values in rounds.items()}
    print(
        json.dumps(
            {
                "db": args.db,
                "tags_per_s": medians,
                "ratio": round(medians["with index"] / medians["without index"], 2),
                "ratio_contents": round(
                    medians["with index, 4 KiB text"] / medians["without index, 4 KiB text"], 2
                ),
            },
            indent=1,
        )
    )


# --- the peer -------------------------------------------------------------------------------------

PEER = r"""
import json, random, sys, time
from langgraph.store.base import PutOp
from langgraph.store.postgres import PostgresStore

url, items, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with PostgresStore.from_conn_string(url) as store:
    store.setup()
    started = time.perf_counter()
    ops = []
    for n in range(items):
        value = json.loads(sys.stdin.readline())
        ops.append(PutOp(("bench", "items"), f"k-{n}", value, index=False))
        if len(ops) == 1000:
            store.batch(ops)
            ops = []
    if ops:
        store.batch(ops)
    built = time.perf_counter() - started
    rng = random.Random(7)
    filters = [{"author": f"user{rng.randint(0, 199)}", "status": rng.choice(["open", "merged", "closed", "draft"])} for _ in range(runs)]
    store.search(("bench",), filter=filters[0], limit=10)
    start = time.perf_counter()
    found = 0
    for f in filters:
        found += len(store.search(("bench",), filter=f, limit=10))
    elapsed = time.perf_counter() - start
    print(json.dumps({"qps": runs / elapsed, "build_s": built, "found": found}))
"""


def values(items: int) -> list[dict]:
    rng = random.Random(2026)
    return [
        {
            "author": f"user{rng.randint(0, 199)}",
            "status": rng.choice(STATUSES),
            "score": rng.randint(0, 99),
            "summary": f"item {n}",
        }
        for n in range(items)
    ]


def peer(args: argparse.Namespace) -> None:
    if not BENCH_VENV.exists():
        sys.exit(f"{BENCH_VENV} is missing: make it (pip install -e '.[bench]') first.")
    fresh_pg()
    data = values(args.items)
    theirs_run = subprocess.run(
        [str(BENCH_VENV), "-c", PEER, PG_URL, str(args.items), str(args.runs)],
        input="\n".join(json.dumps(v) for v in data) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    if theirs_run.returncode:
        sys.exit(theirs_run.stderr[-3000:])
    theirs = json.loads(theirs_run.stdout)
    setup("postgresql")
    from django.db import connection, transaction

    from artifacts_app import search, selectors, services
    from artifacts_app.models import Artifact

    agent = services.agent_create(slug="bench-peer", max_artifacts=args.items + 1)
    table = connection.ops.quote_name(Artifact._meta.db_table)
    now = datetime.now(UTC)
    started = time.perf_counter()
    for start in range(0, args.items, 1000):
        chunk = data[start : start + 1000]
        rows = []
        for offset, value in enumerate(chunk):
            n = start + offset
            at = now - timedelta(seconds=args.items - n)
            doc = search.document(kind="item", key=f"k-{n}", title=None, data=value, content=None)
            rows += [f"art_{n:024x}", agent.pk, "item", f"k-{n}", json.dumps(value), at, at]
            rows.append(doc.tsvector())
        one = "(%s, %s, %s, %s, %s, 'host', 1, false, %s, %s, %s::tsvector)"
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (id, agent_id, kind, key, data, source, version, pinned, "
                f"created_at, updated_at, search_words) VALUES {', '.join([one] * len(chunk))}",
                rows,
            )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    built = time.perf_counter() - started
    rng = random.Random(7)
    filters = [
        {"author": f"user{rng.randint(0, 199)}", "status": rng.choice(STATUSES)}
        for _ in range(args.runs)
    ]
    selectors.artifacts_page(agent=agent, where=filters[0], limit=10)
    start = time.perf_counter()
    found = 0
    for where in filters:
        found += len(selectors.artifacts_page(agent=agent, where=where, limit=10).rows)
    ours = args.runs / (time.perf_counter() - start)
    print(
        json.dumps(
            {
                "items": args.items,
                "ours_qps": round(ours, 1),
                "langgraph_qps": round(theirs["qps"], 1),
                "ratio": round(ours / theirs["qps"], 2),
                "found_ours": found,
                "found_langgraph": theirs["found"],
                "build_s": {"ours": round(built), "langgraph": round(theirs["build_s"])},
            },
            indent=1,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    q = sub.add_parser("query")
    q.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    q.add_argument("--records", type=int, default=1_000_000)
    q.add_argument("--agents", type=int, default=50)
    q.add_argument("--runs", type=int, default=200)
    t = sub.add_parser("tags")
    t.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    t.add_argument("--n", type=int, default=300)
    t.add_argument("--rounds", type=int, default=5)
    p = sub.add_parser("peer")
    p.add_argument("--items", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    if getattr(args, "db", "") == "sqlite":
        os.environ.setdefault("ARTIFACTS_DATA_DIR", tempfile.mkdtemp(prefix="search-bench-"))
    {"query": query, "tags": tags, "peer": peer}[args.what](args)


if __name__ == "__main__":
    main()
