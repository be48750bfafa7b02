"""The adapter for the MCP SDK (``mcp``; written for mcp 2.3).

A 2025-era session's watch lives as long as the client's connection: it is kept in the
connection's ``state``, stopped by its ``exit_stack``, and its notifications go out on the
connection's standalone stream. The SDK hands a request handler a ``ServerRequestContext`` whose
``session`` (a ``ServerSession``) holds that ``Connection`` but does not expose it (the SDK's own
``Context.connection`` does, and ``ServerRunner`` does not build one for low-level handlers yet).

Private names touched, pinned by ``tests/adapters/test_mcp_pin.py``:

- ``mcp.server.session.ServerSession._connection``: the session's ``mcp.server.connection.Connection``.
"""

from __future__ import annotations

from mcp.server.connection import Connection
from mcp.server.session import ServerSession


def session_connection(session: ServerSession) -> Connection | None:
    """The client's connection behind a request's session; None if the SDK no longer keeps it
    there (the pin test fails first)."""
    connection = getattr(session, "_connection", None)
    return connection if isinstance(connection, Connection) else None
