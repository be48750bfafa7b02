"""The daphne adapter (``agent_site/adapters/daphne.py``) pinned to the release it was written for.

What it relies on is daphne's inside, not its interface: a daphne release that changes it must
fail here, loudly — otherwise the site's request would silently stop being used (no body limit at
the door, forms parsed whole), a streamed body would be queued twice, or responses would stop
waiting for slow clients. The behaviour itself is tested through a real daphne in
tests/rest/test_uploads.py, test_body_road.py and test_body_flow.py.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

import daphne.server
from daphne.http_protocol import WebRequest

from agent_site.adapters import daphne as adapter


def test_daphne_is_the_release_the_adapter_was_written_for():
    installed = version("daphne")
    assert installed == adapter.WRITTEN_FOR, (
        f"agent_site/adapters/daphne.py was written for daphne {adapter.WRITTEN_FOR}, this is "
        f"{installed}: check the three points listed at the top of that module against this "
        "release's daphne/server.py and daphne/http_protocol.py, mend the adapter, then move "
        "WRITTEN_FOR"
    )


def test_the_server_builds_its_http_factory_from_the_module_name():
    assert "self.http_factory = HTTPFactory(self)" in inspect.getsource(daphne.server.Server.run)
    assert hasattr(daphne.server, "HTTPFactory")


def test_process_hands_the_queue_over_then_reads_content_unless_closed():
    source = inspect.getsource(WebRequest.process)
    made = source.index("self.application_queue = yield maybeDeferred(")
    checked = source.index("if self.application_queue is None or self.content.closed:")
    read = source.index("chunk = self.content.read(buffer_size)")
    assert made < checked < read


def test_the_application_starts_inside_process():
    """``serving()`` needs the application's task made synchronously while ``process`` runs."""
    source = inspect.getsource(daphne.server.Server.create_application)
    assert "asyncio.ensure_future(" in source
    assert "async def create_application" not in source
    assert "self.server.create_application," in inspect.getsource(WebRequest.process)


def test_a_request_streaming_its_body_keeps_it_out_of_daphnes_queue():
    import asyncio
    import io

    class Streaming(adapter.Request):
        def streams_body(self) -> bool:
            return True

    for cls, closed in ((adapter.Request, False), (Streaming, True)):
        request = cls.__new__(cls)  # daphne's __init__ needs a server: only the hook is tried
        request.content = io.BytesIO(b"body")
        request.application_queue = None
        assert request.application_queue is None and not request.content.closed
        queue: asyncio.Queue[object] = asyncio.Queue()
        request.application_queue = queue
        assert request.application_queue is queue
        assert request.content.closed is closed
