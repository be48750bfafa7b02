"""The settings' environment variables for the scale profile, and the deployment checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from agent_site.settings import database_from_url
from artifacts_app import blobs, checks

ROOT = Path(__file__).resolve().parents[2]
SCALE_VARS = (
    "DATABASE_URL",
    "REDIS_URL",
    "ARTIFACTS_STORAGE",
    "ARTIFACTS_S3_BUCKET",
    "ARTIFACTS_S3_ENDPOINT_URL",
    "ARTIFACTS_S3_REDIRECT",
    "ARTIFACTS_PROCESSES",
)


def settings_with(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in SCALE_VARS}
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings;"
            " print(settings.STORAGES['artifacts']['BACKEND'])",
        ],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "agent_site.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"ARTIFACTS_STORAGE": "s3"}, "needs ARTIFACTS_S3_BUCKET"),
        ({"ARTIFACTS_STORAGE": "ftp"}, "ARTIFACTS_STORAGE is 'local' or 's3'"),
        (
            {
                "ARTIFACTS_STORAGE": "s3",
                "ARTIFACTS_S3_BUCKET": "b",
                "ARTIFACTS_S3_ENDPOINT_URL": "minio:9000",
            },
            "must start with http",
        ),
        ({"ARTIFACTS_S3_REDIRECT": "1"}, "needs ARTIFACTS_STORAGE=s3"),
        ({"ARTIFACTS_PROCESSES": "zero"}, "ARTIFACTS_PROCESSES must be a whole number"),
        ({"DATABASE_URL": "mysql://x/y"}, "is not supported"),
    ],
)
def test_bad_storage_settings_fail_at_start_with_a_sentence(env, fragment):
    proc = settings_with(**env)
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr and fragment in proc.stderr


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "manage.py", "check"],
        [sys.executable, "-m", "daphne", "-p", "0", "agent_site.asgi:application"],
    ],
    ids=["manage.py", "daphne"],
)
def test_commands_and_the_server_refuse_bad_settings_with_a_sentence(command):
    base = {k: v for k, v in os.environ.items() if k not in (*SCALE_VARS, "DJANGO_SECRET_KEY")}
    for env, fragment in (
        ({"DJANGO_DEBUG": "0"}, "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off"),
        ({"ARTIFACTS_STORAGE": "ftp"}, "ARTIFACTS_STORAGE is 'local' or 's3'"),
    ):
        proc = subprocess.run(
            command,
            cwd=ROOT,
            env={**base, "DJANGO_SETTINGS_MODULE": "agent_site.settings", **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode != 0
        assert fragment in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_s3_settings_select_django_storages():
    pytest.importorskip("storages", reason="the scale extras install django-storages")
    proc = settings_with(
        ARTIFACTS_STORAGE="s3", ARTIFACTS_S3_BUCKET="b", ARTIFACTS_S3_ENDPOINT_URL="http://h:9"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "agent_site.s3.S3Storage"


def test_database_url_pool_and_conn_max_age():
    conf = database_from_url("postgres://u:p@db:5433/art?pool=1")
    assert conf["CONN_MAX_AGE"] == 0 and conf["OPTIONS"]["pool"]["max_size"] >= 1
    # The pool's health check is Django's own (CONN_HEALTH_CHECKS); one here too was a TypeError.
    assert "check" not in conf["OPTIONS"]["pool"] and conf["CONN_HEALTH_CHECKS"] is True
    assert conf["NAME"] == "art" and conf["PORT"] == "5433"
    plain = database_from_url("postgres://u@db/art")
    assert "pool" not in plain["OPTIONS"]
    # Without the pool, a connection lives as long as its request thread, health-checked.
    assert plain["CONN_MAX_AGE"] is None and plain["CONN_HEALTH_CHECKS"] is True


def test_more_than_one_process_refuses_the_in_memory_layer(settings, db):
    settings.ARTIFACTS_PROCESSES = 2
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert [m.id for m in checks.check_layer_for_processes()] == ["artifacts.E101"]
    with pytest.raises(SystemCheckError, match="ARTIFACTS_PROCESSES is 2"):
        call_command("check")
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {}}
    }
    assert checks.check_layer_for_processes() == []
    settings.ARTIFACTS_PROCESSES = 1
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert checks.check_layer_for_processes() == []


@pytest.mark.parametrize(
    ("age", "health", "warned"),
    [(60, False, True), (None, False, True), (None, True, False), (0, False, False)],
)
def test_persistent_connections_without_health_checks_warn(settings, age, health, warned):
    # None is Django's "unlimited persistent connections": the check must not take it for "unset".
    default = {**settings.DATABASES["default"], "CONN_MAX_AGE": age, "CONN_HEALTH_CHECKS": health}
    default["OPTIONS"] = {k: v for k, v in default.get("OPTIONS", {}).items() if k != "pool"}
    settings.DATABASES = {**settings.DATABASES, "default": default}
    expected = ["artifacts.W102"] if warned else []
    assert [m.id for m in checks.check_persistent_connections()] == expected


def test_redirect_url_is_none_on_local_storage(db, settings):
    if not settings.STORAGES["artifacts"]["BACKEND"].endswith("FileSystemStorage"):
        pytest.skip("the scale profile stores blobs in S3")
    stored = blobs.blob_put(b"local bytes")
    settings.ARTIFACTS_S3_REDIRECT = True
    assert blobs.blob_redirect_url(stored.sha256, "text/plain", "inline") is None


@pytest.mark.scale
def test_s3_blob_round_trip_and_presigned_redirect(db, settings):
    """Scale profile: blobs live in S3 (moto); a presigned URL serves them with our headers."""
    assert settings.STORAGES["artifacts"]["BACKEND"] == "agent_site.s3.S3Storage"
    stored = blobs.blob_put(b"# report\n" * 1000)
    assert blobs.blob_exists(stored.sha256)
    assert blobs.blob_read(stored.sha256, start=2, end=7) == b"report"
    settings.ARTIFACTS_S3_REDIRECT = False
    assert blobs.blob_redirect_url(stored.sha256, "text/markdown", "attachment") is None
    settings.ARTIFACTS_S3_REDIRECT = True
    url = blobs.blob_redirect_url(stored.sha256, "text/markdown", 'attachment; filename="r.md"')
    assert "X-Amz-Signature" in url or "Signature=" in url
    response = httpx.get(url)
    assert response.status_code == 200
    assert response.content == b"# report\n" * 1000
    assert response.headers["content-type"] == "text/markdown"
    assert response.headers["content-disposition"] == 'attachment; filename="r.md"'
    blobs.blob_delete(stored.sha256)
    assert not blobs.blob_exists(stored.sha256)
