"""Concurrent tags on a SQLite *file* database (the test database is a file, see settings)."""

from __future__ import annotations

import threading

import pytest
from django.db import close_old_connections, connection

from artifacts_app import services
from artifacts_app.models import Agent, Artifact, Event


@pytest.mark.django_db(transaction=True)
def test_threads_tagging_one_agent_stay_exact():
    assert connection.vendor != "sqlite" or not connection.is_in_memory_db()
    agent = services.agent_create(slug="busy", max_artifacts=20)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(50):
                key = "shared" if i % 2 == 0 else f"w{n}-{i}"
                services.artifact_tag(agent="busy", kind="note", key=key, data={"w": n, "i": i})
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert Artifact.objects.filter(agent=agent).count() == 20
    assert Artifact.objects.filter(agent=agent, key="shared").count() == 1
    agent.refresh_from_db()
    assert agent.artifact_count == 20
    seqs = list(Event.objects.filter(agent=agent).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert agent.last_seq == len(seqs)
    tagged = Event.objects.filter(agent=agent, type="artifact.tagged").count()
    evicted = Event.objects.filter(agent=agent, type="artifact.deleted").count()
    assert tagged == 400
    # 8 × 25 unkeyed-per-worker keys + 1 shared key were created; all but 20 were evicted.
    assert evicted == 201 - 20
    assert Agent.objects.get(pk=agent.pk).artifact_count == 20


@pytest.mark.django_db(transaction=True)
def test_sixteen_concurrent_retags_of_one_key_number_versions_1_to_16():
    from artifacts_app.models import ArtifactVersion

    assert connection.vendor != "sqlite" or not connection.is_in_memory_db()
    agent = services.agent_create(slug="racing", max_artifacts=100, keep_versions=100)
    errors: list[BaseException] = []
    answered: list[int] = []
    barrier = threading.Barrier(16)

    def worker(n: int) -> None:
        try:
            barrier.wait()
            record = services.artifact_tag(
                agent="racing", kind="note", key="one", data={"w": n}
            ).record
            answered.append(record.version)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert sorted(answered) == list(range(1, 17))  # no gap, no duplicate
    record = Artifact.objects.get(agent=agent)
    assert record.version == 16
    stored = list(
        ArtifactVersion.objects.filter(artifact=record)
        .order_by("number")
        .values_list("number", "data")
    )
    assert [n for n, _ in stored] == list(range(1, 17))
    assert len({d["w"] for _, d in stored}) == 16  # each version is one worker's tag
    # The record holds what its newest version holds.
    assert record.data == stored[-1][1]
    tagged = Event.objects.filter(agent=agent, type="artifact.tagged").order_by("seq")
    assert [e.payload["record"]["version"] for e in tagged] == list(range(1, 17))


@pytest.mark.django_db(transaction=True)
def test_a_tag_committing_while_a_content_put_streams_keeps_its_fields():
    """The content PUT re-tags the record with its own fields: they are read under the agent's
    lock, in the PUT's transaction, so a tag from another connection that commits while the PUT's
    body streams is kept, not overwritten with the fields it replaced (a lost update)."""
    import hashlib

    assert connection.vendor != "sqlite" or not connection.is_in_memory_db()
    services.agent_create(slug="racer", max_artifacts=10)
    first = services.artifact_tag(
        agent="racer", kind="note", key="doc", title="old", data={"v": 1}, turn_id="t-1"
    ).record
    errors: list[BaseException] = []

    def retag() -> None:
        try:
            services.artifact_tag(
                agent="racer", kind="memo", key="doc", title="new", data={"v": 2}, turn_id="t-2"
            )
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    def body():
        # The PUT has begun — the record looked up — when its body comes: another connection's
        # tag commits now, before the first byte.
        thread = threading.Thread(target=retag)
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive()
        yield b"new "
        yield b"bytes"

    result = services.artifact_content_put(
        agent="racer", artifact_id=first.id, contents=body(), content_type="text/plain"
    )
    assert errors == []
    answered = result.record
    assert (answered.kind, answered.title, answered.data, answered.turn_id) == (
        "memo",
        "new",
        {"v": 2},
        "t-2",
    )
    stored = Artifact.objects.get(pk=first.id)
    assert (stored.kind, stored.title, stored.data, stored.turn_id) == (
        "memo",
        "new",
        {"v": 2},
        "t-2",
    )
    assert stored.version == 3 and stored.blob_id == hashlib.sha256(b"new bytes").hexdigest()
    from artifacts_app.models import ArtifactVersion

    newest = ArtifactVersion.objects.get(artifact_id=first.id, number=3)
    assert (newest.title, newest.data, newest.blob_id) == ("new", {"v": 2}, stored.blob_id)
