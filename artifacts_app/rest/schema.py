"""drf-spectacular glue: the bearer scheme, the error codes each operation answers, and a
postprocessing hook that states what the server enforces beyond what serializers can say.

The schema is held to the server by ``tests/rest/test_schemathesis.py`` (every schemathesis check,
positive and negative data): a bound, pattern or code here that the server does not keep — or a
rule the server keeps that is missing here — fails it. Names and limits come from ``names`` and the
modules that enforce them, never retyped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from artifacts_app import names, tag_input
from artifacts_app.jsontypes import JSONObject
from artifacts_app.rest.serializers import ErrorSerializer, TagSerializer

if TYPE_CHECKING:
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.openapi import AutoSchema
    from rest_framework.request import Request
from artifacts_app.selectors.pages import DEFAULT_LIMIT, MAX_LIMIT


class BearerScheme(OpenApiAuthenticationExtension):
    target_class = "artifacts_app.rest.auth.BearerAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> JSONObject:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent key (aak_…) or a user token (aau_…).",
        }


class TagInputExtension(OpenApiSerializerExtension):
    """A tag's JSON body (``TagRequest``) as ``tag_input`` declares it: one declaration for the
    view, the rules, the tool and this schema."""

    target_class = TagSerializer

    def map_serializer(self, auto_schema: AutoSchema, direction: str) -> JSONObject:
        return tag_input.openapi_schema()


# Every error code the REST routes answer, with its status. An operation names the codes of its
# own (``errors(...)``); ``COMMON`` are answered by every operation (the door, authentication,
# the agent's lookup, the method). The fuzzer fails on a code an operation answers but does not list.
CODES: dict[str, int] = {
    # the door (DoorMiddleware), before any view
    "invalid_path": 400,
    "invalid_host": 400,
    "invalid_charset": 400,  # a Content-Type charset that is not a text encoding (media.py)
    # authentication and access
    "not_authenticated": 401,
    "invalid_token": 401,
    "forbidden": 403,
    "wrong_agent": 403,
    "csrf_failed": 403,
    # a bad bearer token past ARTIFACTS_AUTH_FAILURE_LIMIT from its address (artifacts_app.throttle)
    "too_many_attempts": 429,
    "unknown_agent": 404,
    "unknown_route": 404,
    "method_not_allowed": 405,
    # query parameters
    "invalid_query": 400,
    "invalid_limit": 400,
    "invalid_cursor": 400,
    "invalid_version": 400,
    "unknown_format": 400,
    # bodies
    "malformed_body": 400,
    "malformed_json": 400,
    "malformed_multipart": 400,
    "too_many_fields": 400,
    "invalid_body": 400,
    "unknown_field": 400,
    "unsupported_media_type": 415,
    "body_too_large": 413,
    # a streamed body (agent_site.body) that ended before its length: the client went away
    "body_incomplete": 400,
    "body_timeout": 408,
    # the tag's fields (services.rules, media, the view's contents)
    "data_required": 400,
    "invalid_data": 400,
    "invalid_kind": 400,
    "unknown_kind": 400,
    # webhooks (services.webhooks, webhooks.targets)
    "invalid_webhook_url": 400,
    "unknown_event_type": 400,
    "invalid_events": 400,
    "invalid_active": 400,
    "invalid_after": 400,
    "too_many_webhooks": 400,
    "unknown_webhook": 404,
    "schema_invalid": 400,
    "invalid_key": 400,
    "invalid_title": 400,
    "invalid_session_id": 400,
    "invalid_turn_id": 400,
    "invalid_source": 400,
    "invalid_contents": 400,
    "invalid_base64": 400,
    "contents_conflict": 400,
    "invalid_content_type": 400,
    "content_type_without_contents": 400,
    "content_type_required": 400,
    "record_required": 400,
    "data_too_large": 413,
    "content_too_large": 413,
    "invalid_owner": 400,
    "unknown_user": 400,
    "tool_input_invalid": 400,
    # validating data against a kind declared over HTTP took past ARTIFACTS_MAX_VALIDATION_MS,
    # or the agent's tags past its share, ARTIFACTS_VALIDATION_SHARE_MS a second, by 2 s or more
    "schema_too_costly": 400,
    # PUT artifacts/kinds (services.kinds, jsonschemas, tool.strict)
    "invalid_kinds": 400,
    "invalid_description": 400,
    "invalid_schema": 400,
    "invalid_max": 400,
    "invalid_keep_versions": 400,
    "invalid_agent_tool": 400,
    "tool_needs_kinds": 400,
    "kinds_in_code": 409,
    # what is named does not exist, or is hidden from the caller
    "unknown_artifact": 404,
    "unknown_session": 404,
    "unknown_version": 404,
    "no_content": 404,
    "tool_not_offered": 404,
    # conflicts and ranges
    "session_exists": 409,
    "cap_reached": 409,
    "not_keyed": 409,
    "range_not_satisfiable": 416,
    # the tag's other contents: a finished upload, known contents (API.md "Large contents")
    "invalid_upload": 400,
    "invalid_contents_sha256": 400,
    "invalid_contents_size": 400,
    "known_contents_incomplete": 400,
    "upload_incomplete": 400,
    "unknown_upload": 404,
    "contents_unknown": 409,
    # resumable uploads (tus, rest/uploads.py)
    "invalid_upload_length": 400,
    "upload_length_required": 400,
    "invalid_upload_offset": 400,
    "invalid_content_length": 400,
    "invalid_upload_metadata": 400,
    "unsupported_checksum": 400,
    "invalid_checksum": 400,
    "upload_too_large": 413,
    "upload_past_length": 413,
    "offset_mismatch": 409,
    "upload_expired": 410,
    "upload_lost": 410,
    "tus_version": 412,
    "upload_locked": 423,
    "checksum_mismatch": 460,
    # a dependency that failed (artifacts_app.faults): the service, not the request, is at fault
    "database_unavailable": 503,
    "storage_unavailable": 503,
    "storage_full": 507,
    # the server (agent_site/server.py), before any route: a body past the streams it takes at
    # once (`busy`, with Retry-After), and what its HTTP parser refuses (any request; no
    # operation lists these three)
    "busy": 503,
    "malformed_request": 400,
    "uri_too_long": 414,
    "headers_too_large": 431,
}

COMMON = (
    "invalid_path",
    "invalid_host",
    "invalid_charset",
    "not_authenticated",
    "invalid_token",
    "forbidden",
    "wrong_agent",
    "csrf_failed",
    "too_many_attempts",
    "unknown_agent",
    "unknown_route",
    "method_not_allowed",
    "invalid_query",  # the door refuses NUL in any query parameter, named or not
    "database_unavailable",
)
# What any JSON body can be refused for before its fields are read.
JSON_BODY = (
    "malformed_body",
    "malformed_json",
    "invalid_body",
    "unknown_field",
    "unsupported_media_type",
    "body_too_large",
    "body_incomplete",
    "body_timeout",
    "busy",
)
PAGE = ("invalid_query", "invalid_limit", "invalid_cursor")
# What a tag's fields can be refused for (services.rules and the tag's write), any entry point.
TAG = (
    "data_required",
    "invalid_data",
    "invalid_kind",
    "unknown_kind",
    "schema_invalid",
    "schema_too_costly",
    "invalid_key",
    "invalid_title",
    "invalid_session_id",
    "invalid_turn_id",
    "invalid_source",
    "invalid_contents",
    "invalid_content_type",
    "content_type_without_contents",
    "data_too_large",
    "content_too_large",
    "unknown_session",
    "cap_reached",
    "invalid_upload",
    "invalid_contents_sha256",
    "invalid_contents_size",
    "known_contents_incomplete",
    "upload_incomplete",
    "unknown_upload",
    "contents_unknown",
    # the blob's write (artifacts_app.faults)
    "storage_unavailable",
    "storage_full",
)
# What kinds declared over HTTP are refused for (PUT artifacts/kinds).
KINDS = (
    "invalid_kinds",
    "invalid_kind",
    "invalid_description",
    "invalid_schema",
    "invalid_max",
    "invalid_keep_versions",
    "invalid_agent_tool",
    "tool_needs_kinds",
    "kinds_in_code",
)
VERSION = ("invalid_version", "unknown_artifact", "unknown_version")
# What a webhook's fields are refused for (POST and PATCH webhooks).
WEBHOOK = (
    "invalid_webhook_url",
    "invalid_events",
    "unknown_event_type",
    "invalid_kinds",
    "unknown_kind",
    "invalid_description",
    "invalid_active",
)

STATUS_TEXT = {
    400: "Bad input: the body, a field, a path or a query parameter (see `error.code`).",
    401: "No credentials, or a token that is unknown or revoked.",
    403: "Credentials that may not do this (another agent's key, a user tagging, CSRF).",
    404: "Unknown agent, or a record, version or session that does not exist or is hidden.",
    405: "Method not allowed on this route.",
    408: "The request body stalled, or was not whole within the server's deadline; send it again.",
    409: "A conflict: the session id exists already, the cap is reached with every other record "
    "pinned (`cap_reached`), or an unkeyed record has nothing to restore (`not_keyed`).",
    410: "The upload expired (ARTIFACTS_UPLOAD_EXPIRY) or its bytes are gone; make a new one.",
    412: "The request speaks a tus version the server does not (`Tus-Resumable: 1.0.0`).",
    413: "A size limit was passed (data, body or content); the message says which.",
    415: "Unsupported body media type.",
    423: "Another request is writing this upload now; ask its offset once it ends.",
    460: "The body does not match its Upload-Checksum; the offset is kept, send it again.",
    416: "The range starts past the end of the content.",
    429: "Too many failed authentications from this address; retry after `Retry-After` seconds "
    "(valid credentials are accepted meanwhile).",
    503: "A dependency failed (database or blob storage), or the server is receiving as many "
    "request bodies as it takes at once (`busy`); retry after `Retry-After` seconds.",
    507: "The blob storage is full; nothing was stored.",
}

# The codes of each operation, read by the postprocessing hook (operationId -> codes by status).
_OPERATION_CODES: dict[str, dict[int, list[str]]] = {}


def errors(*codes: str | int) -> dict[int, OpenApiResponse]:
    """The error responses of an operation answering ``codes`` besides the ``COMMON`` ones.

    A status (an int, as views once passed) stands for every code of that status: valid, but
    less precise than naming the codes."""
    named = [
        found
        for code in codes
        for found in (
            [c for c, status in CODES.items() if status == code]
            if isinstance(code, int)
            else [code]
        )
    ]
    by_status: dict[int, list[str]] = {}
    for code in (*COMMON, *named):
        by_status.setdefault(CODES[code], [])
        if code not in by_status[CODES[code]]:
            by_status[CODES[code]].append(code)
    responses = {
        status: OpenApiResponse(
            ErrorSerializer,
            description=STATUS_TEXT[status] + " Codes: " + ", ".join(f"`{c}`" for c in found) + ".",
        )
        for status, found in sorted(by_status.items())
    }
    # drf-spectacular keeps no extra data on a response: the codes travel in the description and
    # are turned into the schema's enum by ``postprocess`` below.
    return responses


def codes_in(description: str) -> list[str]:
    _, _, listed = description.partition(" Codes: ")
    return [c.strip("`. ") for c in listed.split(", ") if c.strip("`. ")]


def _int_schema(minimum: int, maximum: int, default: int | None = None) -> JSONObject:
    schema: JSONObject = {"type": "integer", "minimum": minimum, "maximum": maximum}
    if default is not None:
        schema["default"] = default
    return schema


# Query and path text reaches SQL only without NUL (the door refuses it: 400 invalid_query/_path).
NO_NUL = "^[^\\u0000]*$"
CURSOR = OpenApiParameter(
    "cursor",
    {"type": "string", "maxLength": 512, "pattern": NO_NUL},
    description="Opaque cursor from a page's `next`.",
)
LIMIT = OpenApiParameter(
    "limit",
    _int_schema(1, MAX_LIMIT, DEFAULT_LIMIT),
    description=f"Page size, 1–{MAX_LIMIT} (default {DEFAULT_LIMIT}).",
)
VERSION_MAX = 2**31 - 1  # selectors.versions.check_number
# API.md "Search": the list's full text and its conditions over ``data``.
SEARCH = (
    OpenApiParameter(
        "q",
        {"type": "string", "maxLength": 512, "pattern": NO_NUL},
        description=(
            "Full text: words (letters and digits), case-insensitive, all must match; the last "
            'also as a prefix; `"a phrase"`; `-word` excludes. At most 512 characters, 32 words.'
        ),
    ),
    OpenApiParameter(
        "where",
        {"type": "string", "maxLength": 4096, "pattern": NO_NUL},
        description=(
            "A JSON object over `data`: dotted paths to a scalar (equality) or an operator object "
            "($eq $ne $gt $gte $lt $lte $in $nin $exists $contains); $and / $or take lists. At "
            "most 16 conditions, 4 deep."
        ),
    ),
)


def query_text(max_length: int) -> JSONObject:
    return {"type": "string", "maxLength": max_length, "pattern": NO_NUL}


def anchored(pattern: str) -> str:
    return f"^{pattern}$"


# Path parameters: what the URLconf's patterns (from names) match; anything else is 404.
PATH_SCHEMAS: dict[str, JSONObject] = {
    "slug": {"type": "string", "pattern": anchored(names.SLUG_PATTERN)},
    "artifact_id": {"type": "string", "pattern": anchored(names.ARTIFACT_ID_PATTERN)},
    "session_id": {"type": "string", "pattern": anchored(names.SESSION_ID_PATTERN)},
    "number": _int_schema(1, VERSION_MAX),
}

# Content routes: the headers API.md "Content" promises, per status.
_ETAG = {"schema": {"type": "string", "pattern": '^"[0-9a-f]{64}"$'}, "description": "The sha256."}
_BLOB_HEADERS: dict[str, JSONObject] = {
    "ETag": {**_ETAG, "required": True},
    "Accept-Ranges": {"schema": {"type": "string", "enum": ["bytes"]}, "required": True},
    "X-Content-Type-Options": {"schema": {"type": "string", "enum": ["nosniff"]}, "required": True},
    "Content-Security-Policy": {
        "schema": {"type": "string", "enum": ["sandbox"]},
        "required": True,
    },
    "Cache-Control": {"schema": {"type": "string"}, "required": True},
}
CONTENT_HEADERS: dict[str, dict[str, JSONObject]] = {
    "200": {
        **_BLOB_HEADERS,
        "Content-Length": {"schema": {"type": "integer", "minimum": 0}, "required": True},
        "Content-Disposition": {
            "schema": {"type": "string", "pattern": '^(inline|attachment); filename="'},
            "required": True,
            "description": "inline for the safe types, else attachment; with a filename (RFC 6266).",
        },
    },
    "206": {
        **_BLOB_HEADERS,
        "Content-Length": {"schema": {"type": "integer", "minimum": 1}, "required": True},
        "Content-Range": {
            "schema": {"type": "string", "pattern": "^bytes [0-9]+-[0-9]+/[0-9]+$"},
            "required": True,
        },
        "Content-Disposition": {
            "schema": {"type": "string", "pattern": '^(inline|attachment); filename="'},
            "required": True,
        },
    },
    "302": {
        **_BLOB_HEADERS,
        "Location": {
            "schema": {"type": "string"},
            "required": True,
            "description": "A signed S3 URL (ARTIFACTS_S3_REDIRECT).",
        },
    },
    "304": {"ETag": {**_ETAG, "required": True}},
    "416": {
        "ETag": {**_ETAG, "required": True},
        "Content-Range": {
            "schema": {"type": "string", "pattern": "^bytes \\*/[0-9]+$"},
            "required": True,
        },
    },
}
CONTENT_OPERATIONS = ("artifacts_content", "artifacts_version_content")

# Request bodies whose views refuse unknown fields (views.object_body, services.kinds, the
# multipart parser's parts): closed.
CLOSED_BODIES = (
    "TagRequest",
    "SessionCreateRequest",
    "ToolRunRequest",
    "KindsDeclareRequest",
    "KindDeclareRequest",
    "TagMultipartRequest",
    "WebhookCreateRequest",
    "PatchedWebhookUpdateRequest",
    "ReplayRequest",
)
# The envelope has exactly these fields (errors.envelope, ArtifactError.as_envelope).
CLOSED_RESPONSES = ("Error", "ErrorBody")


def postprocess(
    result: JSONObject, generator: SchemaGenerator, request: Request | None, public: bool
) -> JSONObject:
    """SPECTACULAR_SETTINGS POSTPROCESSING_HOOKS: path parameters, error code enums, content
    headers, closed bodies, and the multipart parts' encodings."""
    schemas = result.get("components", {}).get("schemas", {})
    for name in (*CLOSED_BODIES, *CLOSED_RESPONSES):
        if name in schemas:
            schemas[name]["additionalProperties"] = False
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] in PATH_SCHEMAS:
                    parameter["schema"] = dict(PATH_SCHEMAS[parameter["name"]])
            _error_enums(operation)
            if operation.get("operationId") in CONTENT_OPERATIONS:
                for status, headers in CONTENT_HEADERS.items():
                    if status in operation["responses"]:
                        operation["responses"][status]["headers"] = headers
            body = operation.get("requestBody", {}).get("content", {})
            if "multipart/form-data" in body:
                body["multipart/form-data"]["encoding"] = {
                    "record": {"contentType": "application/json"},
                    "contents": {"contentType": "*/*"},
                }
    multipart = schemas.get("TagMultipartRequest")
    if multipart is not None:
        record = multipart["properties"]["record"]
        multipart["properties"]["record"] = {
            "allOf": [{"$ref": "#/components/schemas/TagRequest"}],
            "description": record.get("description", ""),
        }
    return result


def _error_enums(operation: JSONObject) -> None:
    for response in operation.get("responses", {}).values():
        codes = codes_in(response.get("description", ""))
        content = response.get("content", {}).get("application/json")
        if not codes or content is None:
            continue
        content["schema"] = {
            "allOf": [
                {"$ref": "#/components/schemas/Error"},
                {
                    "type": "object",
                    "properties": {
                        "error": {
                            "type": "object",
                            "properties": {"code": {"type": "string", "enum": codes}},
                        }
                    },
                },
            ]
        }
