"""Each event type is declared once (``event_schema``): API.md's "Events", the docs' table and every
payload the services store are held to that declaration, so none of them can drift from it."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import msgpack
import orjson
import pytest

from artifacts_app import event_schema, services
from artifacts_app.event_schema import EVENT_TYPES, REASONS, fields, record_fields
from artifacts_app.models import Event
from artifacts_app.records import ArtifactRecord

ROOT = Path(__file__).resolve().parents[2]
# The contract lives beside the checkout (``../shared/API.md``; a worktree is one level deeper).
SHARED = next(
    (p for p in (ROOT.parent / "shared", ROOT.parents[1] / "shared") if (p / "API.md").exists()),
    None,
)


def _api_md() -> str:
    if SHARED is None:
        pytest.skip("API.md (../shared/API.md, the contract) is not beside this checkout")
    return (SHARED / "API.md").read_text()


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _object(text: str, start: int) -> tuple[dict, int]:
    """The keys of a JSON-like object as API.md writes it (``{"seq", "at": "<ts>", "record":
    {"id"}}``), from the ``{`` at ``start``: key → nested keys, or the quoted values given."""
    keys: dict = {}
    current, expect_key, i = None, True, start + 1
    while True:
        c = text[i]
        if c == '"':
            end = text.index('"', i + 1)
            word, i = text[i + 1 : end], end + 1
            if expect_key:
                keys[word], current, expect_key = [], word, False
            else:
                keys[current].append(word)
            continue
        if c == "{":
            keys[current], i = _object(text, i)
            continue
        if c == ",":
            expect_key = True
        elif c == "}":
            return keys, i + 1
        i += 1


def _api_events() -> tuple[dict[str, dict], dict[str, list[str]]]:
    """API.md's event messages by type, and the record fields it adds in prose ("The `record` of
    `artifact.tagged` also carries `version` and `pinned`")."""
    section = _section(_api_md(), "Events")
    messages = {}
    for found in re.finditer(r'\{"type": "(artifact\.[a-z]+)"', section):
        messages[found.group(1)] = _object(section, found.start())[0]
    extra = {
        found.group(1): re.findall(r"`(\w+)`", found.group(2))
        for found in re.finditer(
            r"The `record` of `(artifact\.[a-z]+)` also carries ((?:`\w+`(?:, | and )?)+)",
            section,
        )
    }
    return messages, extra


def test_api_md_names_exactly_the_declared_event_types():
    section = _section(_api_md(), "Events")
    assert set(re.findall(r"artifact\.[a-z]+", section)) == set(EVENT_TYPES)
    messages, _ = _api_events()
    assert list(messages) == list(EVENT_TYPES)


@pytest.mark.parametrize("name", list(EVENT_TYPES))
def test_api_md_gives_each_event_the_declared_fields(name):
    messages, extra = _api_events()
    message, declared = messages[name], EVENT_TYPES[name]
    assert list(message) == list(fields(declared))
    assert list(message["record"]) + extra.get(name, []) == list(record_fields(declared))


def test_api_md_gives_the_declared_delete_reasons():
    messages, _ = _api_events()
    assert tuple(messages[event_schema.DELETED]["reason"]) == REASONS


def test_the_docs_table_is_the_declaration():
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\s*\| `(artifact\.[a-z]+)` \| (.+?) \| (.+?) \|$", text, re.M)
    table = {
        name: (re.findall(r"`(\w+)`", top), re.findall(r"`(\w+)`", record))
        for name, top, record in rows
    }
    assert table == {
        name: (list(fields(t)), list(record_fields(t))) for name, t in EVENT_TYPES.items()
    }
    (reasons,) = re.findall(r"Delete reasons: ((?:`\w+`(?:, )?)+)", text)
    assert tuple(re.findall(r"`(\w+)`", reasons)) == REASONS


AT = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
RECORD = ArtifactRecord(
    id="a_1",
    kind="note",
    key="k",
    title="ü ✓",
    data={"n": [1, 2.5, None, {"x": "y"}]},
    session_id="s:1",
    turn_id="t",
    source="host",
    content=None,
    created_at=AT,
    updated_at=AT,
    version=3,
    pinned=True,
)
BUILT = {
    event_schema.TAGGED: event_schema.tagged(seq=1, session_sid="s:1", at=AT, record=RECORD),
    event_schema.DELETED: event_schema.deleted(
        seq=2, session_sid=None, at=AT, artifact_id="a_1", key=None, kind="note", reason="moved"
    ),
    event_schema.PINNED: event_schema.pinned(
        seq=3, session_sid="s:1", at=AT, artifact_id="a_1", key="k", kind="note", pinned=False
    ),
}


@pytest.mark.parametrize("name", list(EVENT_TYPES))
def test_each_constructor_builds_the_declared_payload_that_survives_json_and_msgpack(name):
    payload = BUILT[name]
    declared = EVENT_TYPES[name]
    assert payload["type"] == name
    assert list(payload) == list(fields(declared))
    assert list(payload["record"]) == list(record_fields(declared))
    assert payload["at"] == "2026-01-02T03:04:05.678Z"
    assert orjson.loads(orjson.dumps(payload)) == payload
    assert msgpack.unpackb(msgpack.packb(payload)) == payload  # the Redis layer's encoding


def test_an_unknown_delete_reason_is_refused():
    with pytest.raises(ValueError, match="unknown delete reason"):
        event_schema.deleted(
            seq=1, session_sid=None, at=AT, artifact_id="a", key=None, kind="k", reason="lost"
        )


@pytest.mark.django_db(transaction=True)
def test_every_stored_payload_is_its_declared_shape(freeform, alice):
    """Tag, move, pin, unpin, evict, delete and prune through the services: each stored payload
    has exactly its type's declared fields, and its columns agree with it."""
    services.session_create(agent=freeform, sid="s:1", owner=alice)
    services.session_create(agent=freeform, sid="s:2", owner=alice)
    first = services.artifact_tag(agent=freeform, key="k", data={"a": 1}, session_id="s:1").record
    services.artifact_tag(agent=freeform, key="k", data={"a": 2}, session_id="s:2")  # moved
    services.artifact_pin(agent=freeform, artifact_id=first.id)
    services.artifact_pin(agent=freeform, artifact_id=first.id, pinned=False)
    other = services.artifact_tag(agent=freeform, data={}, session_id="s:1").record
    assert services.artifacts_evict(agent=freeform, max=1) == 1  # the oldest-updated: "k"
    services.artifact_delete(agent=freeform, artifact_id=other.id)
    third = services.artifact_tag(agent=freeform, data={}, session_id="s:1").record
    assert services.artifacts_delete(agent=freeform, ids=[third.id], reason="pruned") == 1

    rows = list(Event.objects.filter(agent=freeform).order_by("seq"))
    assert [row.seq for row in rows] == list(range(1, len(rows) + 1))
    seen = set()
    for row in rows:
        payload = row.payload
        declared = EVENT_TYPES[payload["type"]]
        # As sets: PostgreSQL's jsonb keeps no key order.
        assert set(payload) == set(fields(declared))
        assert set(payload["record"]) == set(record_fields(declared))
        assert (row.type, row.seq, row.session_sid, row.artifact_id) == (
            payload["type"],
            payload["seq"],
            payload["sessionId"],
            payload["record"]["id"],
        )
        seen.add((payload["type"], payload.get("reason")))
    assert seen == {
        (event_schema.TAGGED, None),
        (event_schema.DELETED, "moved"),
        (event_schema.PINNED, None),
        (event_schema.DELETED, "evicted"),
        (event_schema.DELETED, "deleted"),
        (event_schema.DELETED, "pruned"),
    }
