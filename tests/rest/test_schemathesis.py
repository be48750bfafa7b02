"""Schemathesis over every operation of /api/schema/, with every check, positive and negative data.

In-process WSGI calls (no server, no sockets), one test transaction; each operation is fuzzed with
an agent key (every write) and with a user token (the 403s, the owner's filters). Failures are
collected over the whole run and reported together, so that one run shows every imprecision.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from tests.rest.conftest import World

# Examples per operation × generation method × caller, at most 19 × 2 × (20 + 13) = 1,254; fewer
# are run where hypothesis runs out of distinct cases (an operation with only enum-aimed path
# parameters) or a negated multipart body cannot be sent. ignored_auth re-sends every accepted
# case twice more (without credentials, then with a wrong token).
AGENT_EXAMPLES = int(os.environ.get("ARTIFACTS_FUZZ_AGENT", "20"))
USER_EXAMPLES = int(os.environ.get("ARTIFACTS_FUZZ_USER", "13"))


# Refusals of schema-valid data that the shared schema cannot state: each depends on the agent's
# declarations or on stored state, or is a rule OpenAPI 3.0 has no keyword for.
BEYOND_SCHEMA = {
    "unknown_kind": "the agent's own kinds (GET artifacts/kinds), not in the shared schema",
    "schema_invalid": "data against the kind's own JSON Schema (GET artifacts/kinds)",
    "tool_input_invalid": "the tool's input against the agent's kinds",
    "invalid_data": "nested keys without U+0000, depth 100: OpenAPI 3.0 has no propertyNames",
    "invalid_content_type": "a media type naming one parameter twice",
    "content_type_without_contents": "a rule across two fields",
    "contents_conflict": "a rule across two fields",
    "invalid_cursor": "cursors are opaque: only a page's own `next` carries a valid one",
    "unknown_user": "an owner must be an existing username",
    "malformed_json": "the tool's input as JSON text: what a string holds is not for a schema",
    "invalid_kind": "kind names are the keys of `kinds`: OpenAPI 3.0 has no propertyNames",
    "invalid_schema": "a kind's JSON Schema against the draft 2020-12 meta-schema and its bounds",
    "tool_needs_kinds": "a rule across two fields",
    "invalid_webhook_url": "whether a URL's host resolves to public addresses is the network's answer",
    "too_many_webhooks": "the agent's webhooks so far (ARTIFACTS_WEBHOOK_MAX_PER_AGENT)",
    "invalid_body": "values inside a kind's schema (64-bit numbers, no U+0000, depth 100): "
    "OpenAPI 3.0 cannot bound what an open object nests",
    "invalid_upload_metadata": "tus's `key base64,…` pairs, unique keys: no schema keyword",
    "invalid_checksum": "a digest of the algorithm's length in base64: no schema keyword",
    "unsupported_checksum": "the algorithm inside tus's `<algorithm> <digest>` header",
    "upload_incomplete": "whether the named upload has all its bytes (stored state)",
    "known_contents_incomplete": "a rule across two fields",
}
# Query parameters whose grammar is beyond OpenAPI 3.0 (API.md "Search"): schema-valid text is
# refused with 400 invalid_query naming them.
BEYOND_SCHEMA_FIELDS = {
    "q": "a query of no words (letters or digits), or of more than 32",
    "where": "JSON text of an object of conditions over data",
}
STATE_STATUSES = {
    409: "the session id exists, the cap is reached with every record pinned, nothing to restore",
    413: "a body past the named upload's Upload-Length (its stored offset and length)",
    416: "a range past the end of this content",
}


def _positive_within_schema(ctx, response, case):
    """schemathesis's positive_data_acceptance, told of the refusals the schema cannot state."""
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    method = case.data_generation_method
    if method is not None and method.is_positive:
        if response.status_code in STATE_STATUSES:
            return None
        if response.status_code == 400:
            error = orjson.loads(response.get_data())["error"]
            if error["code"] in BEYOND_SCHEMA:
                return None
            field = (error.get("details") or {}).get("field")
            if error["code"] == "invalid_query" and field in BEYOND_SCHEMA_FIELDS:
                return None
    return positive_data_acceptance(ctx, response, case)


def _encode_record(case) -> None:
    """The multipart `record` part is encoded application/json (the schema's `encoding`), which
    schemathesis 3 does not apply to form fields: encode it here as a client would."""
    if (
        case.media_type == "multipart/form-data"
        and isinstance(case.body, dict)
        and "record" in case.body
    ):
        record = case.body["record"]
        if not isinstance(record, str | bytes):
            # json, not orjson: a negated record may hold an integer past 64 bits.
            case.body["record"] = json.dumps(record)


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


# Declared over HTTP: only an agent without a Python module takes it (the world's `other`, with
# its own key); on `reviewer` (declared in code) every case would answer 409 kinds_in_code.
FREEFORM_OPERATIONS = ("artifacts_kinds_declare",)


def _aimed(raw: dict[str, Any], world: World, *, negative: bool) -> dict[str, Any]:
    """Aim the fuzzer at this agent and at records and sessions that exist, beside random ones.

    Negated cases keep the served pattern for session ids: a session the fuzzer created ("0")
    is found, so an enum of the world's sessions would make its negation valid data."""
    for item in raw["paths"].values():
        for operation in item.values():
            slug = world.other.slug if operation.get("operationId") in FREEFORM_OPERATIONS else None
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "path":
                    continue
                if parameter["name"] == "slug":
                    parameter["schema"] = {"type": "string", "enum": [slug or "reviewer"]}
                elif parameter["name"] == "artifact_id":
                    parameter["schema"] = {
                        "type": "string",
                        "enum": [world.content_id, world.loose_ids[0], "art_missing"],
                    }
                elif parameter["name"] == "session_id" and not negative:
                    parameter["schema"] = {
                        "type": "string",
                        "enum": [world.alice_session, "s-none"],
                    }
    return raw


def _sendable(case) -> bool:
    """Whether the transport can put the case's body on the wire at all: a form is fields, a raw
    body is bytes. A negated body of another type (true, 1.5, []) has no encoding there."""
    from schemathesis.models import NotSet

    body = case.body
    if isinstance(body, NotSet) or case.media_type in (None, "application/json"):
        return True
    if case.media_type == "multipart/form-data":
        return isinstance(body, dict)
    return isinstance(body, str | bytes)


def _fuzz(operation, method, token: str, examples: int, checks, label: str, tally: dict) -> None:
    from hypothesis import HealthCheck, assume, given, settings

    auth = {"Authorization": f"Bearer {token}"}

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(data_generation_method=method))
    def run(case):
        assume(_sendable(case))
        tally["cases"] += 1
        _encode_record(case)
        case.headers = {**(case.headers or {}), **auth}
        # ignored_auth sets a wrong session cookie into this dict (schemathesis 3 expects one).
        case.cookies = case.cookies or {}
        response = case.call()
        tally["statuses"][response.status_code] = tally["statuses"].get(response.status_code, 0) + 1
        try:
            case.validate_response(response, checks=checks, headers=auth)
        except AssertionError as exc:
            tally["failures"].setdefault(
                f"{label}: {str(exc).strip().splitlines()[0]}",
                f"{exc}\n{case.as_curl_command()}"[:3000],
            )

    run()


def _offset_octets() -> None:
    """tus's PATCH body type (rest/uploads.py), sent as schemathesis sends octet-streams."""
    import schemathesis

    def as_bytes(value: Any) -> bytes:
        return value if isinstance(value, bytes) else str(value).encode()

    @schemathesis.serializer("application/offset+octet-stream")
    class OffsetOctets:
        def as_requests(self, context: Any, value: Any) -> dict[str, Any]:
            return {"data": as_bytes(value)}

        def as_werkzeug(self, context: Any, value: Any) -> dict[str, Any]:
            return {"data": as_bytes(value)}


@pytest.mark.timeout(900)  # ~1,000 generated cases: minutes on a loaded 2-core machine
def test_schemathesis_every_check_every_operation(world: World, client):
    import schemathesis
    from django.core.wsgi import get_wsgi_application

    _offset_octets()
    from schemathesis.checks import ALL_CHECKS
    from schemathesis.generation import DataGenerationMethod, GenerationConfig
    from schemathesis.specs.openapi.checks import missing_required_header, unsupported_method

    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    app = get_wsgi_application()
    schemas = {
        method: schemathesis.from_dict(
            _aimed(orjson.loads(response.content), world, negative=method.is_negative),
            app=app,
            # The test sets the credentials; generating random ones for each case only costs
            # time (ignored_auth still re-sends each accepted case without them, then wrong).
            generation_config=GenerationConfig(with_security_parameters=False),
        )
        for method in (DataGenerationMethod.positive, DataGenerationMethod.negative)
    }
    checks = (*ALL_CHECKS, _positive_within_schema, missing_required_header, unsupported_method)
    callers = (
        ("agent", world.agent_key, AGENT_EXAMPLES),
        ("user", world.alice_token, USER_EXAMPLES),
    )
    tally: dict[str, Any] = {"cases": 0, "statuses": {}, "failures": {}}
    started = time.monotonic()
    with keep_connection():
        by_method = {
            method: [result.ok() for result in schema.get_all_operations()]
            for method, schema in schemas.items()
        }
        operations = len(by_method[DataGenerationMethod.positive])
        for index in range(operations):
            for caller, token, examples in callers:
                for method, found in by_method.items():
                    operation = found[index]
                    label = f"{operation.verbose_name} [{caller}, {method.name}]"
                    freeform = operation.definition.raw.get("operationId") in FREEFORM_OPERATIONS
                    key = world.other_key if freeform and caller == "agent" else token
                    t0 = time.monotonic()
                    _fuzz(operation, method, key, examples, checks, label, tally)
                    if os.environ.get("ARTIFACTS_FUZZ_VERBOSE"):
                        print(f"{label}: {time.monotonic() - t0:.1f} s", flush=True)
    elapsed = time.monotonic() - started
    statuses = sorted(tally["statuses"].items())
    print(
        f"schemathesis: {tally['cases']} cases, {operations} operations, {elapsed:.1f} s; {statuses}"
    )
    failures = tally["failures"]
    if failures:
        pytest.fail(
            f"{len(failures)} distinct failures:\n\n"
            + "\n\n".join(f"== {k}\n{v}" for k, v in sorted(failures.items()))
        )
    assert tally["cases"] >= 1000
    # The fuzzer reached real work, not only refusals.
    assert {200, 201, 204} <= set(tally["statuses"]), statuses
