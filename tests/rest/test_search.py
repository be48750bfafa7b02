"""Search over HTTP (API.md "Search"): q and where on an agent's list, the list across agents
and who sees what there, and bad input as 400 ``invalid_query``."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import orjson
import pytest

from artifacts_app import services
from tests.rest.conftest import World, bearer


def get(client, path, token, **params):
    query = urlencode(params, doseq=True)
    return client.get(f"{path}?{query}" if query else path, **bearer(token))


def ids(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {record["id"] for record in orjson.loads(response.content)["results"]}


@pytest.fixture
def searchable(world: World):
    other = services.artifact_tag(
        agent=world.other, kind="note", key="n", data={"text": "pomegranate", "n": 3}
    )
    return other.record.id


def test_q_and_where_on_an_agents_list(world: World, client, searchable):
    path = "/reviewer/v1/artifacts"
    assert ids(get(client, path, world.agent_key, q="hello")) == {world.content_id}
    assert ids(get(client, path, world.agent_key, q="pr 4")) == {world.bob_ids[1]}
    where = json.dumps({"url": {"$in": ["https://x/pr/0", "https://x/pr/5"]}})
    assert ids(get(client, path, world.agent_key, where=where)) == {
        world.alice_ids[0],
        world.loose_ids[0],
    }
    # The plain list's visibility holds: alice finds only what lies in her sessions.
    assert ids(get(client, path, world.alice_token, where=where)) == {world.alice_ids[0]}
    assert ids(get(client, path, world.alice_token, q="pomegranate")) == set()


def test_next_keeps_the_query(world: World, client):
    first = get(client, "/reviewer/v1/artifacts", world.agent_key, q="pr", limit=2)
    page = orjson.loads(first.content)
    assert "q=pr" in page["next"]
    rest = client.get(page["next"], **bearer(world.agent_key))
    assert ids(rest).isdisjoint(ids(first))


BAD = [
    {"q": "x" * 513},
    {"q": " ".join(["w"] * 33)},
    {"q": "* : ^ NEAR AND ( )"[0:3]},
    {"q": '"'},
    {"q": "a\x00"},
    {"where": "[]"},
    {"where": "{"},
    {"where": '{"a": {"$where": "1"}}'},
    {"where": '{"a[0]": 1}'},
    {"where": '{"$or": [{"$or": [{"$or": [{"$or": [{"a": 1}]}]}]}]}'},
    {"where": json.dumps({"a": {"$in": list(range(1000))}})},
    {"where": "null"},
]


@pytest.mark.parametrize("params", BAD)
@pytest.mark.parametrize("path", ["/reviewer/v1/artifacts", "/api/v1/artifacts"])
def test_bad_search_input_is_400_invalid_query(world: World, client, path, params):
    response = get(client, path, world.agent_key, **params)
    assert response.status_code == 400, response.content
    error = orjson.loads(response.content)["error"]
    assert error["code"] == "invalid_query"


def test_a_malformed_where_names_the_part(world: World, client):
    where = json.dumps({"$and": [{"url": 1}, {"url": {"$between": [1, 2]}}]})
    response = get(client, "/reviewer/v1/artifacts", world.agent_key, where=where)
    assert response.status_code == 400, response.content
    assert orjson.loads(response.content)["error"]["details"] == {
        "field": "where",
        "part": "$and[1].url.$between",
    }


def test_found_as_soon_as_tagged_over_http(world: World, client):
    posted = client.post(
        "/reviewer/v1/artifacts",
        data=orjson.dumps(
            {
                "kind": "reviewed-pr",
                "key": "https://x/new",
                "data": {"url": "https://x/new"},
                "contents": "a review of tamarind",
                "contentType": "text/markdown",
            }
        ),
        content_type="application/json",
        **bearer(world.agent_key),
    )
    record = orjson.loads(posted.content)
    assert ids(get(client, "/reviewer/v1/artifacts", world.agent_key, q="tamarind")) == {
        record["id"]
    }
    client.delete(f"/reviewer/v1/artifacts/{record['id']}", **bearer(world.agent_key))
    assert ids(get(client, "/reviewer/v1/artifacts", world.agent_key, q="tamarind")) == set()


# --- across agents ---------------------------------------------------------------------------------


def test_across_agents_staff_see_every_agent_each_record_naming_it(
    world: World, client, searchable
):
    response = get(client, "/api/v1/artifacts", world.staff_token)
    records = orjson.loads(response.content)["results"]
    assert {r["id"] for r in records} >= world.all_ids() | {searchable}
    assert {r["agent"] for r in records} == {"reviewer", "other"}
    updated = [r["updatedAt"] for r in records]
    assert updated == sorted(updated, reverse=True)
    assert ids(get(client, "/api/v1/artifacts", world.staff_token, q="pomegranate")) == {searchable}
    assert ids(get(client, "/api/v1/artifacts", world.staff_token, agent="reviewer")) == (
        world.all_ids()
    )
    both = get(client, "/api/v1/artifacts", world.staff_token, agent=["reviewer", "other"])
    assert ids(both) >= world.all_ids() | {searchable}
    assert ids(get(client, "/api/v1/artifacts", world.staff_token, agent="nobody")) == set()


def test_across_agents_a_user_sees_its_sessions_and_a_key_its_agent(
    world: World, client, searchable
):
    assert ids(get(client, "/api/v1/artifacts", world.alice_token)) == set(world.alice_ids)
    assert ids(get(client, "/api/v1/artifacts", world.bob_token, q="pr")) == set(world.bob_ids)
    assert ids(get(client, "/api/v1/artifacts", world.agent_key)) == world.all_ids()
    assert ids(get(client, "/api/v1/artifacts", world.other_key)) == {
        *ids(get(client, "/other/v1/artifacts", world.other_key))
    }
    assert ids(get(client, "/api/v1/artifacts", world.other_key, agent="reviewer")) == set()


def test_across_agents_needs_credentials(world: World, client):
    response = client.get("/api/v1/artifacts")
    assert response.status_code == 401
    assert orjson.loads(response.content)["error"]["code"] == "not_authenticated"


def test_across_agents_pages_with_filters(world: World, client):
    first = get(client, "/api/v1/artifacts", world.staff_token, kind="reviewed-pr", limit=3)
    page = orjson.loads(first.content)
    assert len(page["results"]) == 3 and page["next"]
    seen = ids(first)
    while page["next"]:
        response = client.get(page["next"], **bearer(world.staff_token))
        page = orjson.loads(response.content)
        assert seen.isdisjoint(ids(response))
        seen |= ids(response)
    assert seen == world.all_ids()
    session = get(client, "/api/v1/artifacts", world.staff_token, sessionId=world.bob_session)
    assert ids(session) == set(world.bob_ids)
    keyed = get(client, "/api/v1/artifacts", world.staff_token, key="https://x/pr/3")
    assert ids(keyed) == {world.bob_ids[0]}


def test_other_paths_across_agents_are_404_envelopes(world: World, client):
    response = get(client, "/api/v1/sessions", world.staff_token)
    assert response.status_code == 404
    assert orjson.loads(response.content)["error"]["code"] == "unknown_route"


def test_across_agents_refuses_unknown_parameters(world: World, client):
    response = get(client, "/api/v1/artifacts", world.staff_token, agents="reviewer")
    assert response.status_code == 400
    assert orjson.loads(response.content)["error"]["details"] == {"fields": ["agents"]}
    bad_slug = get(client, "/api/v1/artifacts", world.staff_token, agent="Not A Slug")
    assert orjson.loads(bad_slug.content)["error"]["details"] == {"field": "agent"}
