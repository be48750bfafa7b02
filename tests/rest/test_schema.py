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
