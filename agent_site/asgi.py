"""ASGI entry point: HTTP and websockets on the same daphne."""

import os
from concurrent.futures import ThreadPoolExecutor

import django
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.asgi import ASGIHandler
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_site.settings")
try:
    django.setup(set_prefix=False)
except ImproperlyConfigured as exc:
    # The server stops at start with the settings' sentence, not a traceback.
    raise SystemExit(f"agent_site.asgi: the settings are not usable: {exc}") from None

HTTP_THREADS = 8  # sync requests served at once by one process


class SyncChainASGIHandler(ASGIHandler):
    """Django's ASGI handler, with the middleware chain and the view run as one sync call on a
    pool of long-lived threads.

    Every view here is sync (DRF, admin, playground; content streams an async generator from a sync
    view), and so is every middleware. The stock handler (Django 5.2) costs two things per request
    that this one does not: its middleware runs in async mode, crossing to a worker thread and back
    for each ``process_request`` and ``process_response`` (~30 crossings for our nine); and each
    request gets a ``ThreadSensitiveContext``, i.e. a new thread, started and joined per request.
    Here the chain and the view are one call on a pool of ``HTTP_THREADS`` long-lived threads (at
    most that many sync requests at once per process; the others wait on the event loop). Database
    connections belong to the thread that uses them, so ``close_old_connections`` runs in that
    thread before and after the request (CONN_MAX_AGE = 0 closes them, DESIGN.md §10). Figures:
    docs/benchmarks.md, "REST over daphne".
    """

    executor = ThreadPoolExecutor(max_workers=HTTP_THREADS, thread_name_prefix="http")

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)

    async def get_response_async(self, request):
        return await sync_to_async(
            self._get_response_in_thread, thread_sensitive=False, executor=self.executor
        )(request)

    def _get_response_in_thread(self, request):
        close_old_connections()  # this thread's connection: reused, or replaced when obsolete
        try:
            return self.get_response(request)
        finally:
            close_old_connections()


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
