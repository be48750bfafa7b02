"""Django's PostgreSQL backend, with a client-side bound on every wait for the server.

PostgreSQL ends a statement past ``statement_timeout`` (``DATABASE_STATEMENT_TIMEOUT``) — if it still
runs. A server that stalls with a statement in flight (a stopped process, a frozen VM, a proxy that
stops forwarding) while its host's TCP stack still acknowledges our bytes is invisible to TCP
keepalives and ``tcp_user_timeout``: libpq would wait for its answer for as long as the stall lasts
(seen: 50 s). Here every wait of a connection for the server — a statement, a fetch, a commit, a
rollback, the health check — ends after ``DATABASE_CLIENT_TIMEOUT`` seconds (default: the statement
timeout plus 5 s, so that the server's own timeout answers first whenever it can): the connection is
closed and the wait raises ``OperationalError``, which the request answers as 503
``database_unavailable`` (``artifacts_app/faults.py``); the next request opens a new connection.

The bound is psycopg's own ``Connection.wait(timeout=…)``, which every operation of a connection goes
through; ``BoundedConnection`` gives it a default. With ``?pool=1`` psycopg's pool makes connections
of that class (its ``connection_class``), so the pool's own check of a connection it hands out is
bounded too; without it Django's ``psycopg.connect`` makes a plain one, whose class becomes
``BoundedConnection`` as Django takes it.

This module is the adapter for psycopg (written for psycopg 3.3). What it uses that psycopg's
API reference does not document, pinned by ``tests/adapters/test_psycopg_pin.py``:

- ``psycopg.Connection.wait(gen, interval, timeout)``: the method every operation of a connection
  goes through, and its ``timeout`` parameter;
- that a wait past its ``timeout`` raises a subclass of ``psycopg.OperationalError``
  (``psycopg.errors._WaitTimeout``; caught here by the public base class only);
- that a connection made by ``psycopg.connect`` may take ``BoundedConnection`` as its class (it
  adds no state, only a default to ``wait``).

When the pin test fails after a psycopg upgrade: check those three against the new release's
``psycopg/connection.py`` and ``psycopg/errors.py``, mend this module, then move the pin.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from django.conf import settings
from django.db.backends.postgresql import base

DEFAULT_INTERVAL = 0.1  # psycopg's own interval between checks of a waiting connection


class BoundedConnection(psycopg.Connection):
    """A psycopg connection whose waits for the server end after ``answer_timeout`` seconds."""

    answer_timeout: float | None = None

    def wait(
        self, gen: Any, interval: float = DEFAULT_INTERVAL, timeout: float | None = None
    ) -> Any:
        bound = self.answer_timeout
        if timeout is not None or bound is None:
            return super().wait(gen, interval, timeout)
        started = time.monotonic()
        try:
            return super().wait(gen, interval, bound)
        except psycopg.OperationalError as exc:
            if self.closed or time.monotonic() - started < bound:
                raise  # the server answered with an error, or the connection broke: as it is
            # The generator was left mid-exchange: the connection cannot be used again.
            self.close()
            raise psycopg.OperationalError(
                f"the database server sent no answer within {bound:g} s "
                "(DATABASE_CLIENT_TIMEOUT); the connection was closed"
            ) from exc


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, settings_dict: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(settings_dict, *args, **kwargs)
        BoundedConnection.answer_timeout = getattr(settings, "DATABASE_CLIENT_TIMEOUT", None)
        pool = settings_dict.get("OPTIONS", {}).get("pool")
        if pool:
            # psycopg's pool makes its connections of this class: its own checks are bounded too.
            options = {} if pool is True else dict(pool)
            options.setdefault("connection_class", BoundedConnection)
            settings_dict["OPTIONS"] = {**settings_dict["OPTIONS"], "pool": options}

    def get_new_connection(self, conn_params: Any) -> Any:
        connection = super().get_new_connection(conn_params)
        if not isinstance(connection, BoundedConnection):
            # psycopg.connect builds a plain connection; this class only gives `wait` its
            # default bound, so the connection is the same object from here on.
            connection.__class__ = BoundedConnection
        return connection
