"""The in-process Python API and the eval helper, over the same service."""

from __future__ import annotations

import io

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from artifacts_app import ArtifactError, artifacts
from artifacts_app.evals import capture_turn
from artifacts_app.records import ArtifactRecord


def test_session_bound_facade_fills_session_and_turn(reviewer, alice):
    unbound = artifacts("reviewer")
    sid = unbound.create_session(owner="alice")
    api = artifacts("reviewer", session_id=sid, turn_id="t-3")
    url = "https://github.com/o/r/pull/7"
    record = api.tag(
        kind="reviewed-pr",
        key=url,
        title=f"Reviewed {url}",
        data={"url": url, "verdict": "approve"},
        contents=b"# review",
        content_type="text/markdown",
    )
    assert isinstance(record, ArtifactRecord)
    assert (record.session_id, record.turn_id, record.source) == (sid, "t-3", "host")
    assert record.content.content_type == "text/markdown" and record.content.size == 8
    assert record.created_at.tzinfo is not None
    unbound.tag(kind="report", data={"x": 1})  # sessionless
    assert [r.id for r in api.list(kind="reviewed-pr")] == [record.id]
    assert len(api.list()) == 1  # bound list shows its session
    assert len(unbound.list()) == 2
    assert unbound.get(record.id) == record


def test_list_is_newest_updated_first_and_walks_pages(freeform):
    api = artifacts("free")
    ids = [api.tag(key=f"k{i}", data=i).id for i in range(520)]
    api.tag(key="k0", data="touched")
    listed = [r.id for r in api.list()]
    assert len(listed) == 520
    assert listed[0] == ids[0]
    assert listed[1:] == list(reversed(ids[1:]))
    assert [r.id for r in api.list(limit=3)] == listed[:3]


def test_create_session_and_delete(freeform, alice):
    api = artifacts("free")
    assert api.create_session(id="chosen", owner=None) == "chosen"
    with pytest.raises(ArtifactError) as exc:
        api.create_session(id="chosen")
    assert exc.value.code == "session_exists"
    with pytest.raises(ArtifactError) as exc:
        api.create_session(owner="nobody")
    assert exc.value.code == "unknown_user"
    record = api.tag(data={}, contents=io.BytesIO(b"x"))
    api.delete(record.id)
    assert api.list() == []


def test_refusals_raise_artifact_error_with_code_message_details(reviewer):
    with pytest.raises(ArtifactError) as exc:
        artifacts("reviewer").tag(kind="reviewed-pr", data={"verdict": 3})
    assert exc.value.code == "schema_invalid"
    assert isinstance(exc.value.details, list) and exc.value.message


@pytest.mark.django_db(transaction=True)
async def test_async_twins(reviewer):
    api = artifacts("reviewer")
    record = await api.atag(kind="report", key="r", data={"a": 1})
    assert [r.id for r in await api.alist(kind="report")] == [record.id]
    # The ORM ran in asgiref's sync thread: close its connection, or PostgreSQL's test database
    # cannot be dropped at teardown.
    await sync_to_async(connections.close_all)()


def test_capture_turn_sees_tags_of_the_turn(reviewer):
    before = artifacts("reviewer").tag(kind="report", data={"before": True}, turn_id="t-3")
    with capture_turn("reviewer", turn_id="t-3") as turn:
        artifacts("reviewer").tag(
            kind="reviewed-pr", data={"url": "u"}, source="model"
        )  # turn filled in
        artifacts("reviewer").tag(kind="report", data={}, turn_id="t-other")
    assert turn.tagged_artifact("reviewed-pr", lambda r: r.source == "model")
    assert turn.tagged_artifact()
    assert not turn.tagged_artifact("report")
    assert not turn.tagged_artifact("reviewed-pr", lambda r: r.source == "host")
    assert before.id not in {r.id for r in turn.records}
    assert [r.turn_id for r in turn.records] == ["t-3"]


def test_capture_turn_without_turn_sees_every_tag(reviewer):
    with capture_turn("reviewer") as turn:
        pass
    assert not turn.tagged_artifact()
    with capture_turn("reviewer") as turn:
        artifacts("reviewer").tag(kind="report", data={}, turn_id="any")
    assert turn.tagged_artifact("report")
