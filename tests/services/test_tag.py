"""The Tag rules of API.md, held by the one service."""

from __future__ import annotations

import hashlib
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from artifacts_app import blobs, services
from artifacts_app.errors import ArtifactError, NotFoundError, TooLargeError
from artifacts_app.models import Agent, Artifact, Blob, Event
from tests.conftest import blob_files


def state(agent: Agent) -> tuple:
    agent.refresh_from_db()
    return (
        Artifact.objects.count(),
        Blob.objects.count(),
        Event.objects.count(),
        agent.artifact_count,
        agent.last_seq,
        sorted(str(p) for p in blob_files()),
    )


def test_same_key_keeps_id_and_created_at_and_moves_updated_at(reviewer, monkeypatch):
    # A clock that moves 1 ms per reading: the re-tag is later whatever the machine's load.
    start = timezone.now()
    ticks = iter(range(1, 1000))
    monkeypatch.setattr(timezone, "now", lambda: start + timedelta(milliseconds=next(ticks)))
    first = services.artifact_tag(agent=reviewer, kind="report", key="k1", data={"v": 1})
    second = services.artifact_tag(agent=reviewer, kind="report", key="k1", data={"v": 2})
    assert first.created and not second.created
    assert first.record.id == second.record.id == services.keyed_id("reviewer", "k1")
    assert second.record.created_at == first.record.created_at
    assert second.record.updated_at > first.record.updated_at
    assert Artifact.objects.get(pk=first.record.id).data == {"v": 2}


def test_unkeyed_tags_get_unique_ids(reviewer):
    ids = {
        services.artifact_tag(agent=reviewer, kind="report", data={}).record.id for _ in range(5)
    }
    assert len(ids) == 5


def test_key_is_unique_across_kinds(reviewer):
    a = services.artifact_tag(agent=reviewer, kind="report", key="shared", data={"a": 1})
    b = services.artifact_tag(
        agent=reviewer, kind="reviewed-pr", key="shared", data={"url": "https://x/1"}, title="t"
    )
    assert a.record.id == b.record.id
    assert Artifact.objects.filter(agent=reviewer).count() == 1
    assert Artifact.objects.get().kind == "reviewed-pr"


def test_retag_replaces_left_out_fields_with_defaults(reviewer, alice):
    services.session_create(agent=reviewer, sid="s1", owner=alice)
    services.artifact_tag(
        agent=reviewer,
        kind="report",
        key="k",
        title="T",
        data=1,
        session_id="s1",
        turn_id="t1",
        source="model",
    )
    again = services.artifact_tag(agent=reviewer, kind="report", key="k", data=2).record
    assert (again.title, again.session_id, again.turn_id, again.source) == (
        None,
        None,
        None,
        "host",
    )


def test_declared_kinds_refuse_other_kinds(reviewer):
    with pytest.raises(ArtifactError) as exc:
        services.artifact_tag(agent=reviewer, kind="poem", data={})
    assert exc.value.code == "unknown_kind"
    assert exc.value.details["allowed"] == ["report", "reviewed-pr"]
    with pytest.raises(ArtifactError) as exc:
        services.artifact_tag(agent=reviewer, data={})
    assert exc.value.code == "unknown_kind"


def test_freeform_accepts_any_kind_and_defaults_omitted_kind(freeform):
    assert services.artifact_tag(agent=freeform, kind="poem", data="x").record.kind == "poem"
    assert services.artifact_tag(agent=freeform, data="x").record.kind == "artifact"
    for bad in ("", "-lead", "a" * 65, "sp ace", 5):
        with pytest.raises(ArtifactError) as exc:
            services.artifact_tag(agent=freeform, kind=bad, data="x")
        assert exc.value.code == "invalid_kind"


def test_schema_defaults_and_coercions_are_stored(strict):
    record = services.artifact_tag(
        agent=strict, kind="finding", data={"title": "x", "severity": "3"}
    ).record
    assert record.data == {"title": "x", "severity": 3, "tags": []}
    assert Artifact.objects.get(pk=record.id).data == {"title": "x", "severity": 3, "tags": []}
    assert services.artifact_tag(agent=strict, kind="count", data="42").record.data == 42
    assert services.artifact_tag(agent=strict, kind="note", data={"free": True}).record.data == {
        "free": True
    }


def test_schema_errors_carry_the_validators_details(strict):
    before = state(strict)
    with pytest.raises(ArtifactError) as exc:
        services.artifact_tag(agent=strict, kind="finding", data={"severity": "high"})
    err = exc.value
    assert err.code == "schema_invalid"
    locs = {tuple(item["loc"]) for item in err.details}
    assert locs == {("title",), ("severity",)}
    assert {item["type"] for item in err.details} == {"missing", "int_parsing"}
    assert "finding" in err.message
    assert state(strict) == before


def test_data_null_is_refused(freeform):
    with pytest.raises(ArtifactError) as exc:
        services.artifact_tag(agent=freeform, data=None)
    assert exc.value.code == "data_required"


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("key", "k" * 1025, "invalid_key"),
        ("key", "", "invalid_key"),
        ("key", 5, "invalid_key"),
        ("title", "t" * 513, "invalid_title"),
        ("turn_id", "t" * 129, "invalid_turn_id"),
        ("session_id", "bad id", "invalid_session_id"),
        ("session_id", "s" * 129, "invalid_session_id"),
        ("source", "robot", "invalid_source"),
        ("content_type", "text/plain\r\nX-Evil: 1", "invalid_content_type"),
    ],
)
def test_field_limits_are_refused_and_change_nothing(freeform, field, value, code):
    before = state(freeform)
    kwargs = {"agent": freeform, "data": {}, field: value}
    if field == "content_type":
        kwargs["contents"] = b"x"
    with pytest.raises(ArtifactError) as exc:
        services.artifact_tag(**kwargs)
    assert exc.value.code == code
    assert exc.value.message.endswith(".")
    assert state(freeform) == before


def test_limits_count_characters_not_bytes(freeform):
    key = "é" * 1024  # 2048 bytes, 1024 characters
    assert (
        services.artifact_tag(agent=freeform, key=key, title="ü" * 512, data={}).record.key == key
    )


def test_content_type_without_contents_is_refused(freeform):
    with pytest.raises(ArtifactError) as exc:
        services.artifact_tag(agent=freeform, data={}, content_type="text/markdown")
    assert exc.value.code == "content_type_without_contents"


def test_unknown_session_is_refused_and_leaves_no_blob(freeform):
    before = state(freeform)
    with pytest.raises(NotFoundError) as exc:
        services.artifact_tag(agent=freeform, data={}, session_id="nope", contents=b"bytes")
    assert exc.value.code == "unknown_session"
    assert state(freeform) == before


def test_session_of_another_agent_is_unknown(freeform, reviewer):
    services.session_create(agent=reviewer, sid="theirs")
    with pytest.raises(NotFoundError):
        services.artifact_tag(agent=freeform, data={}, session_id="theirs")


def test_retag_without_contents_keeps_blob(freeform):
    first = services.artifact_tag(
        agent=freeform, key="k", data={}, contents=b"hello", content_type="text/x-a"
    )
    again = services.artifact_tag(agent=freeform, key="k", data={"v": 2}).record
    assert again.content == first.record.content
    assert again.content.content_type == "text/x-a"
    assert Artifact.objects.get(pk=again.id).blob_id == hashlib.sha256(b"hello").hexdigest()


@pytest.mark.parametrize(("old", "new"), [(None, "s1"), ("s1", None), ("s1", "s2")])
def test_retag_drops_content_when_session_changes(freeform, alice, bob, old, new):
    services.session_create(agent=freeform, sid="s1", owner=alice)
    services.session_create(agent=freeform, sid="s2", owner=bob)
    services.artifact_tag(agent=freeform, key="k", data={}, session_id=old, contents=b"private")
    again = services.artifact_tag(agent=freeform, key="k", data={}, session_id=new).record
    assert again.content is None
    assert Artifact.objects.get(pk=again.id).blob_id is None


def test_retag_with_new_contents_replaces_content(freeform):
    services.artifact_tag(agent=freeform, key="k", data={}, contents=b"one")
    again = services.artifact_tag(agent=freeform, key="k", data={}, contents="two").record
    assert again.content.sha256 == hashlib.sha256(b"two").hexdigest()
    assert again.content.content_type == "text/plain; charset=utf-8"


def test_content_type_defaults(freeform):
    text = services.artifact_tag(agent=freeform, data={}, contents="é").record.content
    raw = services.artifact_tag(agent=freeform, data={}, contents=b"\x00\x01").record.content
    assert (text.content_type, text.size) == ("text/plain; charset=utf-8", 2)
    assert raw.content_type == "application/octet-stream"


def test_identical_contents_are_stored_once(freeform):
    a = services.artifact_tag(agent=freeform, data={}, contents=b"same bytes").record
    b = services.artifact_tag(agent=freeform, data={}, contents=io.BytesIO(b"same bytes")).record
    assert a.content.sha256 == b.content.sha256
    assert Blob.objects.count() == 1
    assert len(blob_files()) == 1
    assert blobs.blob_read(a.content.sha256) == b"same bytes"


def test_oversize_content_is_refused_with_nothing_stored(freeform, settings):
    settings.ARTIFACTS_MAX_CONTENT_BYTES = 1000
    before = state(freeform)
    with pytest.raises(TooLargeError) as exc:
        services.artifact_tag(agent=freeform, data={}, contents=io.BytesIO(b"x" * 1001))
    assert exc.value.code == "content_too_large"
    assert "ARTIFACTS_MAX_CONTENT_BYTES" in exc.value.message
    assert state(freeform) == before
    services.artifact_tag(
        agent=freeform, data={}, contents=b"x" * 1000
    )  # the limit itself is allowed


def test_oversize_data_is_refused(freeform, settings):
    settings.ARTIFACTS_MAX_DATA_BYTES = 100
    before = state(freeform)
    with pytest.raises(TooLargeError) as exc:
        services.artifact_tag(agent=freeform, data={"x": "y" * 100})
    assert exc.value.code == "data_too_large"
    assert state(freeform) == before


def test_data_that_is_not_json_is_refused(freeform):
    with pytest.raises(ArtifactError) as exc:
        services.artifact_tag(agent=freeform, data={"s": {1, 2}})
    assert exc.value.code == "invalid_data"


def test_unknown_agent(db):
    with pytest.raises(NotFoundError) as exc:
        services.artifact_tag(agent="ghost", data={})
    assert exc.value.code == "unknown_agent"


def test_agent_by_slug_loads_the_row_as_the_orm_does(reviewer, freeform):
    for agent in (reviewer, freeform):
        services.artifact_tag(agent=agent, kind="note" if agent is freeform else "report", data={})
        fast, orm = services.agent_get(agent.slug), Agent.objects.get(slug=agent.slug)
        # Kinds declared over HTTP are found by kinds_hash; their column loads only when asked.
        assert fast.get_deferred_fields() == {"kinds"}
        for field in Agent._meta.concrete_fields:
            assert getattr(fast, field.attname) == getattr(orm, field.attname), field.attname
        assert fast.created_at.tzinfo is not None and fast._state.adding is False


def _raw_row(artifact_id: str) -> dict:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {Artifact._meta.db_table} WHERE id = %s", [artifact_id])
        names = [column[0] for column in cursor.description]
        return dict(zip(names, cursor.fetchone(), strict=True))


@pytest.mark.parametrize("retag", [False, True])
def test_the_tag_writes_the_row_the_orm_would(freeform, alice, retag):
    # The record's row is one SQL statement (services/_sql.py): column for column, as stored, it
    # is what Artifact.objects.create / .update would have written with the same values.
    services.session_create(agent=freeform, sid="s_row", owner=alice)
    data = {"é": [1, 2.5, None, True, "\u2603"], "nested": {"a": {"b": []}}}
    if retag:
        services.artifact_tag(agent=freeform, kind="old", key="k", data={"v": 0})
    tagged = services.artifact_tag(
        agent=freeform,
        kind="note",
        key="k",
        title="Title",
        data=data,
        session_id="s_row",
        turn_id="t-1",
        contents=b"abc",
        content_type="text/plain",
    ).record
    ours = _raw_row(tagged.id)
    values = {
        field: ours[field]
        for field in ("session_id", "blob_id", "content_type", "version", "source")
    }
    orm_id = "art_orm"
    written = dict(
        kind="note",
        key="k2",
        title="Title",
        data=data,
        turn_id="t-1",
        updated_at=tagged.updated_at,
        **values,
    )
    if retag:
        Artifact.objects.create(id=orm_id, agent=freeform, kind="old", key="k2", data={"v": 0})
        Artifact.objects.filter(pk=orm_id).update(**written)
        Artifact.objects.filter(pk=orm_id).update(created_at=tagged.created_at)
    else:
        Artifact.objects.create(id=orm_id, agent=freeform, created_at=tagged.created_at, **written)
    theirs = _raw_row(orm_id)
    # On PostgreSQL the tag also writes its search words into the row (an ORM write has none).
    words = {"search_words"} if connection.vendor == "postgresql" else set()
    assert {name for name in ours if ours[name] != theirs[name]} == {"id", "key", *words}
    assert ours["version"] == (2 if retag else 1) and not ours["pinned"]


def test_eviction_removes_exactly_the_oldest_updated_at_max(strict):
    ids = [
        services.artifact_tag(agent=strict, kind="note", key=f"k{i}", data=i).record.id
        for i in range(5)
    ]
    # Touch k0 so that k1 becomes the oldest-updated.
    services.artifact_tag(agent=strict, kind="note", key="k0", data="again")
    newest = services.artifact_tag(agent=strict, kind="note", key="k5", data=5).record
    remaining = set(Artifact.objects.filter(agent=strict).values_list("id", flat=True))
    assert remaining == (set(ids) - {ids[1]}) | {newest.id}
    strict.refresh_from_db()
    assert strict.artifact_count == 5
    evicted = Event.objects.get(type="artifact.deleted")
    assert evicted.payload["reason"] == "evicted"
    assert evicted.payload["record"] == {"id": ids[1], "key": "k1", "kind": "note"}


def test_retag_at_cap_evicts_nothing(strict):
    for i in range(5):
        services.artifact_tag(agent=strict, kind="note", key=f"k{i}", data=i)
    services.artifact_tag(agent=strict, kind="note", key="k0", data="again")
    assert Artifact.objects.filter(agent=strict).count() == 5
    assert not Event.objects.filter(type="artifact.deleted").exists()


def test_seq_is_gapless_per_agent(freeform, reviewer):
    for i in range(3):
        services.artifact_tag(agent=freeform, data=i)
        services.artifact_tag(agent=reviewer, kind="report", data=i)
    a = services.artifact_tag(agent=freeform, key="x", data=1).record
    services.artifact_delete(agent=freeform, artifact_id=a.id)
    for agent in (freeform, reviewer):
        seqs = list(Event.objects.filter(agent=agent).order_by("seq").values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1))
        agent.refresh_from_db()
        assert agent.last_seq == len(seqs)


def test_tag_event_shape(freeform, alice):
    services.session_create(agent=freeform, sid="s1", owner=alice)
    record = services.artifact_tag(
        agent=freeform,
        kind="note",
        key="k",
        title="T",
        data={"a": 1},
        session_id="s1",
        source="model",
    ).record
    event = Event.objects.get()
    assert event.payload == {
        "type": "artifact.tagged",
        "seq": 1,
        "sessionId": "s1",
        "at": event.payload["at"],
        "record": {
            "id": record.id,
            "kind": "note",
            "key": "k",
            "title": "T",
            "data": {"a": 1},
            "source": "model",
            "version": 1,
            "pinned": False,
        },
    }
    assert event.payload["at"].endswith("Z") and len(event.payload["at"]) == 24


def test_delete_removes_record_and_emits_event(freeform):
    record = services.artifact_tag(agent=freeform, key="k", data={}, contents=b"c").record
    services.artifact_delete(agent=freeform, artifact_id=record.id)
    assert not Artifact.objects.exists()
    freeform.refresh_from_db()
    assert freeform.artifact_count == 0
    deleted = Event.objects.get(type="artifact.deleted")
    assert deleted.payload["reason"] == "deleted"
    with pytest.raises(NotFoundError):
        services.artifact_delete(agent=freeform, artifact_id=record.id)


def test_record_timestamps_are_iso_ms_z(freeform):
    wire = services.artifact_tag(agent=freeform, data={}).record.to_json()
    assert wire["createdAt"].endswith("Z") and wire["createdAt"][19] == "."
    assert set(wire) == {
        "id",
        "kind",
        "key",
        "title",
        "data",
        "sessionId",
        "turnId",
        "source",
        "content",
        "version",
        "pinned",
        "createdAt",
        "updatedAt",
    }


def _count_tag_queries(agent: Agent, key: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        services.artifact_tag(agent=agent, kind="note", key=key, data={"k": key}, contents=b"c")
    return len(ctx.captured_queries)


def test_tag_cost_does_not_grow_with_the_store(db):
    small = services.agent_create(slug="small", max_artifacts=10)
    large = services.agent_create(slug="large", max_artifacts=5000)
    for agent, n in ((small, 10), (large, 5000)):
        Artifact.objects.bulk_create(
            [
                Artifact(id=f"art_{agent.slug}_{i}", agent=agent, kind="note", data=i)
                for i in range(n)
            ]
        )
        Agent.objects.filter(pk=agent.pk).update(artifact_count=n)
    # At the cap: each tag creates one record and evicts one.
    assert _count_tag_queries(small, "new") == _count_tag_queries(large, "new")
    # Re-tag of an existing key.
    assert _count_tag_queries(small, "new") == _count_tag_queries(large, "new")
    assert Artifact.objects.filter(agent=large).count() == 5000
