from __future__ import annotations

import pytest

from artifacts_app import access, services
from artifacts_app.errors import ForbiddenError, UnauthenticatedError
from artifacts_app.models import Artifact


@pytest.fixture
def world(reviewer, freeform, alice, bob, django_user_model):
    staff = django_user_model.objects.create_user("sup", password="x", is_staff=True)
    services.session_create(agent=reviewer, sid="sa", owner=alice)
    services.session_create(agent=reviewer, sid="sb", owner=bob)
    a = services.artifact_tag(agent=reviewer, kind="report", data=1, session_id="sa").record.id
    b = services.artifact_tag(agent=reviewer, kind="report", data=2, session_id="sb").record.id
    n = services.artifact_tag(agent=reviewer, kind="report", data=3).record.id
    own_key, _ = services.agent_key_create(agent=reviewer)
    other_key, _ = services.agent_key_create(agent=freeform)
    return {
        "ids": {"a": a, "b": b, "none": n},
        "own": access.caller_from_key(own_key),
        "other": access.caller_from_key(other_key),
        "alice": access.caller_from_user(alice),
        "staff": access.caller_from_user(staff),
        "anon": access.caller_from_user(None),
    }


def visible_ids(caller, agent):
    q = access.artifact_visibility(caller, agent)
    qs = Artifact.objects.filter(agent=agent)
    return set((qs.filter(q) if q is not None else qs).values_list("id", flat=True))


def test_visibility_matrix(world, reviewer):
    ids = world["ids"]
    assert visible_ids(world["own"], reviewer) == set(ids.values())
    assert visible_ids(world["staff"], reviewer) == set(ids.values())
    assert visible_ids(world["alice"], reviewer) == {ids["a"]}
    with pytest.raises(ForbiddenError):
        access.artifact_visibility(world["other"], reviewer)
    with pytest.raises(UnauthenticatedError):
        access.artifact_visibility(world["anon"], reviewer)


def test_write_rules(world, reviewer):
    access.require_tag(world["own"], reviewer)
    access.require_delete(world["own"], reviewer)
    access.require_delete(world["staff"], reviewer)
    for who in ("alice", "staff"):
        with pytest.raises(ForbiddenError):
            access.require_tag(world[who], reviewer)
    with pytest.raises(ForbiddenError):
        access.require_delete(world["alice"], reviewer)
    assert access.require_session_create(world["alice"], reviewer, None) == "alice"
    with pytest.raises(ForbiddenError):
        access.require_session_create(world["alice"], reviewer, "bob")
    assert access.require_session_create(world["own"], reviewer, "bob") == "bob"


def test_stream_rules(world, reviewer, alice, bob):
    access.can_watch_session(world["alice"], reviewer, alice.pk)
    with pytest.raises(ForbiddenError):
        access.can_watch_session(world["alice"], reviewer, bob.pk)
    with pytest.raises(ForbiddenError):
        access.can_watch_agent(world["alice"], reviewer)
    access.can_watch_agent(world["staff"], reviewer)
    with pytest.raises(UnauthenticatedError):
        access.can_watch_session(world["anon"], reviewer, alice.pk)


def test_revoked_token_is_not_found(alice):
    _, secret = services.user_token_create(user=alice)
    assert access.caller_from_key(services.token_lookup(secret)).user == alice
    services.token_revoke(token=secret)
    assert services.token_lookup(secret) is None
