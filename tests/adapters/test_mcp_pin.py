"""The MCP SDK adapter (``agent_site/adapters/mcp.py``) pinned to what it was written for.

It reads the client's ``Connection`` from a private attribute of the SDK's ``ServerSession``: a
release that moves it would leave a 2025-era session without its watch (no notifications), so
this fails first, loudly. The behaviour is tested end to end in tests/mcp/test_live.py.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

from mcp.server.connection import Connection
from mcp.server.session import ServerSession

WRITTEN_FOR = "2.3."


def test_mcp_is_the_release_the_adapter_was_written_for():
    assert version("mcp").startswith(WRITTEN_FOR), (
        f"agent_site/adapters/mcp.py was written for mcp {WRITTEN_FOR}x, this is "
        f"{version('mcp')}: check the names listed at its top against this release "
        "(mcp/server/session.py, connection.py; a public door to the connection may exist now), "
        "mend it, then move WRITTEN_FOR"
    )


def test_a_session_keeps_its_connection_where_the_adapter_reads_it():
    source = inspect.getsource(ServerSession.__init__)
    assert "self._connection = connection" in source
    assert inspect.signature(ServerSession.__init__).parameters["connection"].annotation in (
        Connection,
        "Connection",
    )


def test_a_connection_has_what_the_watch_uses():
    connection = Connection.__init__
    source = inspect.getsource(connection)
    for attribute in ("self.session_id", "self.state", "self.exit_stack"):
        assert attribute in source, attribute
