"""ASGI entry point: HTTP and websockets on the same daphne."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_site.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from artifacts_app.rest.backpressure import BackpressureMiddleware  # noqa: E402
from artifacts_app.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Streamed content waits for the client instead of piling up in daphne's buffer (issue 3).
        "http": BackpressureMiddleware(django_asgi_app),
        "websocket": URLRouter(websocket_urlpatterns),
    }
)
