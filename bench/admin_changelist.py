"""The admin's artifact changelist at N rows: Django's stock changelist beside ours, same run.

    .venv/bin/python bench/admin_changelist.py [--rows 1000000] [--loads 20]
    ARTIFACTS_DATA_DIR=<an earlier run's dir> .venv/bin/python bench/admin_changelist.py  # reuse its rows

Both render `/admin/artifacts_app/artifact/` for one agent through the test client as a superuser;
"stock" is the same ModelAdmin with Django's own ChangeList (a COUNT over the filtered rows on every
load, and its date drill-down that asks the table for its years). Rows are bulk-inserted fixture
data spread over two agents. The database is the one the settings choose (SQLite in a temporary
data dir unless DATABASE_URL says otherwise).
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import timedelta

from _setup import django_setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--loads", type=int, default=20)
    args = parser.parse_args()
    django_setup()

    from django.conf import settings
    from django.contrib.admin.views.main import ChangeList
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.utils import timezone

    from artifacts_app import services
    from artifacts_app.admin.artifacts import ArtifactAdmin
    from artifacts_app.models import Agent, Artifact

    call_command("collectstatic", "--noinput", verbosity=0)  # DEBUG off serves the manifest's names
    settings.ALLOWED_HOSTS = ["*"]
    # ARTIFACTS_DATA_DIR of an earlier run with its rows in place: measure again without inserting.
    reuse = Agent.objects.filter(slug="big").exists()
    big = (
        Agent.objects.get(slug="big")
        if reuse
        else services.agent_create(slug="big", max_artifacts=10**9)
    )
    other = Agent.objects.get(slug="reviewer")
    start = timezone.now() - timedelta(days=300)
    batch = []
    t0 = time.perf_counter()
    for n in range(0 if reuse else args.rows):
        batch.append(
            Artifact(
                id=f"art_{n:024x}",
                agent=big if n % 10 else other,
                kind="report",
                key=f"k-{n}",
                title=f"Row {n}",
                data={"n": n},
                created_at=start + timedelta(seconds=n * 20),
                updated_at=start + timedelta(seconds=n * 20),
            )
        )
        if len(batch) == 10_000:
            Artifact.objects.bulk_create(batch)
            batch = []
    Artifact.objects.bulk_create(batch)
    args.rows = Artifact.objects.count()
    print(
        f"{args.rows:,} rows ({'reused' if reuse else 'inserted'}) in {time.perf_counter() - t0:.0f} s"
    )

    user = get_user_model().objects.filter(
        username="bench"
    ).first() or get_user_model().objects.create_superuser("bench", password="bench-pw-123")
    client = Client()
    client.force_login(user)

    def timed(url: str) -> float:
        client.get(url)  # warm up
        samples = []
        for _ in range(args.loads):
            t = time.perf_counter()
            response = client.get(url)
            samples.append(time.perf_counter() - t)
            assert response.status_code == 200, response.status_code
        return statistics.median(samples) * 1000

    urls = {
        "first page": "/admin/artifacts_app/artifact/?agent=big",
        "kind filter": "/admin/artifacts_app/artifact/?agent=big&kind=report",
        "page 50": "/admin/artifacts_app/artifact/?agent=big&p=50",
    }
    ours = {name: timed(url) for name, url in urls.items()}
    uncounted = ArtifactAdmin.get_changelist
    ArtifactAdmin.get_changelist = lambda self, request, **kw: ChangeList
    ArtifactAdmin.show_full_result_count = True
    ArtifactAdmin.change_list_template = "admin/change_list.html"  # its date drill-down, its pages
    stock = {name: timed(url) for name, url in urls.items()}
    ArtifactAdmin.get_changelist = uncounted
    ArtifactAdmin.show_full_result_count = False
    ArtifactAdmin.change_list_template = None

    print(f"\n{args.rows:,} rows, median of {args.loads} loads")
    print(f"{'page':<14}{'stock ms':>10}{'ours ms':>10}{'stock/ours':>12}")
    for name in urls:
        print(f"{name:<14}{stock[name]:>10.1f}{ours[name]:>10.1f}{stock[name] / ours[name]:>12.1f}")


if __name__ == "__main__":
    main()
