"""ASGI entry point: HTTP and websockets on the same daphne."""

from __future__ import annotations

import collections
import os
from concurrent.futures import ThreadPoolExecutor

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.asgi import ASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_site.settings")
try:
    django.setup(set_prefix=False)
except ImproperlyConfigured as exc:
    # The server stops at start with the settings' sentence, not a traceback.
    raise SystemExit(f"agent_site.asgi: the settings are not usable: {exc}") from None


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
    disconnects). Figures: docs/benchmarks.md, "REST over daphne".
    """

    def __init__(self) -> None:
        super().__init__()
        self._idle: collections.deque[ThreadPoolExecutor] = collections.deque()

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        try:
            executor = self._idle.pop()
        except IndexError:
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="http")
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            # Queued behind whatever the thread still runs: back on the list once it is idle.
            executor.submit(self._idle.append, executor)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


django_asgi_app = SyncChainASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from artifacts_app.rest.backpressure import BackpressureMiddleware  # noqa: E402
from artifacts_app.routing import websocket_urlpatterns  # noqa: E402
from artifacts_app.ws_auth import WsAuthStack  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Streamed content waits for the client instead of piling up in daphne's buffer (issue 3).
        "http": BackpressureMiddleware(django_asgi_app),
        # Websockets: session cookie + bearer tokens + the origin rule (ws_auth), then the streams.
        "websocket": WsAuthStack(URLRouter(websocket_urlpatterns)),
    }
)
