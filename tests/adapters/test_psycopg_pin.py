"""The psycopg adapter (``agent_site/postgresql``) pinned to what it was written for.

The bound on a stalled PostgreSQL leans on names psycopg does not document; a psycopg release
that changes them must fail here, loudly, rather than leave requests waiting for a stalled server
as long as the stall lasts. The behaviour itself is tested against a stalling proxy in
tests/faults/test_database.py (scale profile).
"""

from __future__ import annotations

import inspect

import pytest

psycopg = pytest.importorskip(
    "psycopg", reason="the PostgreSQL adapter needs psycopg (scale extras)"
)

WRITTEN_FOR = "3.3."


def test_psycopg_is_the_release_the_adapter_was_written_for():
    assert psycopg.__version__.startswith(WRITTEN_FOR), (
        f"agent_site/postgresql was written for psycopg {WRITTEN_FOR}x, this is "
        f"{psycopg.__version__}: check the names listed at the top of agent_site/postgresql/base.py "
        "against this release, then move WRITTEN_FOR"
    )


def test_connection_wait_takes_an_interval_and_a_timeout():
    parameters = list(inspect.signature(psycopg.Connection.wait).parameters)
    assert parameters[:4] == ["self", "gen", "interval", "timeout"]


def test_a_wait_past_its_timeout_is_an_operational_error():
    from psycopg import errors

    assert issubclass(errors._WaitTimeout, psycopg.OperationalError)


def test_a_plain_connection_can_become_bounded():
    from agent_site.postgresql.base import BoundedConnection

    assert BoundedConnection.__mro__[1] is psycopg.Connection
    assert "__slots__" not in vars(BoundedConnection)
    own = {name for name in vars(BoundedConnection) if not name.startswith("__")}
    assert own == {"answer_timeout", "wait"}  # no state of its own: a class swap is safe
