"""The rules of API.md "Versions, pins and diffs", held by the services and selectors."""

from __future__ import annotations

import json
from datetime import timedelta

import jsonpatch
import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from artifacts_app import access, artifacts, services
from artifacts_app.errors import ArtifactError, ConflictError, NotFoundError
from artifacts_app.models import Agent, Artifact, ArtifactVersion, Blob, Event
from artifacts_app.registry import Kind, define_artifacts
from artifacts_app.selectors import versions
from artifacts_app.services import blobs as blobgc
from artifacts_app.services import pruning


def numbers(artifact_id: str) -> list[int]:
    return list(
        ArtifactVersion.objects.filter(artifact_id=artifact_id)
        .order_by("number")
        .values_list("number", flat=True)
    )


def tag(agent, key="k", **fields):
    fields.setdefault("kind", "note")
    fields.setdefault("data", {})
    return services.artifact_tag(agent=agent, key=key, **fields).record


# --- numbering and keep_versions ------------------------------------------------------------


def test_each_retag_of_a_key_adds_one_version(freeform):
    first = tag(freeform, data={"n": 1})
    assert first.version == 1 and not first.pinned
    second = tag(freeform, data={"n": 2})
    third = tag(freeform, data={"n": 3})
    assert (second.version, third.version) == (2, 3)
    assert Artifact.objects.get(pk=first.id).version == 3
    assert numbers(first.id) == [1, 2, 3]
    # Each version keeps what its tag stored; the newest repeats the record.
    assert [v.data for v in versions.versions_all(agent=freeform, artifact_id=first.id)] == [
        {"n": 3},
        {"n": 2},
        {"n": 1},
    ]


def test_unkeyed_records_have_version_1_only(freeform):
    record = services.artifact_tag(agent=freeform, data={"x": 1}).record
    assert record.version == 1
    assert numbers(record.id) == [1]
    with pytest.raises(ConflictError) as exc:
        services.artifact_restore(agent=freeform, artifact_id=record.id, number=1)
    assert exc.value.code == "not_keyed"


def test_version_keeps_every_field_its_tag_stored(freeform, alice):
    services.session_create(agent=freeform, sid="s1", owner=alice)
    tag(
        freeform,
        title="T1",
        data={"a": 1},
        session_id="s1",
        turn_id="t1",
        source="model",
        contents=b"one",
        content_type="text/markdown",
    )
    tag(freeform, kind="other", title="T2", data={"a": 2})
    v1 = versions.version_get(agent=freeform, artifact_id=services.keyed_id("free", "k"), number=1)
    assert (v1.kind, v1.title, v1.data, v1.session_id, v1.turn_id, v1.source) == (
        "note",
        "T1",
        {"a": 1},
        "s1",
        "t1",
        "model",
    )
    assert v1.content.size == 3 and v1.content.content_type == "text/markdown"
    assert v1.version == 1 and v1.key == "k"
    v2 = versions.version_get(agent=freeform, artifact_id=v1.id, number=2)
    assert (v2.kind, v2.title, v2.session_id, v2.content) == ("other", "T2", None, None)
    assert v2.updated_at > v1.updated_at  # the moment each tag committed
    assert v2.created_at == v1.created_at  # the record's


def test_keep_versions_per_agent_drops_exactly_the_oldest(historic):
    record_id = tag(historic).id
    for _ in range(4):
        tag(historic)
    assert numbers(record_id) == [1, 2, 3, 4, 5]  # keep_versions=5: all kept
    tag(historic)  # the 6th drops the 1st, exactly
    assert numbers(record_id) == [2, 3, 4, 5, 6]
    tag(historic, title="seventh", data={"n": 7}, source="model", contents=b"7")
    assert numbers(record_id) == [3, 4, 5, 6, 7]
    newest = versions.version_get(agent=historic, artifact_id=record_id, number=7)
    # A recycled row holds the new tag's values, not the dropped version's.
    assert (newest.title, newest.data, newest.source, newest.content.size) == (
        "seventh",
        {"n": 7},
        "model",
        1,
    )
    assert versions.version_get(agent=historic, artifact_id=record_id, number=6).data == {}
    with pytest.raises(NotFoundError) as exc:
        versions.version_get(agent=historic, artifact_id=record_id, number=2)
    assert exc.value.code == "unknown_version"


def test_keep_versions_per_kind(historic):
    draft = tag(historic, key="d", kind="draft").id
    for _ in range(2):
        tag(historic, key="d", kind="draft")
    assert numbers(draft) == [1, 2, 3]
    tag(historic, key="d", kind="draft")
    assert numbers(draft) == [2, 3, 4]
    single = tag(historic, key="s", kind="single").id
    tag(historic, key="s", kind="single")
    assert numbers(single) == [2]  # 1 keeps no history
    # The kind of the new tag decides: a draft re-tagged as a note keeps the note's 5.
    tag(historic, key="d", kind="note")
    assert numbers(draft) == [2, 3, 4, 5]


def test_keep_versions_of_a_freeform_agent_comes_from_its_row(db):
    agent = services.agent_create(slug="short", keep_versions=2)
    record_id = tag(agent).id
    tag(agent)
    tag(agent)
    assert numbers(record_id) == [2, 3]
    with pytest.raises(ArtifactError) as exc:
        services.agent_create(slug="bad", keep_versions=0)
    assert exc.value.code == "invalid_keep_versions"
    assert not Agent.objects.filter(slug="bad").exists()


def test_keep_versions_declarations_are_checked():
    with pytest.raises(ImproperlyConfigured):
        define_artifacts(kinds={"a": Kind("A.")}, keep_versions=0)
    with pytest.raises(ImproperlyConfigured):
        Kind("A.", keep_versions=True)
    assert define_artifacts().keep_versions == 10  # the default


def test_max_counts_records_and_eviction_removes_all_versions(historic):
    tag(historic, key="old")
    tag(historic, key="old")
    for key in ("b", "c", "d"):
        tag(historic, key=key)
    old_id = services.keyed_id("historic", "old")
    assert numbers(old_id) == [1, 2]
    tag(historic, key="e")  # the 5th record: evicts the oldest-updated, "old"
    assert not Artifact.objects.filter(pk=old_id).exists()
    assert numbers(old_id) == []
    assert ArtifactVersion.objects.filter(artifact__agent=historic).count() == 4


def test_delete_removes_every_version(freeform):
    record_id = tag(freeform).id
    tag(freeform)
    services.artifact_delete(agent=freeform, artifact_id=record_id)
    assert ArtifactVersion.objects.filter(artifact_id=record_id).count() == 0


# --- content carried between versions -------------------------------------------------------


def test_content_is_carried_by_a_retag_without_contents_in_the_same_session(freeform, alice):
    services.session_create(agent=freeform, sid="s1", owner=alice)
    first = tag(freeform, session_id="s1", contents=b"report", content_type="text/plain")
    second = tag(freeform, session_id="s1", data={"n": 2})
    assert second.content == first.content
    v2 = versions.version_get(agent=freeform, artifact_id=first.id, number=2)
    assert v2.content == first.content


def test_content_is_not_carried_across_sessions(freeform, alice, bob):
    services.session_create(agent=freeform, sid="sa", owner=alice)
    services.session_create(agent=freeform, sid="sb", owner=bob)
    first = tag(freeform, session_id="sa", contents=b"alice's secret")
    moved = tag(freeform, session_id="sb")
    assert moved.content is None
    v2 = versions.version_get(agent=freeform, artifact_id=first.id, number=2)
    assert v2.content is None
    # Version 1 keeps its own content, visible to alice only (below).
    assert versions.version_get(agent=freeform, artifact_id=first.id, number=1).content


def test_identical_contents_are_one_blob_for_every_version(freeform):
    tag(freeform, contents=b"same")
    tag(freeform, contents=b"same")
    assert Blob.objects.count() == 1
    assert ArtifactVersion.objects.exclude(blob=None).count() == 2


# --- visibility across sessions -------------------------------------------------------------


def _caller(user):
    return access.caller_from_user(user)


def test_a_moved_record_shows_each_user_only_its_own_versions(freeform, alice, bob):
    services.session_create(agent=freeform, sid="sa", owner=alice)
    services.session_create(agent=freeform, sid="sb", owner=bob)
    record_id = tag(freeform, session_id="sa", data={"secret": "alice"}, contents=b"a").id
    tag(freeform, session_id="sa", data={"secret": "alice 2"})
    tag(freeform, session_id="sb", data={"for": "bob"})
    as_bob = access.visible(_caller(bob), freeform)
    as_alice = access.visible(_caller(alice), freeform)
    bob_sees = versions.versions_all(agent=freeform, artifact_id=record_id, visible=as_bob)
    assert [v.version for v in bob_sees] == [3]
    assert [
        v.version
        for v in versions.versions_all(agent=freeform, artifact_id=record_id, visible=as_alice)
    ] == [2, 1]
    for number in (1, 2):
        with pytest.raises(NotFoundError):
            versions.version_get(
                agent=freeform, artifact_id=record_id, number=number, visible=as_bob
            )
        with pytest.raises(NotFoundError):
            versions.versions_diff(
                agent=freeform, artifact_id=record_id, number=3, from_=number, visible=as_bob
            )
    # The default `from` is the newest *visible* version before n: for bob there is none.
    with pytest.raises(NotFoundError):
        versions.versions_diff(agent=freeform, artifact_id=record_id, number=3, visible=as_bob)
    # Hidden looks missing: the same code as a version that never existed.
    with pytest.raises(NotFoundError) as hidden:
        versions.version_get(agent=freeform, artifact_id=record_id, number=1, visible=as_bob)
    with pytest.raises(NotFoundError) as missing:
        versions.version_get(agent=freeform, artifact_id=record_id, number=99, visible=as_bob)
    assert hidden.value.code == missing.value.code == "unknown_version"
    # The agent key and staff see all of them.
    assert len(versions.versions_all(agent=freeform, artifact_id=record_id)) == 3


def test_a_user_with_no_version_of_a_record_gets_404_for_its_history(freeform, alice, bob):
    services.session_create(agent=freeform, sid="sa", owner=alice)
    record_id = tag(freeform, session_id="sa").id
    as_bob = access.visible(_caller(bob), freeform)
    with pytest.raises(NotFoundError) as exc:
        versions.versions_page(agent=freeform, artifact_id=record_id, visible=as_bob)
    assert exc.value.code == "unknown_artifact"
    with pytest.raises(NotFoundError) as exc:
        versions.version_get(agent=freeform, artifact_id=record_id, number=1, visible=as_bob)
    assert exc.value.code == "unknown_artifact"


def test_versions_of_another_agents_record_are_not_found(freeform, reviewer):
    record_id = tag(freeform).id
    with pytest.raises(NotFoundError):
        versions.versions_page(agent=reviewer, artifact_id=record_id)
    with pytest.raises(NotFoundError):
        versions.version_get(agent=reviewer, artifact_id=record_id, number=1)


def test_versions_are_paged_newest_first(freeform):
    record_id = tag(freeform).id
    for _ in range(6):
        tag(freeform)
    page = versions.versions_page(agent=freeform, artifact_id=record_id, limit=3)
    assert [r["number"] for r in page.rows] == [7, 6, 5]
    page = versions.versions_page(
        agent=freeform, artifact_id=record_id, limit=3, cursor=page.next_cursor
    )
    assert [r["number"] for r in page.rows] == [4, 3, 2]
    page = versions.versions_page(
        agent=freeform, artifact_id=record_id, limit=3, cursor=page.next_cursor
    )
    assert [r["number"] for r in page.rows] == [1] and page.next_cursor is None
    with pytest.raises(ArtifactError) as exc:
        versions.versions_page(agent=freeform, artifact_id=record_id, cursor="nonsense")
    assert exc.value.code == "invalid_cursor"


# --- diffs ----------------------------------------------------------------------------------


def as_json(value) -> str:
    return json.dumps(value, sort_keys=True)


DIFF_CASES = [
    ({"a": 1}, {"a": 1, "b": 2}),  # added
    ({"a": 1, "b": 2}, {"a": 1}),  # removed
    ({"a": 1}, {"a": "one"}),  # changed (type too)
    ({"a": 1}, {"a": True}),  # 1 == True in Python, not in JSON
    ({"list": [1, 2, 3]}, {"list": [1, 3, 4, 5]}),  # arrays
    ({"n": {"deep": {"x": [1, {"y": 2}]}}}, {"n": {"deep": {"x": [1, {"y": 3, "z": None}]}}}),
    ([1, 2], {"now": "an object"}),  # the whole document
    ({"a/b": 1, "c~d": 2}, {"a/b": 2}),  # JSON Pointer escapes
    ({"same": 1}, {"same": 1}),  # nothing
]


@pytest.mark.parametrize(("old", "new"), DIFF_CASES)
def test_diff_patch_turns_froms_data_into_tos(freeform, old, new):
    record_id = tag(freeform, data=old).id
    tag(freeform, data=new)
    diff = versions.versions_diff(agent=freeform, artifact_id=record_id, number=2)
    assert diff["from"] == 1 and diff["to"] == 2
    # Compared as JSON text: in Python 1 == True, in JSON they differ.
    assert as_json(jsonpatch.apply_patch(old, diff["data"])) == as_json(new)
    assert (diff["data"] == []) == (as_json(old) == as_json(new))
    # Backwards too.
    back = versions.versions_diff(agent=freeform, artifact_id=record_id, number=1, from_=2)
    assert as_json(jsonpatch.apply_patch(new, back["data"])) == as_json(old)


def test_diff_shows_ops_for_added_removed_and_changed(freeform):
    record_id = tag(freeform, data={"keep": 1, "drop": 2, "change": 3, "nested": {"x": 1}}).id
    tag(freeform, data={"keep": 1, "change": 4, "nested": {"x": 2}, "new": [1]})
    ops = {
        (op["op"], op["path"])
        for op in versions.versions_diff(agent=freeform, artifact_id=record_id, number=2)["data"]
    }
    assert ops == {
        ("remove", "/drop"),
        ("replace", "/change"),
        ("replace", "/nested/x"),
        ("add", "/new"),
    }


def test_diff_lists_the_top_level_fields_that_changed(freeform, alice):
    services.session_create(agent=freeform, sid="s1", owner=alice)
    record_id = tag(freeform, title="old", data={}, contents=b"x", content_type="text/plain").id
    tag(freeform, kind="other", title="new", data={}, session_id="s1", turn_id="t9", source="model")
    diff = versions.versions_diff(agent=freeform, artifact_id=record_id, number=2, from_=1)
    assert set(diff["fields"]) == {"kind", "title", "sessionId", "turnId", "source", "content"}
    assert diff["fields"]["title"] == {"from": "old", "to": "new"}
    assert diff["fields"]["sessionId"] == {"from": None, "to": "s1"}
    assert diff["fields"]["content"]["to"] is None
    assert diff["fields"]["content"]["from"]["size"] == 1
    assert diff["data"] == []
    same = versions.versions_diff(agent=freeform, artifact_id=record_id, number=2, from_=2)
    assert same["fields"] == {} and same["data"] == []


def test_diff_of_the_first_version_needs_a_from(freeform):
    record_id = tag(freeform).id
    with pytest.raises(NotFoundError) as exc:
        versions.versions_diff(agent=freeform, artifact_id=record_id, number=1)
    assert exc.value.details == {"field": "from"}


# --- restore --------------------------------------------------------------------------------


def test_restore_makes_a_new_version_with_the_old_data_and_content(freeform, alice):
    services.session_create(agent=freeform, sid="s1", owner=alice)
    first = tag(
        freeform,
        title="v1",
        data={"verdict": "approve"},
        session_id="s1",
        contents=b"the review",
        content_type="text/markdown",
        source="model",
    )
    tag(freeform, title="v2", data={"verdict": "reject"}, session_id="s1", contents=b"changed")
    before = Event.objects.count()
    restored = services.artifact_restore(agent=freeform, artifact_id=first.id, number=1).record
    assert restored.version == 3
    assert (restored.title, restored.data, restored.source) == (
        "v1",
        {"verdict": "approve"},
        "host",
    )
    assert restored.session_id == "s1"
    assert restored.content == first.content
    assert numbers(first.id) == [1, 2, 3]
    event = Event.objects.order_by("-seq").first()
    assert Event.objects.count() == before + 1
    assert event.type == "artifact.tagged" and event.payload["record"]["version"] == 3


def test_restore_without_content_when_the_version_was_in_another_session(freeform, alice, bob):
    services.session_create(agent=freeform, sid="sa", owner=alice)
    services.session_create(agent=freeform, sid="sb", owner=bob)
    first = tag(freeform, data={"n": 1}, session_id="sa", contents=b"alice only")
    tag(freeform, data={"n": 2}, session_id="sb", contents=b"bob's")
    restored = services.artifact_restore(agent=freeform, artifact_id=first.id, number=1).record
    assert restored.session_id == "sb"  # the record's current session
    assert restored.data == {"n": 1}
    assert restored.content is None  # alice's content never follows it into bob's session


def test_restore_of_a_version_without_content_drops_the_current_content(freeform):
    first = tag(freeform, data={"n": 1})
    tag(freeform, data={"n": 2}, contents=b"later")
    restored = services.artifact_restore(agent=freeform, artifact_id=first.id, number=1).record
    assert restored.content is None


def test_restore_refusals_change_nothing(freeform):
    record_id = tag(freeform).id
    before = (numbers(record_id), Event.objects.count())
    for number, code in ((5, "unknown_version"), (0, "invalid_version")):
        with pytest.raises(ArtifactError) as exc:
            services.artifact_restore(agent=freeform, artifact_id=record_id, number=number)
        assert exc.value.code == code
    with pytest.raises(NotFoundError):
        services.artifact_restore(agent=freeform, artifact_id="art_nope", number=1)
    assert (numbers(record_id), Event.objects.count()) == before


def test_restore_revalidates_against_todays_kinds(strict):
    record_id = services.artifact_tag(
        agent=strict, kind="finding", key="f", data={"title": "x"}
    ).record.id
    restored = services.artifact_restore(agent=strict, artifact_id=record_id, number=1).record
    assert restored.data == {"title": "x", "severity": 1, "tags": []}


# --- pins -----------------------------------------------------------------------------------


def test_pinned_records_survive_eviction(historic):
    oldest = tag(historic, key="a").id
    services.artifact_pin(agent=historic, artifact_id=oldest)
    for key in ("b", "c", "d", "e", "f"):
        tag(historic, key=key)
    kept = set(Artifact.objects.filter(agent=historic).values_list("key", flat=True))
    assert kept == {"a", "d", "e", "f"}  # b and c (oldest unpinned) went, a stayed
    assert Agent.objects.get(pk=historic.pk).artifact_count == 4


def test_cap_reached_when_every_other_record_is_pinned_changes_nothing(historic):
    for key in ("a", "b", "c", "d"):
        services.artifact_pin(agent=historic, artifact_id=tag(historic, key=key).id)
    historic.refresh_from_db()
    before = (
        sorted(Artifact.objects.values_list("id", "version")),
        ArtifactVersion.objects.count(),
        Event.objects.count(),
        Blob.objects.count(),
        historic.artifact_count,
        historic.last_seq,
    )
    with pytest.raises(ConflictError) as exc:
        tag(historic, key="e", contents=b"new bytes")
    assert exc.value.code == "cap_reached" and exc.value.status == 409
    assert "unpin or delete one, or raise max" in exc.value.message
    historic.refresh_from_db()
    after = (
        sorted(Artifact.objects.values_list("id", "version")),
        ArtifactVersion.objects.count(),
        Event.objects.count(),
        Blob.objects.count(),
        historic.artifact_count,
        historic.last_seq,
    )
    assert after == before
    # A re-tag creates nothing, so it is not refused; unpinning one makes room again.
    assert tag(historic, key="a").version == 2
    services.artifact_pin(
        agent=historic, artifact_id=services.keyed_id("historic", "b"), pinned=False
    )
    assert tag(historic, key="e").version == 1
    assert not Artifact.objects.filter(key="b").exists()


def test_pin_emits_an_event_only_when_it_changes(freeform, alice):
    services.session_create(agent=freeform, sid="s1", owner=alice)
    record = tag(freeform, session_id="s1")
    updated = Artifact.objects.get(pk=record.id).updated_at
    pinned = services.artifact_pin(agent=freeform, artifact_id=record.id)
    assert pinned.pinned and pinned.version == 1
    services.artifact_pin(agent=freeform, artifact_id=record.id)  # again: no change
    unpinned = services.artifact_pin(agent=freeform, artifact_id=record.id, pinned=False)
    assert not unpinned.pinned
    events = list(Event.objects.filter(type="artifact.pinned").order_by("seq"))
    assert [e.payload["record"] for e in events] == [
        {"id": record.id, "key": "k", "kind": "note", "pinned": True},
        {"id": record.id, "key": "k", "kind": "note", "pinned": False},
    ]
    assert events[0].payload["sessionId"] == "s1" and events[0].session_sid == "s1"
    seqs = list(Event.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert Agent.objects.get(pk=freeform.pk).last_seq == len(seqs)
    # Pinning does not move the record in lists or in eviction order.
    assert Artifact.objects.get(pk=record.id).updated_at == updated


def test_a_retag_keeps_the_pin(freeform):
    record = tag(freeform)
    services.artifact_pin(agent=freeform, artifact_id=record.id)
    again = tag(freeform, data={"n": 2})
    assert again.pinned and Event.objects.order_by("-seq").first().payload["record"]["pinned"]


def test_pin_of_an_unknown_record_is_not_found(freeform, reviewer):
    record_id = tag(reviewer, kind="report").id
    with pytest.raises(NotFoundError):
        services.artifact_pin(agent=freeform, artifact_id=record_id)
    assert not Artifact.objects.get(pk=record_id).pinned


def test_explicit_delete_removes_a_pinned_record(freeform):
    record_id = tag(freeform).id
    services.artifact_pin(agent=freeform, artifact_id=record_id)
    services.artifact_delete(agent=freeform, artifact_id=record_id)
    assert not Artifact.objects.filter(pk=record_id).exists()


# --- prune and gc ---------------------------------------------------------------------------


def test_prune_skips_pinned_unless_include_pinned(freeform):
    ids = [tag(freeform, key=f"k{i}").id for i in range(4)]
    tag(freeform, key="k0")  # a second version
    services.artifact_pin(agent=freeform, artifact_id=ids[0])
    report = pruning.artifacts_prune(agent="free", keep=0)
    assert report.artifacts == 3
    assert list(Artifact.objects.values_list("id", flat=True)) == [ids[0]]
    assert numbers(ids[0]) == [1, 2]
    assert ArtifactVersion.objects.count() == 2  # the pruned records' versions went with them
    report = pruning.artifacts_prune(agent="free", keep=0, include_pinned=True)
    assert report.artifacts == 1
    assert ArtifactVersion.objects.count() == 0
    assert Agent.objects.get(pk=freeform.pk).artifact_count == 0


def test_prune_does_not_take_a_record_pinned_after_it_was_chosen(freeform):
    record_id = tag(freeform).id
    removed = services.artifacts_delete(
        agent=freeform, ids=[record_id], reason="pruned", skip_pinned=True
    )
    assert removed == 1
    record_id = tag(freeform).id
    services.artifact_pin(agent=freeform, artifact_id=record_id)
    assert (
        services.artifacts_delete(
            agent=freeform, ids=[record_id], reason="pruned", skip_pinned=True
        )
        == 0
    )


def test_gc_keeps_a_blob_an_older_version_points_at(freeform):
    record_id = tag(freeform, contents=b"version one").id
    old_sha = Artifact.objects.get(pk=record_id).blob_id
    tag(freeform, contents=b"version two")
    Blob.objects.update(created_at=timezone.now() - timedelta(days=1))
    report = blobgc.blobs_collect(grace=timedelta(hours=1))
    assert report.removed == 0
    assert Blob.objects.filter(pk=old_sha).exists()
    # Once the version holding it is dropped (keep_versions), the blob is garbage.
    Agent.objects.filter(pk=freeform.pk).update(keep_versions=1)
    freeform.refresh_from_db()
    tag(freeform, contents=b"version two")
    assert numbers(record_id) == [3]
    report = blobgc.blobs_collect(grace=timedelta(hours=1))
    assert report.removed == 1
    assert not Blob.objects.filter(pk=old_sha).exists()


# --- the Python API -------------------------------------------------------------------------


def test_python_api_twins(freeform):
    api = artifacts("free")
    record = api.tag(kind="note", key="k", data={"v": 1})
    api.tag(kind="note", key="k", data={"v": 2})
    assert [v.version for v in api.versions(record.id)] == [2, 1]
    assert api.version(record.id, 1).data == {"v": 1}
    diff = api.diff(record.id, 2, from_=1)
    assert diff["data"] == [{"op": "replace", "path": "/v", "value": 2}]
    assert api.restore(record.id, 1).data == {"v": 1}
    assert api.pin(record.id).pinned
    assert not api.unpin(record.id).pinned
    assert api.get(record.id).version == 3
    with pytest.raises(ArtifactError) as exc:
        api.version(record.id, "two")
    assert exc.value.code == "invalid_version"


@pytest.mark.django_db(transaction=True)
async def test_python_api_async_twins(freeform):
    api = artifacts("free")
    record = await api.atag(kind="note", key="k", data={"v": 1})
    await api.atag(kind="note", key="k", data={"v": 2})
    assert len(await api.aversions(record.id)) == 2
    assert (await api.aversion(record.id, 1)).data == {"v": 1}
    assert (await api.adiff(record.id, 2))["to"] == 2
    assert (await api.arestore(record.id, 1)).version == 3
    assert (await api.apin(record.id)).pinned
    assert not (await api.aunpin(record.id)).pinned
    # The ORM ran in asgiref's sync thread: close its connection (PostgreSQL's teardown).
    await sync_to_async(connections.close_all)()


# --- the cost rule --------------------------------------------------------------------------


def _count(agent: Agent, key: str) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        services.artifact_tag(agent=agent, kind="note", key=key, data={"k": key}, contents=b"c")
    # Which statements ran, not only how many (their values differ from run to run).
    return [q["sql"][:24] for q in ctx.captured_queries]


def _fill(agent: Agent, n: int, history: int) -> None:
    Artifact.objects.bulk_create(
        [
            Artifact(
                id=services.keyed_id(agent.slug, f"key{i}"),
                agent=agent,
                kind="note",
                key=f"key{i}",
                data=i,
                version=history,
            )
            for i in range(n)
        ]
    )
    ArtifactVersion.objects.bulk_create(
        [
            ArtifactVersion(
                artifact_id=services.keyed_id(agent.slug, f"key{i}"), number=v, kind="note", data=i
            )
            for i in range(n)
            for v in range(1, history + 1)
        ],
        batch_size=5000,
    )
    Agent.objects.filter(pk=agent.pk).update(artifact_count=n)


def test_tag_cost_with_history_does_not_grow_with_the_store(db):
    small = services.agent_create(slug="small", max_artifacts=10)
    large = services.agent_create(slug="large", max_artifacts=5000)
    _fill(small, 10, 10)
    _fill(large, 5000, 10)
    assert ArtifactVersion.objects.filter(artifact__agent=large).count() == 50_000
    # At the cap: each tag creates one record (version 1) and evicts one with its 10 versions.
    assert _count(small, "new") == _count(large, "new")
    # A re-tag of a key with 10 versions: version 11 is added and version 1 dropped.
    small_retag, large_retag = _count(small, "new"), _count(large, "new")
    assert small_retag == large_retag
    for agent in (small, large):
        key_id = services.keyed_id(agent.slug, "new")
        assert numbers(key_id) == [1, 2]
    # And a re-tag of a record at its full history, on both.
    assert _count(small, "key9") == _count(large, "key4999")
    assert numbers(services.keyed_id("large", "key4999")) == list(range(2, 12))
    assert Artifact.objects.filter(agent=large).count() == 5000


def test_lowering_keep_versions_drops_the_surplus_at_the_next_tag(db):
    agent = services.agent_create(slug="lowered", keep_versions=5)
    record_id = tag(agent).id
    for _ in range(5):
        tag(agent)
    assert numbers(record_id) == [2, 3, 4, 5, 6]  # full: the oldest was recycled into the newest
    Agent.objects.filter(pk=agent.pk).update(keep_versions=2)
    agent.refresh_from_db()
    tag(agent)
    assert numbers(record_id) == [6, 7]
    tag(agent)
    assert numbers(record_id) == [7, 8]
    # Each kept version still holds its own tag's values after being recycled.
    assert versions.version_get(agent=agent, artifact_id=record_id, number=8).version == 8
    Agent.objects.filter(pk=agent.pk).update(keep_versions=4)
    agent.refresh_from_db()
    tag(agent)
    tag(agent)
    tag(agent)
    assert numbers(record_id) == [8, 9, 10, 11]
