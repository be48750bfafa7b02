"""ASGI entry point: HTTP and websockets on the same daphne."""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextvars
import functools
import io
import os
import time
from concurrent.futures import ThreadPoolExecutor

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import connections
from django.urls import set_script_prefix

from agent_site import glibc

glibc.cap_arenas()  # before the request threads start (agent_site/glibc.py says why)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_site.settings")
try:
    django.setup(set_prefix=False)
except ImproperlyConfigured as exc:
    # The server stops at start with the settings' sentence, not a traceback.
    raise SystemExit(f"agent_site.asgi: the settings are not usable: {exc}") from None

from artifacts_app.rest import lean  # noqa: E402  (the tag route)


class SyncChainASGIHandler(ASGIHandler):
    """Django's ASGI handler, with the middleware chain and the view run as one sync call, on
    request threads that are reused instead of started and joined per request.

    Every view here is sync (DRF, admin, playground; content streams an async generator from a sync
    view), and so is every middleware. The stock handler (Django 5.2) runs ``MiddlewareMixin``
    middleware in async mode, crossing to the request's thread and back for each
    ``process_request`` and ``process_response`` (~30 crossings for our nine), and gives each
    request a ``ThreadSensitiveContext`` whose thread is started and joined per request. Here the
    chain is loaded in sync mode and entered with one ``sync_to_async``, and each request's
    ``ThreadSensitiveContext`` gets a single-thread executor from a free list (asgiref ≥ 3.13):
    everything sync of one request — signals (``close_old_connections``), the chain, the view,
    ``response.close`` — runs on that request's one thread, as with the stock handler. No cap on
    concurrent requests: the list grows to the peak and its threads wait for reuse. An executor
    goes back on the list only once its thread is idle (a view outlives its request when the client
    disconnects). Figures: docs/benchmarks.md, "REST over daphne". The tag route
    (``artifacts_app/rest/lean.py``) takes one hop where the stock handler takes three
    (``_one_hop``).

    Each thread keeps its database connections between requests (DESIGN.md §10: ``CONN_MAX_AGE =
    None`` with health checks), so a process holds at most one per thread, i.e. its peak of
    requests in flight. A thread idle for ``RETIRE_AFTER`` seconds is retired: its connections are
    closed on it (connections are per thread) and it ends. The most recently idle thread is taken
    first, so after a burst the extra threads age out.
    """

    RETIRE_AFTER = 60.0

    def __init__(self) -> None:
        super().__init__()
        # (executor, monotonic time it became idle); newest on the right.
        self._idle: collections.deque[tuple[ThreadPoolExecutor, float]] = collections.deque()

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        self._retire_idle(time.monotonic() - self.RETIRE_AFTER)
        try:
            executor = self._idle.pop()[0]
        except IndexError:
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="http")
        if lean.route(scope.get("method"), scope.get("path", "")) is not None:
            try:
                await self._one_hop(scope, receive, send, executor)
            except BaseException:
                await self._park_when_idle(executor)
                raise
            # Answered (the response was closed on the thread): the thread is idle again, no
            # hop needed to park it.
            self._park(executor)
            return
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            await self._park_when_idle(executor)

    async def _park_when_idle(self, executor: ThreadPoolExecutor) -> None:
        # Queued behind whatever the thread still runs: back on the list once it is idle.
        # Awaited (shielded: a cancelled request must not lose its thread) so that the
        # request's task ends with its thread parked and the next request takes that thread.
        await asyncio.shield(asyncio.wrap_future(executor.submit(self._park, executor)))

    async def _one_hop(self, scope, receive, send, executor):
        """The tag route (``artifacts_app/rest/lean.py``) in one hop to the request's thread:
        the request signals, Django's whole middleware chain (whose last middleware answers the
        tag) and ``response.close``, where the stock handler takes three. The body: received
        here when daphne holds it in memory (under ``agent_site.server.STREAM_AT``), else the
        stream daphne hands over, read on the thread as it arrives. The answer (JSON, never
        streamed) is sent from here."""
        message = await receive()
        if message["type"] != "http.request":
            return  # the client went away
        offer = message.get(body_stream.BODY_STREAM)
        if offer is not None:
            body_file = offer.take()
        else:
            chunks = [message.get("body", b"")]
            while message.get("more_body", False):
                message = await receive()
                if message["type"] != "http.request":
                    return
                chunks.append(message.get("body", b""))
            body_file = io.BytesIO(b"".join(chunks))
        try:
            call = functools.partial(self._one_hop_response, scope, body_file)
            loop = asyncio.get_running_loop()
            response = await loop.run_in_executor(executor, contextvars.copy_context().run, call)
            await self.send_response(response, send)
        finally:
            body_file.close()

    def _one_hop_response(self, scope, body_file):
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error = self.create_request(scope, body_file)
        response = error if request is None else self.get_response(request)
        assert response is not None  # create_request answers a request or an error response
        # Closed here, before it is sent (its content is bytes): request_finished runs on this
        # thread, where its connection is, as the stock handler's response.close does.
        response.close()
        return response

    def _park(self, executor: ThreadPoolExecutor) -> None:
        self._idle.append((executor, time.monotonic()))

    def _retire_idle(self, before: float, *, wait: bool = False) -> None:
        while self._idle and self._idle[0][1] < before:
            executor = self._idle.popleft()[0]
            executor.submit(connections.close_all)
            executor.shutdown(wait=wait)

    def retire_all(self) -> None:
        """Retire every idle thread now, closing its connections on it, and wait for them to end
        (tests; a process about to exit)."""
        self._retire_idle(float("inf"), wait=True)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

    async def read_body(self, receive):
        # A body that daphne streams (agent_site.server) becomes the request's body as it is: the
        # view reads it from the socket as it arrives. The stock handler would wait for the whole
        # body and copy it into a spool file first (the bytes written twice).
        message = await receive()
        offer = message.get(body_stream.BODY_STREAM) if message["type"] == "http.request" else None
        if offer is None:
            return await super().read_body(_replayed(message, receive))
        return offer.take()


def _replayed(first, receive):
    """``receive`` with ``first`` (already received) answered once more, first."""
    pending = [first]

    async def replay():
        return pending.pop() if pending else await receive()

    return replay


django_asgi_app = SyncChainASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agent_site import body as body_stream  # noqa: E402
from agent_site import server  # noqa: E402
from artifacts_app import webhooks  # noqa: E402
from artifacts_app.mcp.mount import McpMount  # noqa: E402
from artifacts_app.routing import websocket_urlpatterns  # noqa: E402
from artifacts_app.ws_auth import WsAuthStack  # noqa: E402

# Daphne serving this site takes bodies with agent_site.server's request: no Twisted form parsing,
# the body limit at the door, large bodies streamed to the application as they arrive, every body
# bounded in time and in number, the parser's refusals in the error envelope.
server.install()


class DeliversWebhooks:
    """The site's process delivers webhooks (``ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER``): its
    deliverer starts with the first connection the application serves, and stops at exit."""

    def __init__(self, app):
        self.app = app
        self.started = False

    async def __call__(self, scope, receive, send):
        if not self.started:
            self.started = True
            if webhooks.start_in_server() is not None:
                atexit.register(webhooks.stop_in_server)
        return await self.app(scope, receive, send)


application = DeliversWebhooks(
    ProtocolTypeRouter(
        {
            # /<slug>/mcp: the agent's MCP server; the rest is Django. Around both, the bodies'
            # flow: a streamed request body reaches the application as it arrives, and a streamed
            # response waits for the client instead of piling up in daphne's buffer.
            "http": server.BodyFlow(McpMount(django_asgi_app)),
            # Websockets: session cookie + bearer tokens + the origin rule (ws_auth), then the streams.
            "websocket": WsAuthStack(URLRouter(websocket_urlpatterns)),
        }
    )
)
