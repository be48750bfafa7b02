"""The access table, row by row: every action × every kind of caller, through the functions the
entry points call (``require``, the read filters, the session and stream rules).

``EXPECTED`` is the table written out by hand, from API.md: a change to ``access.TABLE`` that
API.md does not make fails here, and an action added to the table without a row here fails too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from artifacts_app import access, services
from artifacts_app.access import Action
from artifacts_app.errors import ArtifactError, ForbiddenError, NotFoundError, UnauthenticatedError
from artifacts_app.models import Agent, Artifact, Session

CALLERS = ("agent", "other_agent", "staff", "owner", "other_user", "anonymous")

YES, OWN = "yes", "own"  # may; may, on sessions it owns (elsewhere: 403, or hidden for reads)
_KEY = dict(agent=YES, other_agent=403, staff=403, owner=403, other_user=403, anonymous=401)
_KEY_STAFF = _KEY | dict(staff=YES)
_EVERYONE = _KEY_STAFF | dict(owner=OWN, other_user=OWN)
# The key's alone, and hidden from the others: what they may not touch does not exist for them.
_KEY_HIDDEN = dict(agent=YES, other_agent=404, staff=404, owner=404, other_user=404, anonymous=401)

EXPECTED: dict[Action, dict[str, str | int]] = {
    Action.READ: _EVERYONE,
    Action.CREATE_SESSION: _KEY | dict(owner=OWN, other_user=OWN),
    Action.TAG: _KEY,
    Action.UPLOAD: _KEY_HIDDEN,
    Action.DECLARE: _KEY,
    Action.RESTORE: _KEY,
    Action.DELETE: _KEY_STAFF,
    Action.PIN: _KEY_STAFF,
    Action.TOOL_DEFINITION: _KEY_STAFF,
    Action.WATCH_AGENT: _KEY_STAFF,
    Action.WATCH_SESSION: _EVERYONE,
    # Every agent at once: staff only; an agent key acts in its own agent, never in all of them.
    Action.WATCH_EVERY_AGENT: _KEY | dict(agent=403, staff=YES),
    # Webhooks: the agent's key; users only with the model permission (the world's have none).
    Action.WEBHOOK_READ: _KEY,
    Action.WEBHOOK_CREATE: _KEY,
    Action.WEBHOOK_CHANGE: _KEY,
    Action.WEBHOOK_DELETE: _KEY,
}


class World:
    def __init__(self, agent: Agent, callers: dict[str, access.Caller], users: dict) -> None:
        self.agent = agent
        self.callers = callers
        self.users = users  # the owner of each of the two sessions: "owner" → alice, …
        self.artifacts: dict[str, str] = {}  # session id → the artifact tagged in it

    def sid(self, who: str) -> str:
        return f"s-{who}"


@pytest.fixture
def world(reviewer, freeform, alice, bob, django_user_model) -> World:
    staff = django_user_model.objects.create_user("sup", password="x", is_staff=True)
    own_key, _ = services.agent_key_create(agent=reviewer)
    other_key, _ = services.agent_key_create(agent=freeform)
    callers = {
        "agent": access.caller_from_key(own_key),
        "other_agent": access.caller_from_key(other_key),
        "staff": access.caller_from_user(staff),
        "owner": access.caller_from_user(alice),
        "other_user": access.caller_from_user(bob),
        "anonymous": access.caller_from_user(None),
    }
    w = World(reviewer, callers, {"owner": alice, "other_user": bob})
    for who, user in w.users.items():
        services.session_create(agent=reviewer, sid=w.sid(who), owner=user)
        tagged = services.artifact_tag(
            agent=reviewer, kind="report", data=who, session_id=w.sid(who)
        )
        w.artifacts[w.sid(who)] = tagged.record.id
    w.artifacts[""] = services.artifact_tag(agent=reviewer, kind="report", data=0).record.id
    return w


def _read(w: World, caller: access.Caller, who: str) -> None:
    """Reading what lies in ``who``'s session: hidden is a 404 at the routes, NotFound here."""
    sid = w.sid(who)
    q = access.visible(caller, w.agent)
    rows = Artifact.objects.filter(agent=w.agent, id=w.artifacts[sid])
    sessions = Session.objects.filter(agent=w.agent, sid=sid)
    q_sessions = access.visible_sessions(caller, w.agent)
    seen = (rows.filter(q) if q is not None else rows).exists()
    assert seen == (sessions.filter(q_sessions) if q_sessions is not None else sessions).exists()
    if not seen:
        raise LookupError(sid)


def _attempt(w: World, action: Action) -> Callable[[access.Caller, str], object]:
    """How the entry points ask about ``action``, on what lies in ``who``'s session."""
    if action is Action.READ:
        return lambda caller, who: _read(w, caller, who)
    if action is Action.CREATE_SESSION:
        owner = {who: user.get_username() for who, user in w.users.items()}
        return lambda caller, who: access.require_session_create(caller, w.agent, owner[who])
    if action is Action.WATCH_SESSION:
        return lambda caller, who: access.stream_open(caller, w.agent.slug, w.sid(who))
    if action is Action.WATCH_AGENT:
        return lambda caller, who: access.stream_open(caller, w.agent.slug, None)
    if action is Action.WATCH_EVERY_AGENT:
        return lambda caller, who: access.every_stream_open(caller)
    if action is Action.UPLOAD:
        hidden = NotFoundError("unknown_route", "There is no such route.")
        return lambda caller, who: access.require_hidden(caller, w.agent, action, hidden)
    return lambda caller, who: access.require(caller, w.agent, action)


def _outcome(attempt: Callable[[access.Caller, str], object], caller: access.Caller, who: str):
    try:
        attempt(caller, who)
    except LookupError:
        return 404
    except ArtifactError as error:
        assert error.message, error.code  # every refusal says why
        return {UnauthenticatedError: 401, ForbiddenError: 403, NotFoundError: 404}[type(error)]
    return 200


def test_the_table_has_a_row_for_every_action():
    assert set(EXPECTED) == set(Action) == set(access.TABLE)


CASES = [(action, caller) for action in Action for caller in CALLERS]


@pytest.mark.parametrize(("action", "caller"), CASES, ids=[f"{a.name}-{c}" for a, c in CASES])
def test_who_may(world: World, action: Action, caller: str):
    """On its own session and on the other user's, each caller gets what ``EXPECTED`` says: "yes"
    passes on both; "own" passes on the caller's own session only (the other's is 403, or hidden
    for reads); a refusal is the same on both."""
    expected = EXPECTED[action][caller]
    attempt = _attempt(world, action)
    who = caller if caller in world.users else "owner"
    got = {side: _outcome(attempt, world.callers[caller], side) for side in world.users}
    if expected == YES:
        assert got == {"owner": 200, "other_user": 200}
    elif expected == OWN:
        theirs = "other_user" if who == "owner" else "owner"
        assert got == {who: 200, theirs: 404 if action is Action.READ else 403}
    else:
        assert got == {"owner": expected, "other_user": expected}


@pytest.mark.parametrize(
    ("action", "codename"),
    [
        (Action.WEBHOOK_READ, "view_webhook"),
        (Action.WEBHOOK_CREATE, "add_webhook"),
        (Action.WEBHOOK_CHANGE, "change_webhook"),
        (Action.WEBHOOK_DELETE, "delete_webhook"),
    ],
)
def test_a_webhook_permission_lets_a_user_in(world: World, action: Action, codename: str):
    from django.contrib.auth.models import Permission

    bob = world.users["other_user"]
    with pytest.raises(ForbiddenError):
        access.require(access.caller_from_user(bob), world.agent, action)
    bob.user_permissions.add(Permission.objects.get(codename=codename))
    bob = type(bob).objects.get(pk=bob.pk)  # permissions are cached on the instance
    access.require(access.caller_from_user(bob), world.agent, action)
    bob.is_active = False
    with pytest.raises(UnauthenticatedError):
        access.require(access.caller_from_user(bob), world.agent, action)


def test_what_lies_outside_sessions(world: World):
    """Artifacts without a session are the agent key's and staff's only."""
    rows = Artifact.objects.filter(agent=world.agent, id=world.artifacts[""])
    for caller, expected in (("agent", True), ("staff", True), ("owner", False)):
        q = access.visible(world.callers[caller], world.agent)
        assert (rows.filter(q) if q is not None else rows).exists() is expected, caller
        assert access.sees_session(world.callers[caller], None) is expected, caller


def test_a_wrong_agents_key_is_named(world: World):
    with pytest.raises(ForbiddenError) as refused:
        access.require(world.callers["other_agent"], world.agent, Action.READ)
    assert refused.value.code == "wrong_agent"
    with pytest.raises(UnauthenticatedError) as refused_anon:
        access.require(world.callers["anonymous"], world.agent, Action.READ)
    assert refused_anon.value.code == "not_authenticated"


def test_an_agent_key_names_any_owner(world: World):
    caller = world.callers["agent"]
    assert access.require_session_create(caller, world.agent, "bob") == "bob"
    assert access.require_session_create(caller, world.agent, None) is None
    assert access.require_session_create(world.callers["owner"], world.agent, None) == "alice"


def test_a_session_stream_of_no_session(world: World):
    """A missing session is 404 to those who see every session, and looks forbidden to a user."""
    for caller, code in (("agent", "unknown_session"), ("staff", "unknown_session")):
        with pytest.raises(ArtifactError) as missing:
            access.stream_open(world.callers[caller], world.agent.slug, "s-nobody")
        assert missing.value.code == code
    with pytest.raises(ForbiddenError):
        access.stream_open(world.callers["owner"], world.agent.slug, "s-nobody")
    with pytest.raises(ForbiddenError) as wrong:
        access.stream_open(world.callers["other_agent"], world.agent.slug, "s-nobody")
    assert wrong.value.code == "wrong_agent"


def test_revoked_token_is_not_found(alice):
    _, secret = services.user_token_create(user=alice)
    assert access.caller_from_key(services.token_lookup(secret)).user == alice
    services.token_revoke(token=secret)
    assert services.token_lookup(secret) is None


# --- the table in docs/architecture.md is the code's ----------------------------------------

_CELL = {YES: "yes", OWN: "own sessions"}


def table_markdown() -> str:
    """``access.TABLE`` as docs/architecture.md shows it."""
    kinds = (
        (access.AGENT, "agent key (own agent)"),
        (access.STAFF, "staff"),
        (access.USER, "user"),
    )
    lines = [
        "| action | " + " | ".join(label for _, label in kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for action, rule in access.TABLE.items():
        cells = []
        for kind, _ in kinds:
            may = kind in rule.kinds
            if may:
                cells.append(_CELL[OWN if kind == access.USER else YES])
            elif rule.permission:
                cells.append(f"with `{rule.permission.split('.')[-1]}`")
            else:
                cells.append("403")
        lines.append(f"| {action.value} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_architecture_doc_shows_the_table():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    assert table_markdown() in doc, "docs/architecture.md 'Access' must hold:\n" + table_markdown()
