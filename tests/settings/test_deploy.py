"""HTTPS settings from the environment, and `check --deploy` clean with the production environment
docs/operations.md documents."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parents[2]
DROP = {
    "DATABASE_URL",
    "REDIS_URL",
    "ARTIFACTS_PROFILE",
    "ARTIFACTS_STORAGE",
    "ARTIFACTS_PROCESSES",
}


def production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The HTTPS part of docs/operations.md "Production settings", as written there."""
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in DROP and not k.startswith(("DJANGO_", "ARTIFACTS_"))
    }
    return {
        **base,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "ARTIFACTS_DATA_DIR": str(tmp_path),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "artifacts.example.com",
        "DJANGO_CSRF_TRUSTED_ORIGINS": "https://artifacts.example.com",
        "ARTIFACTS_BEHIND_PROXY": "1",
        "DJANGO_SECURE_SSL_REDIRECT": "1",
        "DJANGO_HSTS_SECONDS": "31536000",
        "DJANGO_HSTS_PRELOAD": "1",
        **extra,
    }


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_with_the_documented_production_environment(tmp_path):
    done = run(
        production_env(tmp_path), "manage.py", "check", "--deploy", "--fail-level", "WARNING"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_without_them_check_deploy_warns(tmp_path):
    env = production_env(tmp_path)
    for name in ("ARTIFACTS_BEHIND_PROXY", "DJANGO_SECURE_SSL_REDIRECT", "DJANGO_HSTS_SECONDS"):
        env.pop(name)
    done = run(env, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode != 0
    assert (
        "security.W004" in done.stderr + done.stdout
        and "security.W008" in done.stderr + done.stdout
    )


SHOW = (
    "import django, json; django.setup(); from django.conf import settings as s; print(json.dumps(["
    "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS,"
    " getattr(s, 'SECURE_PROXY_SSL_HEADER', None)]))"
)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, [True, True, True, 31536000, ["HTTP_X_FORWARDED_PROTO", "https"]]),
        (
            {
                "ARTIFACTS_BEHIND_PROXY": "0",
                "DJANGO_SECURE_SSL_REDIRECT": "0",
                "DJANGO_HSTS_SECONDS": "0",
            },
            [True, True, False, 0, None],
        ),
        (
            {"DJANGO_SECURE_COOKIES": "0"},
            [False, False, True, 31536000, ["HTTP_X_FORWARDED_PROTO", "https"]],
        ),
        (
            {"DJANGO_DEBUG": "1"},
            [False, False, True, 31536000, ["HTTP_X_FORWARDED_PROTO", "https"]],
        ),
    ],
)
def test_settings_follow_the_environment(tmp_path, extra, expected):
    done = run(production_env(tmp_path, **extra), "-c", SHOW)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected


def test_bad_values_fail_at_start_with_a_sentence(tmp_path):
    done = run(production_env(tmp_path, DJANGO_HSTS_SECONDS="a year"), "-c", SHOW)
    assert done.returncode != 0 and "DJANGO_HSTS_SECONDS must be a whole number" in done.stderr


@pytest.mark.django_db
def test_behind_the_proxy_https_is_learnt_from_x_forwarded_proto():
    with override_settings(
        SECURE_SSL_REDIRECT=True,
        SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"),
        SECURE_HSTS_SECONDS=3600,
    ):
        plain = Client().get("/accounts/login/")
        assert plain.status_code == 301 and plain["Location"].startswith("https://")
        proxied = Client().get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
        assert proxied.status_code == 200
        assert proxied["Strict-Transport-Security"].startswith("max-age=3600")
