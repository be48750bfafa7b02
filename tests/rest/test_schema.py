"""The OpenAPI schema at /api/schema/, the offline docs at /api/docs/, and a bounded schemathesis run."""

from __future__ import annotations

import re
from contextlib import contextmanager

import orjson
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

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
            assert body == {"$ref": "#/components/schemas/Error"}
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


@contextmanager
def keep_connection():
    """A raw WSGI app closes the connection at request end; the test's transaction needs it open.
    (Django's test client reconnects these receivers after each of its requests.)"""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_schemathesis_no_5xx_and_responses_match_the_schema(world: World, client):
    import schemathesis
    from django.core.wsgi import get_wsgi_application
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_schema_conformance,
        status_code_conformance,
    )
    from schemathesis.generation import DataGenerationMethod

    raw = schema_of(client)
    # Aim the fuzzer at this agent and at records that exist, as well as at random ids.
    for item in raw["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] == "slug":
                    parameter["schema"] = {"type": "string", "enum": ["reviewer"]}
                if parameter["in"] == "path" and parameter["name"] == "artifact_id":
                    parameter["schema"] = {
                        "type": "string",
                        "enum": [world.content_id, world.loose_ids[0], "art_missing"],
                    }
                if parameter["in"] == "path" and parameter["name"] == "session_id":
                    parameter["schema"] = {
                        "type": "string",
                        "enum": [world.alice_session, "s-none"],
                    }
    schema = schemathesis.from_dict(
        raw,
        app=get_wsgi_application(),
        data_generation_methods=[DataGenerationMethod.positive, DataGenerationMethod.negative],
    )
    checks = (
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    )
    statuses: list[int] = []
    with keep_connection():
        # The agent's key reaches every write; a user's token exercises the 403s and the filters.
        ran = _fuzz(schema, {"Authorization": f"Bearer {world.agent_key}"}, checks, statuses, 50)
        _fuzz(schema, {"Authorization": f"Bearer {world.alice_token}"}, checks, statuses, 15)
    assert ran >= len(MATRIX)
    # The fuzzer reached real work, not only refusals.
    assert {200, 201, 204} <= set(statuses), sorted(set(statuses))
    assert max(statuses) < 500


def _fuzz(schema, headers, checks, statuses: list[int], examples: int) -> int:
    from hypothesis import HealthCheck, given, settings

    ran = 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def run(case):
            case.headers = {**(case.headers or {}), **headers}
            response = case.call_wsgi()
            statuses.append(response.status_code)
            case.validate_response(response, checks=checks)

        run()
        ran += 1
    return ran
