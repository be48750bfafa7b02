"""The MCP server every agent is (API.md "MCP"): thin handlers over ``reads``, ``tools``, ``watch``.

One low-level SDK ``Server`` serves every agent: each request's ``Call`` (agent, caller, links'
base URL) comes from our door (``mount``) in the ASGI scope. The database work of a request is one
hop to a worker thread (the selectors and services are synchronous Django).

Notifications, in both eras the SDK speaks:
- 2025 (initialize handshake, a stateful session): ``resources/subscribe`` adds a URI to the
  session's ``Watch``; resources/list and subscribe start that watch, whose signals go out on the
  session's standalone GET stream as ``notifications/resources/updated`` and ``…/list_changed``.
- 2026-07-28 (no session): ``subscriptions/listen`` is a request whose answer is the stream; its
  filter names the URIs and whether list changes are wanted.
Either stream ends when its credentials no longer hold (a revoked token, a deactivated user): the
watch is guarded by the hub's credentials watch (``fanout.guard``); ``listen`` then answers an
error, and the 2025 GET stream is finished by ``watch.serve_guarded`` at the door.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, ParamSpec, TypeAlias, TypeVar

import mcp_types as types
import orjson
from channels.db import database_sync_to_async
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    ResourcesListChanged,
    ResourceUpdated,
    event_to_notification,
)
from starlette.requests import Request

from agent_site.adapters.mcp import session_connection
from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.jsontypes import JSONObject
from artifacts_app.mcp import reads, tools
from artifacts_app.mcp.call import CALL, Call
from artifacts_app.mcp.watch import Watch

log = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002  # the MCP spec's code for resources/read of an unknown URI
WATCH = "artifacts_watch"  # a 2025-era connection's Watch, in its connection state

# The handlers' context: the SDK's default lifespan state (an empty dict, unread here) and the
# HTTP request both streamable-HTTP transports attach (its scope carries our ``Call``).
Lifespan: TypeAlias = dict[str, object]
Context: TypeAlias = ServerRequestContext[Lifespan, Request]

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _call(ctx: Context) -> Call:
    request = ctx.request
    call = request.scope.get(CALL) if request is not None else None
    if call is None:  # only our door leads here; a request without it is a wiring bug
        raise MCPError(types.INTERNAL_ERROR, "This MCP server is served at /<slug>/mcp only.")
    return call


def _error(error: ArtifactError) -> MCPError:
    code = RESOURCE_NOT_FOUND if isinstance(error, NotFoundError) else types.INVALID_PARAMS
    return MCPError(code, error.message, error.as_envelope()["error"])


async def _sync(function: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    # Worker threads, not the one shared sync thread: MCP requests do not queue behind each other.
    try:
        return await database_sync_to_async(function, thread_sensitive=False)(*args, **kwargs)
    except ArtifactError as error:
        raise _error(error) from None


# --- resources ---------------------------------------------------------------------------------


async def list_resources(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    call = _call(ctx)
    cursor = params.cursor if params is not None else None
    page = await _sync(reads.list_page, call.agent, call.caller, cursor=cursor)
    await _legacy_watch(ctx, call)
    slug = call.agent.slug
    return types.ListResourcesResult.model_validate(
        {
            "resources": [reads.resource_of(record, slug) for record in page.records()],
            "nextCursor": page.next_cursor,
        }
    )


async def list_templates(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    slug = _call(ctx).agent.slug
    return types.ListResourceTemplatesResult.model_validate(
        {
            "resourceTemplates": [
                {
                    "uriTemplate": reads.record_template(slug),
                    "name": "artifact",
                    "description": f"An artifact of agent {slug!r}: its record as JSON, "
                    "then its content (inline up to 1 MiB, else a link).",
                    "mimeType": "application/json",
                },
                {
                    "uriTemplate": reads.version_template(slug),
                    "name": "artifact-version",
                    "description": "One version of an artifact, as that tag stored it.",
                    "mimeType": "application/json",
                },
            ]
        }
    )


async def read_resource(
    ctx: Context, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    call = _call(ctx)
    uri = str(params.uri)
    try:
        target = reads.parse_uri(call.agent.slug, uri)
    except ArtifactError as error:
        raise _error(error) from None
    _, found = await _sync(reads.read_contents, call.agent, call.caller, target, call.base_url)
    contents: list[JSONObject] = [
        {"uri": uri, "mimeType": "application/json", "text": orjson.dumps(found.record).decode()}
    ]
    if found.text is not None:
        contents.append(
            {"uri": found.content_uri, "mimeType": found.content_type, "text": found.text}
        )
    elif found.blob is not None:
        contents.append(
            {"uri": found.content_uri, "mimeType": found.content_type, "blob": found.blob}
        )
    elif found.link is not None:
        # Past 1 MiB the content is not inlined: a link to the HTTP route (ranges, streaming).
        contents.append({"uri": found.content_uri, "mimeType": "text/uri-list", "text": found.link})
    return types.ReadResourceResult.model_validate({"contents": contents})


# --- tools -------------------------------------------------------------------------------------


async def list_tools(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    call = _call(ctx)
    found = await _sync(tools.definitions, call)
    return types.ListToolsResult.model_validate({"tools": found})


async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
    call = _call(ctx)
    result = await _sync(tools.run, call, params.name, dict(params.arguments or {}))
    return types.CallToolResult.model_validate(result)


# --- notifications -----------------------------------------------------------------------------


def _connection(ctx: Context) -> Connection | None:
    # The per-client Connection (state, exit_stack, the standalone stream): the SDK keeps it on
    # the request's session without exposing it (agent_site.adapters.mcp).
    return session_connection(ctx.session)


async def _legacy_watch(ctx: Context, call: Call) -> Watch | None:
    """A 2025-era session's watch, started on first use; None on the 2026 wire (no session)."""
    connection = _connection(ctx)
    if connection is None or connection.session_id is None:
        return None
    watch = connection.state.get(WATCH)
    if watch is None:
        watch = connection.state[WATCH] = Watch(call.agent, call.caller, list_changes=True)
        await watch.join()
        task = asyncio.get_running_loop().create_task(_forward(watch, connection))

        async def stop() -> None:
            watch.leave()
            task.cancel()

        connection.exit_stack.push_async_callback(stop)
    return watch


async def _forward(watch: Watch, connection: Connection) -> None:
    while True:
        listed, updated = await watch.signals()
        if not listed and not updated:
            return
        for uri in updated:
            await connection.send_resource_updated(uri)
        if listed:
            await connection.send_resource_list_changed()


async def subscribe(ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
    call = _call(ctx)
    target = await _readable(call, str(params.uri))
    watch = await _legacy_watch(ctx, call)
    if watch is not None:
        watch.subscribe([target.artifact_id])
    return types.EmptyResult()


async def unsubscribe(ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    call = _call(ctx)
    connection = _connection(ctx)
    watch = connection.state.get(WATCH) if connection is not None else None
    if watch is not None:
        try:
            watch.unsubscribe(reads.parse_uri(call.agent.slug, str(params.uri)).artifact_id)
        except ArtifactError:
            pass
    return types.EmptyResult()


async def _readable(call: Call, uri: str) -> reads.Target:
    """A subscription names a record the caller may read now (404 otherwise, like a read)."""
    try:
        target = reads.parse_uri(call.agent.slug, uri)
    except ArtifactError as error:
        raise _error(error) from None
    await _sync(reads.read_target, call.agent, call.caller, reads.Target(target.artifact_id, None))
    return target


async def listen(
    ctx: Context, params: types.SubscriptionsListenRequestParams
) -> types.SubscriptionsListenResult:
    """``subscriptions/listen`` (2026-07-28): acknowledge, then stream the watch's signals."""
    call = _call(ctx)
    wanted = params.notifications
    ids = [(await _readable(call, uri)).artifact_id for uri in wanted.resource_subscriptions or ()]
    meta: JSONObject = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
    honored = types.SubscriptionFilter(
        resources_list_changed=True if wanted.resources_list_changed else None,
        resource_subscriptions=list(wanted.resource_subscriptions or ()) or None,
    )
    watch = Watch(call.agent, call.caller, list_changes=bool(wanted.resources_list_changed))
    watch.subscribe(ids)
    await watch.join()  # before the ack: whatever commits after it is seen
    try:
        await ctx.session.send_notification(
            types.SubscriptionsAcknowledgedNotification(
                params=types.SubscriptionsAcknowledgedNotificationParams(
                    notifications=honored, _meta=meta
                )
            ),
            related_request_id=ctx.request_id,
        )
        while True:
            listed, updated = await watch.signals()
            if watch.revoked is not None:
                # Credentials that no longer hold end the stream: its answer is this error.
                error = watch.revoked
                raise MCPError(types.INVALID_REQUEST, error.message, error.as_envelope()["error"])
            for uri in updated:
                await ctx.session.send_notification(
                    event_to_notification(ResourceUpdated(uri=uri), meta),
                    related_request_id=ctx.request_id,
                )
            if listed:
                await ctx.session.send_notification(
                    event_to_notification(ResourcesListChanged(), meta),
                    related_request_id=ctx.request_id,
                )
    finally:
        watch.leave()


class _Server(Server[Lifespan]):
    def create_initialization_options(self, *args: Any, **kwargs: Any) -> InitializationOptions:
        # Advertise list_changed on the 2025 wire too: the session's watch sends it.
        if not args and "notification_options" not in kwargs:
            kwargs["notification_options"] = NotificationOptions(resources_changed=True)
        return super().create_initialization_options(*args, **kwargs)


def build_server() -> Server[Lifespan]:
    server: Server[Lifespan] = _Server(
        "agent-artifacts",
        version="1",
        instructions=(
            "This agent's artifacts: durable outputs (reviews, reports, findings). Resources are "
            "artifact://<agent>/<id> (the record as JSON, then its content); list_artifacts and "
            "read_artifact browse them; tag_artifact keeps a new one (agent keys only)."
        ),
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=listen,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware = []  # no OpenTelemetry span per message: nothing here exports them
    return server
