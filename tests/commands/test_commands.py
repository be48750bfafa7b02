from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from artifacts_app import services
from artifacts_app.models import Agent, ApiKey, Artifact, Session


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_agent(db):
    assert "Created agent helper" in run("create_agent", "helper", "--max", "3")
    assert Agent.objects.get(slug="helper").max_artifacts == 3


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("create_agent", "Bad_Slug"), "not valid"),
        (("create_agent", "admin"), "reserved"),
        (("create_agent", "x", "--max", "0"), "at least 1"),
    ],
)
def test_create_agent_refuses(db, args, fragment):
    with pytest.raises(CommandError, match=fragment):
        run(*args)
    assert not Agent.objects.filter(slug=args[1]).exists()


def test_create_agent_refuses_existing(reviewer):
    with pytest.raises(CommandError, match="exists already"):
        run("create_agent", "reviewer")


def test_agent_key_is_last_line_and_only_hash_is_stored(reviewer):
    secret = run("create_agent_key", "reviewer").strip().splitlines()[-1]
    key = ApiKey.objects.get()
    assert (
        secret.startswith(key.prefix)
        and key.secret_hash != secret
        and secret not in key.secret_hash
    )
    assert services.token_lookup(secret) == key


def test_user_token_and_revoke(alice):
    secret = run("create_user_token", "alice").strip().splitlines()[-1]
    assert services.token_lookup(secret).user == alice
    assert "Revoked" in run("revoke_token", secret)
    assert services.token_lookup(secret) is None
    with pytest.raises(CommandError, match="unknown or already revoked"):
        run("revoke_token", secret)
    with pytest.raises(CommandError, match="unknown or already revoked"):
        run("revoke_token", "aak_nonsense")


def test_commands_refuse_unknown_names(db):
    with pytest.raises(CommandError, match="no agent"):
        run("create_agent_key", "ghost")
    with pytest.raises(CommandError, match="no user"):
        run("create_user_token", "ghost")


def test_demo_is_rerunnable_and_prints_a_working_key(reviewer):
    first = run("demo").strip().splitlines()[-1]
    out = run("demo")
    second = out.strip().splitlines()[-1]
    assert "/admin/" in out and "admin /" in out
    assert services.token_lookup(first) is None  # the earlier demo key was revoked
    assert services.token_lookup(second).agent == reviewer
    session = Session.objects.get(sid="s_demo")
    assert session.owner.username == "alice"
    assert Artifact.objects.filter(agent=reviewer, session=session).count() == 4
    assert Artifact.objects.filter(blob__isnull=False).count() == 4
