"""Property: whatever JSON a client sends to tag, to the tool (as an object and as JSON text) or to
sessions, the answer is never a 5xx, every refusal is the envelope, and after every accepted tag
the agent's list, the record and a websocket ``?after=0`` replay still answer.

The bodies are JSON *text*, built token by token, so that they can hold what no Python value
would: NaN and Infinity literals, integers past 64 bits, ``\\u0000`` and lone-surrogate escapes in
keys and values, nesting past any limit, long strings. Runs on SQLite, and on PostgreSQL in the
scale pass of .ci/run (the same suite).
"""

from __future__ import annotations

import orjson
import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from artifacts_app import fanout, services
from artifacts_app.models import Agent
from tests.consumers.conftest import connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ESCAPES = [
    "\\u0000",
    "\\ud800",
    "\\udfff",
    "\\ud83d\\ude00",
    "\\ude00\\ud83d",
    "\\n",
    '\\"',
    "\\\\",
]


def _string() -> st.SearchStrategy[str]:
    # Mostly text any client might send, sometimes escapes no database should see, sometimes long.
    safe = st.text(max_size=16).map(lambda s: orjson.dumps(s).decode())
    piece = st.one_of(
        st.text(max_size=12).map(lambda s: orjson.dumps(s).decode()[1:-1]),
        st.sampled_from(ESCAPES),
    )
    hostile = st.lists(piece, min_size=1, max_size=4).map(lambda parts: '"' + "".join(parts) + '"')
    long = st.integers(1000, 200_000).map(lambda n: '"' + "x" * n + '"')
    return st.one_of(safe, safe, safe, safe, safe, hostile, long)


HOSTILE_NUMBERS = st.sampled_from(
    [
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551616",
        "1e20",
        "-1e19",
        "9.2e18",
        "1e308",
        "1e400",
        "1e-400",
        "0.1",
        "-0",
        "NaN",
        "Infinity",
        "-Infinity",
    ]
)
INT64 = st.integers(-(2**63), 2**63 - 1).map(str)
NUMBERS = st.one_of(
    INT64,
    INT64,
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: orjson.dumps(f).decode()),
    st.integers(-(2**70), 2**70).map(str),
    HOSTILE_NUMBERS,
)

SCALARS = st.one_of(NUMBERS, _string(), st.sampled_from(["true", "false", "null"]))


def _deep(inner: str, depth: int) -> str:
    return "[" * depth + inner + "]" * depth


JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(_string(), children), max_size=4).map(
            lambda kvs: "{" + ",".join(f"{k}:{v}" for k, v in kvs) + "}"
        ),
    ),
    max_leaves=12,
)
DATA = st.one_of(
    JSON, JSON, JSON, JSON, st.tuples(SCALARS, st.integers(40, 1100)).map(lambda pair: _deep(*pair))
)
SAFE_TEXT = st.text(max_size=40).map(lambda s: orjson.dumps(s).decode())
OPTIONAL_TEXT = st.one_of(st.none(), st.none(), SAFE_TEXT, SAFE_TEXT, _string())


@st.composite
def tag_bodies(draw: st.DrawFn) -> bytes:
    fields = {
        "kind": draw(
            st.sampled_from(['"report"', '"report"', '"report"', '"reviewed-pr"', '"nope"', "5"])
        ),
        "data": draw(DATA),
    }
    for name in ("key", "title", "turnId"):
        value = draw(OPTIONAL_TEXT)
        if value is not None:
            fields[name] = value
    if draw(st.booleans()):
        fields["sessionId"] = draw(st.sampled_from(['"s-prop"', '"s-none"', '"s\\u0000"', "null"]))
    if draw(st.booleans()):
        fields["contents"] = draw(st.one_of(SAFE_TEXT, _string()))
        if draw(st.booleans()):
            fields["contentType"] = draw(
                st.sampled_from(
                    ['"text/plain"', '"text/plain;,text/html"', '"image/png"', '"a\\u0000/b"']
                )
            )
    return ("{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}").encode()


@st.composite
def tool_bodies(draw: st.DrawFn) -> bytes:
    artifact = (
        "{" + f'"kind":"report","key":{draw(OPTIONAL_TEXT) or "null"},"data":{draw(DATA)}' + "}"
    )
    call = '{"artifact":' + artifact + "}"
    if draw(st.booleans()):
        return ('{"input":' + call + "}").encode()
    return ('{"input":' + orjson.dumps(call).decode() + "}").encode()


@st.composite
def session_bodies(draw: st.DrawFn) -> bytes:
    fields = []
    if draw(st.booleans()):
        valid = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,30}", fullmatch=True).map(
            lambda sid: f'"{sid}"'
        )
        fields.append('"id":' + draw(st.one_of(valid, valid, _string(), NUMBERS)))
    if draw(st.booleans()):
        fields.append(
            '"owner":' + draw(st.one_of(_string(), st.just('"alice"'), st.just("null"), NUMBERS))
        )
    return ("{" + ",".join(fields) + "}").encode()


@pytest.fixture
def door(transactional_db, django_user_model):
    agent = Agent.objects.get_or_create(
        slug="reviewer", defaults={"module": "agent_site.agents.reviewer"}
    )[0]
    django_user_model.objects.create_user("alice", password="alice-pw-123")
    services.session_create(agent=agent, sid="s-prop")
    key = services.agent_key_create(agent=agent)[1]
    return {"agent": agent, "key": key, "auth": {"HTTP_AUTHORIZATION": f"Bearer {key}"}}


def _answer(response) -> dict | None:
    """The body of a 2xx, or None after checking that a refusal is the envelope."""
    assert response.status_code < 500, response.content[:500]
    event(f"status {response.status_code}")  # shown by --hypothesis-show-statistics
    payload = orjson.loads(response.content) if response.content else None
    if response.status_code >= 400:
        assert set(payload) == {"error"}, payload
        assert payload["error"]["code"] and payload["error"]["message"], payload
        event(f"refused {payload['error']['code']}")
        return None
    return payload


async def _replay(key: str, path: str, *, until) -> list[dict]:
    """The replay of ``path`` from the start, read until ``until(events)`` holds: what is expected
    is waited for (each event within 10 s), never a quiet interval taken for the end."""
    comm = connect(path + "?after=0", key)
    connected, _ = await comm.connect()
    assert connected
    events: list[dict] = []
    try:
        while not until(events):
            message = await comm.receive_output(10)
            assert message["type"] == "websocket.send", message
            events.append(orjson.loads(message["text"]))
    finally:
        await comm.disconnect()
        await fanout.close_hub()  # async_to_sync's loop closes next: its hub must stop first
    return events


def _still_answers(door: dict, record: dict) -> None:
    client = Client()
    listed = client.get("/reviewer/v1/artifacts?limit=500", **door["auth"])
    assert listed.status_code == 200, listed.content[:300]
    got = client.get(f"/reviewer/v1/artifacts/{record['id']}", **door["auth"])
    assert got.status_code == 200
    assert orjson.loads(got.content)["data"] == record["data"]
    last_seq = Agent.objects.get(pk=door["agent"].pk).last_seq
    events = async_to_sync(_replay)(
        door["key"], "/reviewer/v1/events", until=lambda got: len(got) == last_seq
    )
    assert [e["seq"] for e in events] == list(range(1, last_seq + 1))
    if record["sessionId"]:
        # the session's replay reaches the record's event (a timeout there fails the test)
        async_to_sync(_replay)(
            door["key"],
            f"/reviewer/v1/sessions/{record['sessionId']}/events",
            until=lambda got: any(e["record"]["id"] == record["id"] for e in got),
        )


SETTINGS = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@SETTINGS
@given(body=tag_bodies())
def test_generated_tag_bodies(door, body):
    response = Client().post(
        "/reviewer/v1/artifacts", data=body, content_type="application/json", **door["auth"]
    )
    record = _answer(response)
    if record is not None:
        _still_answers(door, record)


@SETTINGS
@given(body=tool_bodies())
def test_generated_tool_calls_as_object_and_as_json_text(door, body):
    response = Client().post(
        "/reviewer/v1/tools/tag_artifact",
        data=body,
        content_type="application/json",
        **door["auth"],
    )
    record = _answer(response)
    if record is not None:
        assert record["source"] == "model"
        _still_answers(door, record)


@SETTINGS
@given(body=session_bodies())
def test_generated_session_bodies(door, body):
    client = Client()
    response = client.post(
        "/reviewer/v1/sessions", data=body, content_type="application/json", **door["auth"]
    )
    session = _answer(response)
    listed = client.get("/reviewer/v1/sessions?limit=500", **door["auth"])
    assert listed.status_code == 200
    if session is not None:
        got = client.get(f"/reviewer/v1/sessions/{session['id']}", **door["auth"])
        assert got.status_code == 200
