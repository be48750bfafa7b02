"""The admin's home (what shipped, every agent) at N rows, server time per page load.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> .venv/bin/python bench/home.py \\
        [--rows 1000000] [--loads 30]

Each load renders `/admin/` through the test client as staff (the whole response: the page's
statements, the previews, the template), so the time is the server's, with no network. Rows are
fixture data spread over 20 agents, written with one INSERT … SELECT over generate_series on
PostgreSQL (bulk_create elsewhere); an earlier run's rows are reused. The baseline, measured in the
same run, is Django's own app index of the admin (`/admin/artifacts_app/`: no artifact read at all),
so "home / index" is what reading and drawing 50 rows across agents adds to a bare admin page.
"""

from __future__ import annotations

import argparse
import statistics
import time

from _setup import django_setup

AGENTS = 20
CHUNK = 50_000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--loads", type=int, default=30)
    args = parser.parse_args()
    django_setup()

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from artifacts_app import services
    from artifacts_app.models import Agent, Artifact

    call_command("collectstatic", "--noinput", verbosity=0)
    settings.ALLOWED_HOSTS = ["*"]
    for n in range(AGENTS):
        if not Agent.objects.filter(slug=f"bench-{n}").exists():
            services.agent_create(slug=f"bench-{n}", max_artifacts=10**9)
    pks = list(
        Agent.objects.filter(slug__startswith="bench-").order_by("pk").values_list("pk", flat=True)
    )
    have = Artifact.objects.filter(agent_id__in=pks).count()
    t0 = time.perf_counter()
    if have < args.rows:
        insert(connection, pks, start=have, stop=args.rows)
    print(f"{args.rows:,} rows ({have:,} reused) in {time.perf_counter() - t0:.0f} s")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE artifacts_app_artifact")

    user = get_user_model().objects.filter(username="bench").first()
    if user is None:
        user = get_user_model().objects.create_user("bench", password="x", is_staff=True)
    client = Client()
    client.force_login(user)

    def timed(url: str) -> tuple[float, float]:
        client.get(url)  # warm up
        samples = []
        for _ in range(args.loads):
            t = time.perf_counter()
            response = client.get(url)
            samples.append(time.perf_counter() - t)
            assert response.status_code == 200, (url, response.status_code)
        samples.sort()
        return statistics.median(samples) * 1000, samples[int(len(samples) * 0.9)] * 1000

    home = client.get("/admin/").content.decode()
    cursor = home.split('class="older"')[0].rsplit('href="?cursor=', 1)[1].split('"')[0]
    urls = {
        "index (baseline)": "/admin/artifacts_app/",
        "home": "/admin/",
        "home, older page": f"/admin/?cursor={cursor}",
        "home, one agent": "/admin/?agent=bench-7",
        "home, kind": "/admin/?kind=note",
        "home, source": "/admin/?source=model",
        "home, since a day": "/admin/?since=2026-06-01",
    }
    results = {name: timed(url) for name, url in urls.items()}
    base = results["index (baseline)"][0]
    print(f"\n{args.rows:,} rows on {connection.vendor}, {args.loads} loads each")
    print(f"{'page':<20}{'p50 ms':>9}{'p90 ms':>9}{'p50 / index':>13}")
    for name, (p50, p90) in results.items():
        print(f"{name:<20}{p50:>9.1f}{p90:>9.1f}{p50 / base:>13.2f}")


def insert(connection, pks: list[int], *, start: int, stop: int) -> None:
    """Rows ``start``…``stop``: one per 20 s going back from now, agents in turn, every tenth of
    kind "note" and every seventh from the model."""
    from datetime import UTC, datetime, timedelta

    if connection.vendor == "postgresql":
        # In chunks: the site's statement timeout bounds each statement.
        for first in range(start, stop, CHUNK):
            _insert_pg(connection, pks, first, min(first + CHUNK, stop))
        return
    from artifacts_app.models import Artifact

    now = datetime.now(UTC)
    batch = []
    for n in range(start, stop):
        at = now - timedelta(seconds=20 * n)
        batch.append(
            Artifact(
                id=f"art_{n:024x}", agent_id=pks[n % len(pks)],
                kind="note" if n % 10 == 0 else "report", key=f"https://example.com/reports/{n}",
                title=f"Report number {n}", data={"n": n, "verdict": "approve", "score": n % 100},
                source="model" if n % 7 == 0 else "host", created_at=at, updated_at=at,
            )
        )  # fmt: skip
        if len(batch) == 10_000:
            Artifact.objects.bulk_create(batch)
            batch = []
    Artifact.objects.bulk_create(batch)


def _insert_pg(connection, pks: list[int], start: int, stop: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO artifacts_app_artifact
              (id, agent_id, kind, key, title, data, source, version, pinned,
               created_at, updated_at)
            SELECT 'art_' || lpad(to_hex(n), 24, '0'),
                   (%s::int[])[1 + n %% %s],
                   CASE WHEN n %% 10 = 0 THEN 'note' ELSE 'report' END,
                   'https://example.com/reports/' || n,
                   'Report number ' || n,
                   jsonb_build_object('n', n, 'verdict', 'approve', 'score', n %% 100),
                   CASE WHEN n %% 7 = 0 THEN 'model' ELSE 'host' END,
                   1, false,
                   now() - n * interval '20 seconds',
                   now() - n * interval '20 seconds'
            FROM generate_series(%s, %s) AS n
            """,
            [pks, len(pks), start, stop - 1],
        )


if __name__ == "__main__":
    main()
