# isort: skip_file
"""The ASGI app bench/rest.py serves with daphne: the project, plus the baselines of the same run.

- ``/bare/insert`` (POST): a bare sync Django JSON view that inserts one row (the tag baseline).
- ``/bare/django-hello``: a sync Django view answering ``{}`` through the project's handler and
  middleware (the framework's floor for a JSON route, bench/peers.py);
- ``/bare/file``: the same blob as the content case, as Django's ``FileResponse``.
- ``/bare/asgi``: the same blob from a raw ASGI app, no Django, no flow control;
- ``/bare/asgi-paced``: the same behind ``BodyFlow``, the site's pacing (the transport's ceiling);
- ``/bare/hello``: a raw ASGI app answering ``{}`` (the round-trip floor of daphne + client);
- ``/stock/…``: the project's own routes through Django's stock ``ASGIHandler`` instead of
  ``agent_site.asgi.SyncChainASGIHandler`` (the handler's baseline), same middleware, same views.
Everything else goes to ``agent_site.asgi.application``.
"""

from __future__ import annotations

import os
import secrets

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_site.settings")

from agent_site.asgi import application as project  # sets Django up first

import orjson
from django.http import FileResponse, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from django.core.handlers.asgi import ASGIHandler

from agent_site import urls
from artifacts_app.models import Agent, Artifact
from agent_site.server import BodyFlow

BLOB_PATH = os.environ.get("BENCH_BLOB_PATH", "")
CHUNK = 1024 * 1024


@csrf_exempt
def bare_insert(request):
    body = orjson.loads(request.body)
    agent_id = Agent.objects.values_list("pk", flat=True).get(slug=body["agent"])
    Artifact.objects.create(
        id="b" + secrets.token_hex(12), agent_id=agent_id, kind="note", data=body["data"]
    )
    return HttpResponse(orjson.dumps({"ok": True}), status=201, content_type="application/json")


def django_hello(request):
    # The framework's floor for a JSON route: a sync Django view through the same handler and
    # middleware as the project's routes, no database, no DRF (bench/peers.py).
    return HttpResponse(b"{}", content_type="application/json")


def bare_file(request):
    return FileResponse(open(BLOB_PATH, "rb"), content_type="application/octet-stream")


urls.urlpatterns[:0] = [
    path("bare/insert", bare_insert),
    path("bare/file", bare_file),
    path("bare/django-hello", django_hello),
]


async def bare_asgi(scope, receive, send):
    size = os.path.getsize(BLOB_PATH)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/octet-stream"),
                (b"content-length", str(size).encode()),
            ],
        }
    )
    with open(BLOB_PATH, "rb") as fh:
        while chunk := fh.read(CHUNK):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


paced_bare_asgi = BodyFlow(bare_asgi)


async def hello(scope, receive, send):
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": b"{}"})


stock = BodyFlow(ASGIHandler())


async def application(scope, receive, send):
    if scope["type"] == "http" and scope["path"].startswith("/stock/"):
        return await stock({**scope, "root_path": "/stock"}, receive, send)
    if scope["type"] == "http" and scope["path"] == "/bare/asgi":
        return await bare_asgi(scope, receive, send)
    if scope["type"] == "http" and scope["path"] == "/bare/asgi-paced":
        return await paced_bare_asgi(scope, receive, send)
    if scope["type"] == "http" and scope["path"] == "/bare/hello":
        return await hello(scope, receive, send)
    return await project(scope, receive, send)
