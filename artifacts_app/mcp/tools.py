"""The MCP tools: ``tag_artifact`` (the REST tool's generated definition and its one service call),
``list_artifacts`` and ``read_artifact``. Each answers structured content (checked by the client
against the output schema) and resource links, never a large blob pasted into the model's context.

A refusal is a tool result with ``isError`` whose one text block is the REST error envelope as
JSON text (``{"error": {"code", "message", "details"?}}``): its message says what to fix, naming
the field, so that a model can correct its call (the tag's refusals are the REST tool's, worded by
``tool.model_facing``). It carries no structured content: a client checks structured content
against the tool's output schema (the record, the page), which an envelope is not — the
TypeScript SDK (and the Inspector on it) then reported "Structured content does not match the
tool's output schema" in place of the message — and the protocol lets an error result go without
it.
"""

from __future__ import annotations

import orjson

from artifacts_app import access, services, tool
from artifacts_app.errors import ArtifactError
from artifacts_app.jsontypes import JSONObject
from artifacts_app.mcp import reads
from artifacts_app.mcp.call import Call
from artifacts_app.registry import TOOL_NAME, spec_for
from artifacts_app.selectors import MAX_LIMIT, versions
from artifacts_app.values import check_text

LIST, READ = "list_artifacts", "read_artifact"

_NULLABLE_STRING = {"type": ["string", "null"]}
RECORD_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "kind": {"type": "string"},
        "key": _NULLABLE_STRING,
        "title": _NULLABLE_STRING,
        "data": {},
        "sessionId": _NULLABLE_STRING,
        "turnId": _NULLABLE_STRING,
        "source": {"type": "string", "enum": ["host", "model"]},
        "content": {
            "type": ["object", "null"],
            "properties": {
                "size": {"type": "integer"},
                "contentType": {"type": "string"},
                "sha256": {"type": "string"},
            },
            "required": ["size", "contentType", "sha256"],
        },
        "contentUrl": {"type": "string", "description": "The HTTP route of the content."},
        "version": {"type": "integer"},
        "pinned": {"type": "boolean"},
        "createdAt": {"type": "string"},
        "updatedAt": {"type": "string"},
    },
    "required": ["id", "kind", "data", "source", "version", "pinned", "createdAt", "updatedAt"],
}
PAGE_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "results": {"type": "array", "items": RECORD_SCHEMA},
        "nextCursor": {
            **_NULLABLE_STRING,
            "description": "Pass as `cursor` for the next page; null on the last one.",
        },
    },
    "required": ["results", "nextCursor"],
}


def definitions(call: Call) -> list[JSONObject]:
    """The tools/list entries (``mcp_types.Tool`` fields) for this agent."""
    found = [
        {
            "name": LIST,
            "description": (
                "List this agent's artifacts you may see, newest-updated first, a page at a time; "
                "search them with q (words) and where (conditions over data). Each result carries "
                "its resource URI; read one with read_artifact."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "kind": {**_NULLABLE_STRING, "description": "Only artifacts of this kind."},
                    "sessionId": {**_NULLABLE_STRING, "description": "Only this session's."},
                    "q": {
                        **_NULLABLE_STRING,
                        "maxLength": 512,
                        "description": (
                            "Full text over title, key, kind, the strings in data and text "
                            "contents: every word must match (the last also as a prefix), "
                            '"a phrase" matches in order, -word excludes.'
                        ),
                    },
                    "where": {
                        "type": ["object", "string", "null"],
                        "description": (
                            "Conditions over data (an object, or its JSON text): dotted paths to "
                            'a value (equality) or to operators, e.g. {"pr.author": "ana", '
                            '"score": {"$gte": 3}}; $eq $ne $gt $gte $lt $lte $in $nin $exists '
                            "$contains; $and / $or take lists."
                        ),
                    },
                    "limit": {
                        "type": ["integer", "null"],
                        "minimum": 1,
                        "maximum": MAX_LIMIT,
                        "description": f"Page size, 1 to {MAX_LIMIT} (default 50).",
                    },
                    "cursor": {
                        **_NULLABLE_STRING,
                        "description": "The nextCursor of the previous page.",
                    },
                },
                "additionalProperties": False,
            },
            "outputSchema": PAGE_SCHEMA,
        },
        {
            "name": READ,
            "description": (
                "Read one artifact's record (its data, title, kind, session, version). Content is "
                "not pasted: the result links to it (read the resource, or fetch contentUrl)."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The artifact's id (art_…)."},
                    "version": {
                        "type": ["integer", "null"],
                        "minimum": 1,
                        "description": "A version number; null for the current record.",
                    },
                },
                "required": ["id"],
                "additionalProperties": False,
            },
            "outputSchema": RECORD_SCHEMA,
        },
    ]
    spec = spec_for(call.agent)
    if spec.tool_enabled:
        definition = tool.tool_definition(spec, "anthropic")
        found.insert(
            0,
            {
                "name": TOOL_NAME,
                "description": definition["description"],
                "inputSchema": definition["input_schema"],
                "outputSchema": RECORD_SCHEMA,
            },
        )
    return found


def _unknown(arguments: JSONObject, allowed: set[str]) -> None:
    extra = sorted(set(arguments) - allowed)
    if extra:
        raise ArtifactError(
            "unknown_argument",
            f"`{extra[0]}` is not an argument of this tool; it takes {', '.join(sorted(allowed))}.",
            {"field": extra[0]},
        )


def run(call: Call, name: str, arguments: JSONObject) -> JSONObject:
    """Run a tool; answers the result's fields (``mcp_types.CallToolResult``), refusals included."""
    try:
        if name == TOOL_NAME and spec_for(call.agent).tool_enabled:
            return _tag(call, arguments)
        if name == LIST:
            return _list(call, arguments)
        if name == READ:
            return _read(call, arguments)
    except ArtifactError as error:
        return refusal(error)
    return refusal(
        ArtifactError(
            "unknown_tool",
            f"There is no tool {name!r}; the tools are listed by tools/list.",
            {"field": "name"},
        )
    )


def refusal(error: ArtifactError) -> JSONObject:
    """The result of a refused call: ``isError``, the envelope as the one text block, no
    ``structuredContent`` (the output schemas describe what a call answers, not refusals)."""
    return {
        "content": [{"type": "text", "text": orjson.dumps(error.as_envelope()).decode()}],
        "isError": True,
    }


def _link(call: Call, record: JSONObject, uri: str) -> JSONObject:
    return {
        "type": "resource_link",
        "uri": uri,
        "name": record.get("title") or record.get("key") or record["id"],
        "mimeType": "application/json",
    }


def _tag(call: Call, arguments: JSONObject) -> JSONObject:
    access.require(call.caller, call.agent, access.Action.TAG)
    result = services.tool_run(
        agent=call.agent, input=arguments, session_id=call.session_id, turn_id=call.turn_id
    )
    told = tool.ToolResult.tagged(result.record, result.created)
    wire = reads.record_json(result.record, call.base_url, call.agent.slug, versioned=False)
    uri = reads.record_uri(call.agent.slug, result.record.id)
    return {
        "content": [{"type": "text", "text": told.content}, _link(call, wire, uri)],
        "structuredContent": wire,
    }


def _list(call: Call, arguments: JSONObject) -> JSONObject:
    _unknown(arguments, {"kind", "sessionId", "q", "where", "limit", "cursor"})
    where = arguments.get("where")
    if where is not None and not isinstance(where, dict | str):
        raise ArtifactError(
            "invalid_query", "`where` is an object (or its JSON text) or null.", {"field": "where"}
        )
    limit = arguments.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise ArtifactError(
            "invalid_limit", f"`limit` is a whole number from 1 to {MAX_LIMIT}.", {"field": "limit"}
        )
    page = reads.list_page(
        call.agent,
        call.caller,
        cursor=reads.check_text_arg(arguments, "cursor"),
        limit=limit,
        kind=reads.check_text_arg(arguments, "kind"),
        session_id=reads.check_text_arg(arguments, "sessionId"),
        q=reads.check_text_arg(arguments, "q"),
        where=where,
    )
    slug = call.agent.slug
    results = [
        reads.record_json(record, call.base_url, slug, versioned=False) for record in page.records()
    ]
    more = f"; more with cursor {page.next_cursor!r}" if page.next_cursor else ""
    return {
        "content": [
            {"type": "text", "text": f"{len(results)} artifact(s){more}."},
            *(_link(call, wire, reads.record_uri(slug, wire["id"])) for wire in results),
        ],
        "structuredContent": {"results": results, "nextCursor": page.next_cursor},
    }


def _read(call: Call, arguments: JSONObject) -> JSONObject:
    _unknown(arguments, {"id", "version"})
    artifact_id = arguments.get("id")
    if not isinstance(artifact_id, str) or not artifact_id:
        raise ArtifactError(
            "invalid_argument",
            "`id` is required: the artifact's id, as list_artifacts gives it (art_…).",
            {"field": "id"},
        )
    check_text(artifact_id, field="id", code="invalid_argument")
    number = arguments.get("version")
    if number is not None:
        number = versions.check_number(number)
    slug = call.agent.slug
    uri = (
        reads.record_uri(slug, artifact_id)
        if number is None
        else reads.version_uri(slug, artifact_id, number)
    )
    target = reads.Target(artifact_id, number)
    record = reads.read_target(call.agent, call.caller, target)
    wire = reads.record_json(record, call.base_url, slug, versioned=number is not None)
    content: list[JSONObject] = [
        {"type": "text", "text": f"{record.kind} artifact {record.id}, version {record.version}."},
        _link(call, wire, uri),
    ]
    return {"content": content, "structuredContent": wire}
