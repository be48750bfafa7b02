"""The OpenAPI schema at /api/schema/, the offline docs at /api/docs/, and a bounded schemathesis run."""

from __future__ import annotations

import re

import orjson

from artifacts_app import names
from artifacts_app.rest.schema import CODES
from artifacts_app.selectors.pages import MAX_LIMIT
from tests.rest.conftest import World, bearer
from tests.rest.test_access_matrix import MATRIX


def schema_of(client) -> dict:
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    return orjson.loads(response.content)


def test_schema_describes_every_route_with_its_errors(world: World, client):
    schema = schema_of(client)
    paths = schema["paths"]
    for route, method in MATRIX:
        templated = "/{slug}/v1/" + re.sub(r"<(\w+)>", r"{\1}", route)
        assert templated in paths, templated
        operation = paths[templated][method.lower()]
        for status in ("400", "401", "403", "404"):
            body = operation["responses"][status]["content"]["application/json"]["schema"]
            envelope, codes = body["allOf"]
            assert envelope == {"$ref": "#/components/schemas/Error"}
            enum = codes["properties"]["error"]["properties"]["code"]["enum"]
            assert enum and all(CODES[code] == int(status) for code in enum), (templated, enum)
        assert operation.get("summary")
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An agent key (aak_…) or a user token (aau_…).",
    }
    tag = paths["/{slug}/v1/artifacts"]["post"]["requestBody"]["content"]
    assert set(tag) == {"application/json", "multipart/form-data"}
    assert "413" in paths["/{slug}/v1/artifacts"]["post"]["responses"]


def test_schema_is_valid_openapi(client):
    import schemathesis

    # schemathesis checks the document against the OpenAPI 3.0 meta-schema.
    schemathesis.from_dict(schema_of(client), validate_schema=True)


def test_docs_work_offline(client):
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    external = re.findall(r"""(?:src|href)=["'](https?:)?//""", html)
    assert external == []  # no CDN: every asset is served by this site


def test_debug_off_unknown_route_is_the_envelope(world: World, client, settings):
    settings.DEBUG = False
    response = client.post("/reviewer/v1/nothing/here", **bearer(world.agent_key))
    assert response.status_code == 404
    assert orjson.loads(response.content)["error"]["code"] == "unknown_route"


def test_schema_states_what_the_server_enforces(client):
    """Bounds, patterns (from names.py), closed bodies, content headers, multipart encoding."""
    schema = schema_of(client)
    paths, components = schema["paths"], schema["components"]["schemas"]
    listing = paths["/{slug}/v1/artifacts"]["get"]
    params = {p["name"]: p for p in listing["parameters"]}
    assert params["limit"]["schema"]["minimum"] == 1
    assert params["limit"]["schema"]["maximum"] == MAX_LIMIT
    assert params["slug"]["schema"]["pattern"] == f"^{names.SLUG_PATTERN}$"
    detail = paths["/{slug}/v1/artifacts/{artifact_id}"]["get"]
    ids = {p["name"]: p["schema"] for p in detail["parameters"]}
    assert ids["artifact_id"]["pattern"] == f"^{names.ARTIFACT_ID_PATTERN}$"
    tag = components["TagRequest"]
    assert tag["additionalProperties"] is False
    assert components["SessionCreateRequest"]["additionalProperties"] is False
    assert components["ToolRunRequest"]["additionalProperties"] is False
    assert tag["properties"]["kind"]["pattern"] == f"^{names.KIND_PATTERN}$"
    assert tag["properties"]["sessionId"]["pattern"] == f"^{names.SESSION_ID_PATTERN}$"
    assert tag["properties"]["key"]["pattern"].endswith(f"{{1,{names.KEY_MAX}}}$")
    assert tag["properties"]["title"]["pattern"].endswith(f"{{0,{names.TITLE_MAX}}}$")
    assert tag["properties"]["turnId"]["pattern"].endswith(f"{{0,{names.TURN_MAX}}}$")
    multipart = paths["/{slug}/v1/artifacts"]["post"]["requestBody"]["content"][
        "multipart/form-data"
    ]
    assert multipart["encoding"]["record"] == {"contentType": "application/json"}
    for route in (
        "/{slug}/v1/artifacts/{artifact_id}/content",
        "/{slug}/v1/artifacts/{artifact_id}/versions/{number}/content",
    ):
        responses = paths[route]["get"]["responses"]
        assert {"ETag", "Content-Length", "Content-Disposition", "Accept-Ranges"} <= set(
            responses["200"]["headers"]
        )
        assert "Content-Range" in responses["206"]["headers"]
        assert "Content-Range" in responses["416"]["headers"]
        assert "ETag" in responses["304"]["headers"]


def _put_kinds(client, token: str, body: dict) -> tuple[int, dict]:
    response = client.put(
        "/free/v1/artifacts/kinds",
        data=orjson.dumps(body),
        content_type="application/json",
        **bearer(token),
    )
    return response.status_code, orjson.loads(response.content)


def test_the_bodies_the_server_closes_are_closed_in_the_schema(client, freeform):
    from artifacts_app import services

    _, key = services.agent_key_create(agent=freeform)
    components = schema_of(client)["components"]["schemas"]
    for name in ("KindsDeclareRequest", "KindDeclareRequest", "TagMultipartRequest"):
        assert components[name]["additionalProperties"] is False, name
    note = {"description": "A note."}
    for body, field in [
        ({"kinds": {"note": note}, "extra": 1}, "extra"),
        ({"kinds": {"note": {**note, "extra": 1}}}, "kinds.note.extra"),
    ]:
        status, answer = _put_kinds(client, key, body)
        assert (status, answer["error"]["code"]) == (400, "unknown_field")
        assert answer["error"]["details"]["field"] == field


def test_the_schema_says_null_exactly_where_the_server_takes_it(client, freeform):
    from artifacts_app import services

    _, key = services.agent_key_create(agent=freeform)
    components = schema_of(client)["components"]["schemas"]
    declare, kind = components["KindsDeclareRequest"], components["KindDeclareRequest"]
    # null is "left out": the default (the agent's, for a kind's keepVersions).
    assert declare["properties"]["max"]["nullable"] is True
    assert declare["properties"]["keepVersions"]["nullable"] is True
    assert kind["properties"]["keepVersions"]["nullable"] is True
    body = {"kinds": {"note": {"description": "A note.", "keepVersions": None}}}
    status, answer = _put_kinds(client, key, {**body, "max": None, "keepVersions": None})
    assert status == 200, answer
    assert (answer["max"], answer["keepVersions"]) == (1000, 10)
    assert answer["kinds"][0]["keepVersions"] is None
    # Where the schema has no null, the server refuses it.
    assert "nullable" not in declare["properties"]["agentTool"]
    status, answer = _put_kinds(client, key, {**body, "agentTool": None})
    assert (status, answer["error"]["code"]) == (400, "invalid_agent_tool")
    # Bounds: what the agent row holds, and a description that is more than whitespace.
    assert declare["properties"]["max"]["maximum"] == 2**31 - 1
    status, answer = _put_kinds(client, key, {**body, "max": 2**31})
    assert (status, answer["error"]["code"]) == (400, "invalid_max")
    description = kind["properties"]["description"]["pattern"]
    assert re.search(description, " \t") is None and re.search(description, " a ")
    status, answer = _put_kinds(client, key, {"kinds": {"note": {"description": " \t"}}})
    assert (status, answer["error"]["code"]) == (400, "invalid_description")


def test_the_schema_says_when_a_tag_needs_a_kind(world: World, client, freeform):
    from artifacts_app import services

    _, free_key = services.agent_key_create(agent=freeform)
    tag = schema_of(client)["components"]["schemas"]["TagRequest"]
    assert "kind" not in tag["required"]
    assert "required when it declares any" in tag["properties"]["kind"]["description"]
    record = orjson.dumps({"data": {"x": 1}}).decode()
    # A multipart record without a kind: refused where kinds are declared, "artifact" where not.
    declared = client.post("/reviewer/v1/artifacts", {"record": record}, **bearer(world.agent_key))
    assert declared.status_code == 400
    assert orjson.loads(declared.content)["error"]["code"] == "unknown_kind"
    free = client.post("/free/v1/artifacts", {"record": record}, **bearer(free_key))
    assert free.status_code == 201, free.content
    assert orjson.loads(free.content)["kind"] == "artifact"
