"""daphne's HTTP server, where its public interface has no door.

Written for daphne 4.2.3; ``tests/adapters/test_daphne_pin.py`` holds it there. Daphne offers no
way to choose its HTTP factory or request class, nor to start the application before the body is
in, nor to learn from inside the application which request it serves. What this module relies on:

- ``daphne.server.HTTPFactory``: the name ``Server.run`` builds its HTTP factory from (a module
  global, looked up when the server starts); ``serve_http_with`` replaces it.
- ``WebRequest.process`` (Twisted's ``Request.process``, daphne's override): it sets
  ``self.application_queue`` to the application's input queue as soon as it made the
  application, and then reads ``self.content`` into that queue unless ``self.content.closed``;
  ``Request`` sees that assignment (a property) and closes ``content`` when the body streams
  elsewhere (``streams_body``), so daphne does not queue it.
- that ``Server.create_application`` starts the application's task synchronously inside
  ``process``: the task then inherits the context ``Request.process`` sets, so ``serving()``
  answers the request from inside the application (asyncio copies the context into a task it
  creates; that part is public).

No private (underscored) name of daphne is used. When the pin test fails after a daphne upgrade:
read the new ``daphne/server.py`` (``Server.run``, ``create_application``) and
``daphne/http_protocol.py`` (``WebRequest.process``) for the three points above, mend this module
(or drop what a public door now offers), then move ``WRITTEN_FOR``.
"""

from __future__ import annotations

import contextvars
import io
from asyncio import Queue

import daphne.server
from daphne.http_protocol import HTTPFactory, WebRequest

WRITTEN_FOR = "4.2.3"

_serving: contextvars.ContextVar[Request | None] = contextvars.ContextVar(
    "agent_site.serving", default=None
)


def serve_http_with(factory: type[HTTPFactory]) -> None:
    """Make every daphne ``Server`` started from now on serve HTTP with ``factory``."""
    daphne.server.HTTPFactory = factory


def serving() -> Request | None:
    """The daphne request the calling application serves (None under another server)."""
    return _serving.get()


class Request(WebRequest):
    """Daphne's request, with two hooks its public interface lacks (see the module's docstring)."""

    def streams_body(self) -> bool:
        """Whether the application gets the body elsewhere than in daphne's queue (asked when
        daphne has made the application)."""
        return False

    @property
    def application_queue(self) -> Queue[object] | None:
        queue: Queue[object] | None = self.__dict__.get("_application_queue")
        return queue

    @application_queue.setter
    def application_queue(self, queue: Queue[object] | None) -> None:
        self.__dict__["_application_queue"] = queue
        if queue is not None and self.streams_body():
            # Daphne's process reads ``content`` into the queue next unless it is closed.
            self.content = io.BytesIO()
            self.content.close()

    def process(self) -> object:
        upgrade = self.requestHeaders.getRawHeaders(b"Upgrade") or [b""]
        if upgrade[0].lower() == b"websocket":
            return super().process()
        token = _serving.set(self)
        try:
            return super().process()
        finally:
            _serving.reset(token)
