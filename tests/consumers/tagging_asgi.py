"""The site's ASGI application plus one test-only HTTP route, ``POST /_test/<slug>/tag``, which tags
through the Python API inside the daphne process — for the live tests while the REST tag route is
not on this branch. Never imported by the site."""

from __future__ import annotations

import json

from asgiref.sync import sync_to_async

from agent_site.asgi import application as site


async def application(scope, receive, send):
    path = scope.get("path", "")
    if scope["type"] != "http" or not path.startswith("/_test/") or not path.endswith("/tag"):
        return await site(scope, receive, send)
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    from artifacts_app import services

    slug = path.split("/")[2]
    result = await sync_to_async(services.artifact_tag)(agent=slug, **json.loads(body))
    out = json.dumps({"id": result.record.id}).encode()
    await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": out})
