"""Timeouts by default wherever a dependency can stall, overridable."""

from __future__ import annotations

import os

import pytest
from django.conf import settings
from django.db import connection

from agent_site.settings import database_from_url


def test_postgresql_urls_get_connect_and_statement_timeouts_by_default():
    config = database_from_url("postgres://u@db/art")
    options = config["OPTIONS"]
    # Below daphne's 5 s websocket handshake timeout: an unreachable database closes with 4503.
    assert options["connect_timeout"] == "3"
    assert options["options"] == "-c statement_timeout=30000"
    # TCP's own bounds for a peer that vanishes, and the client's bound for one that stalls.
    assert options["keepalives"] == "1" and options["tcp_user_timeout"] == "35000"
    assert config["ENGINE"] == "agent_site.postgresql"
    pooled = database_from_url("postgres://u@db/art?pool=1")
    # Django adds the pool's health check itself (CONN_HEALTH_CHECKS): a `check` here too made
    # every connection fail ("got multiple values for keyword argument 'check'").
    assert "check" not in pooled["OPTIONS"]["pool"] and pooled["CONN_HEALTH_CHECKS"] is True
    assert pooled["OPTIONS"]["pool"]["timeout"] == 3
    assert pooled["OPTIONS"]["connect_timeout"] == "3"


def test_the_pool_options_build_djangos_pool():
    pytest.importorskip("psycopg_pool", reason="?pool=1 needs psycopg[pool] (the scale extras)")
    from agent_site.postgresql.base import DatabaseWrapper

    config = database_from_url("postgres://u@127.0.0.1:9/art?pool=1")
    wrapper = DatabaseWrapper({**connection.settings_dict, **config, "TEST": {}}, alias="pooled")
    pool = wrapper.pool  # built as Django builds it, not opened: no server needed
    assert pool is not None and pool.timeout == 3
    assert pool.max_size == config["OPTIONS"]["pool"]["max_size"]  # DATABASE_POOL_SIZE (10)


def test_the_url_overrides_the_timeouts():
    options = database_from_url(
        "postgres://u@db/art?connect_timeout=1&options=-c%20statement_timeout%3D500"
    )["OPTIONS"]
    assert options["connect_timeout"] == "1"
    assert options["options"] == "-c statement_timeout=500"
    other = database_from_url("postgres://u@db/art?options=-c%20search_path%3Dx")["OPTIONS"]
    assert other["options"] == "-c search_path=x -c statement_timeout=30000"


def test_redis_and_s3_clients_are_bounded():
    from agent_site.settings import s3_storage_from_env

    if "RedisChannelLayer" in settings.CHANNEL_LAYERS["default"]["BACKEND"]:
        host = settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]
        assert host["socket_connect_timeout"] == 5 and host["socket_timeout"] == 15
    pytest.importorskip("storages", reason="S3 needs django-storages (pip install -e .[scale])")
    saved = {k: os.environ.get(k) for k in ("ARTIFACTS_S3_BUCKET", "ARTIFACTS_S3_ENDPOINT_URL")}
    os.environ.update(ARTIFACTS_S3_BUCKET="b", ARTIFACTS_S3_ENDPOINT_URL="http://127.0.0.1:9")
    try:
        config = s3_storage_from_env()["OPTIONS"]["client_config"]
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    # A stalled S3 fails a call within 2 × 10 s (+ one backoff), far under a proxy's 60 s.
    assert config.connect_timeout == 3 and config.read_timeout == 10
    assert config.retries == {"total_max_attempts": 2, "mode": "standard"}
    assert config.s3 == {"addressing_style": "path"}


@pytest.mark.scale
def test_the_live_postgresql_connection_has_the_statement_timeout(db):
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "30s"


def test_a_database_wait_as_long_as_the_websocket_handshake_is_warned(settings):
    from artifacts_app.checks import check_database_waits_fit_the_websocket_handshake as check

    assert check() == []  # the defaults fit
    settings.DATABASE_CONNECT_TIMEOUT = 5
    assert [m.id for m in check()] == ["artifacts.W104"]
    assert "DATABASE_CONNECT_TIMEOUT is 5 s" in check()[0].msg
    settings.DATABASE_CONNECT_TIMEOUT = 3
    databases = {**settings.DATABASES}
    databases["default"] = {
        **databases["default"],
        "OPTIONS": {**databases["default"]["OPTIONS"], "pool": {"max_size": 2}},
    }
    settings.DATABASES = databases
    settings.DATABASE_POOL_TIMEOUT = 10
    assert ["DATABASE_POOL_TIMEOUT" in m.msg for m in check()] == [True]
