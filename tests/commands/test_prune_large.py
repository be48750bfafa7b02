"""A prune of 200,000 records keeps memory flat: batches, not a list of everything."""

from __future__ import annotations

import io
import threading
from datetime import timedelta

import psutil
import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from artifacts_app import services
from artifacts_app.models import Artifact, Event

N = 200_000
IN_SESSION = 2_000


def bulk_insert(agent_id: int, session_pk: int, count: int = N) -> None:
    """``count`` records of the agent written by SQL (no versions, no events), oldest first."""
    table = connection.ops.quote_name(Artifact._meta.db_table)
    columns = "id, agent_id, kind, data, session_id, source, created_at, updated_at"
    start = timezone.now() - timedelta(days=60)
    with transaction.atomic(), connection.cursor() as cursor:
        for offset in range(0, count, 10_000):
            rows = []
            for i in range(offset, min(offset + 10_000, count)):
                at = connection.ops.adapt_datetimefield_value(start + timedelta(seconds=i))
                rows.append(
                    (
                        f"art_big{i:08d}",
                        agent_id,
                        "note",
                        "{}",
                        session_pk if i < IN_SESSION else None,
                        "host",
                        at,
                        at,
                    )
                )
            cursor.executemany(
                f"INSERT INTO {table} ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", rows
            )
        cursor.execute(
            "UPDATE artifacts_app_agent SET artifact_count = %s WHERE id = %s", [count, agent_id]
        )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_prune_of_200k_records_keeps_memory_flat():
    agent = services.agent_create(slug="prune-200k", max_artifacts=N + 10)
    session = services.session_create(agent=agent, sid="big-session")
    bulk_insert(agent.pk, session.pk)
    services.artifact_tag(agent=agent, kind="note", key="fresh", data={})

    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = baseline
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, process.memory_info().rss)
            done.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out = io.StringIO()
    try:
        call_command(
            "prune_artifacts",
            "--agent",
            "prune-200k",
            "--older-than",
            "30d",
            "--batch-size",
            "2000",
            stdout=out,
        )
    finally:
        done.set()
        sampler.join()
    growth = (peak - baseline) / 2**20
    print(f"prune of {N} records: RSS grew {growth:.1f} MiB; {out.getvalue()}")
    assert f"Pruned {N} artifact(s)" in out.getvalue()
    # Holding 200,000 rows as Python objects would cost well over 60 MiB; batches cost a few.
    assert growth < 30, f"RSS grew {growth:.1f} MiB"
    agent.refresh_from_db()
    assert agent.artifact_count == 1 == Artifact.objects.filter(agent=agent).count()
    assert Event.objects.filter(agent=agent, payload__reason="pruned").count() == IN_SESSION
