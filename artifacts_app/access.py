"""Who is calling, and what they may see and do: the one access rule (DESIGN.md §7, API.md table).

Entry points resolve a ``Caller`` once (from a DRF request, a websocket scope, …) and ask
``require(caller, agent, Action.X)``; ``TABLE`` declares, for each action, which kinds of caller
may. Reads get a ``Q`` to filter querysets with (``visible``, ``visible_sessions``; None:
everything of the agent), so lists are protected, not only single objects; hidden and missing then
look the same (404). The rule everywhere: no credentials are 401, an agent key on another agent is
403, a kind of caller the table leaves out of an action is 403, and a user acts only on what lies
in sessions it owns. docs/architecture.md "Access" shows the table (a test holds it to ``TABLE``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from functools import cached_property
from typing import Final, Literal

from django.contrib.auth.models import AbstractUser
from django.db.models import Q

from artifacts_app import selectors
from artifacts_app.errors import (
    ArtifactError,
    ForbiddenError,
    NotFoundError,
    UnauthenticatedError,
)
from artifacts_app.models import Agent, ApiKey
from artifacts_app.selectors import Stream

ANONYMOUS = "anonymous"
AGENT = "agent"
USER = "user"
STAFF = "staff"


@dataclass(frozen=True)
class Caller:
    kind: str
    user: AbstractUser | None = None  # the Django user (users and staff)
    agent_id: int | None = None  # the agent an agent key belongs to
    key: ApiKey | None = None  # the key or token used, if any

    @property
    def is_authenticated(self) -> bool:
        return self.kind != ANONYMOUS


ANONYMOUS_CALLER = Caller(kind=ANONYMOUS)


INVALID_TOKEN_MESSAGE = (
    "The bearer token is unknown or revoked; make a new one with "
    "`manage.py create_agent_key <slug>` or `create_user_token <username>`."
)


def is_staff(user: object) -> bool:
    """The staff rule: an active user with ``is_staff`` (REST, websockets and the admin)."""
    return (
        isinstance(user, AbstractUser)
        and user.is_authenticated
        and user.is_active
        and user.is_staff
    )


def caller_from_key(key: ApiKey) -> Caller:
    """The caller behind an active agent key or user token."""
    if key.kind == ApiKey.KIND_AGENT:
        return Caller(kind=AGENT, agent_id=key.agent_id, key=key)
    user = key.user
    if user is None or not user.is_active:
        return ANONYMOUS_CALLER
    return Caller(kind=STAFF if is_staff(user) else USER, user=user, key=key)


def caller_from_user(user: object) -> Caller:
    """The caller behind a Django user (session cookie); anonymous when not logged in."""
    if not isinstance(user, AbstractUser) or not user.is_authenticated or not user.is_active:
        return ANONYMOUS_CALLER
    return Caller(kind=STAFF if is_staff(user) else USER, user=user)


def bearer_token(header: str | bytes | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value, or None when there is none."""
    if not header:
        return None
    if isinstance(header, bytes):
        header = header.decode("latin-1")  # latin-1 decodes every byte
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or None


def caller_from_authorization(header: str | bytes | None) -> Caller | None:
    """The caller behind an ``Authorization`` header value: the one reading of it, for REST and
    websockets alike.

    None when the header carries no bearer token, or one that is unknown, revoked or belongs to
    an inactive user: the caller then has no credentials that count (REST: 401, websockets: 4401).
    """
    token = bearer_token(header)
    if token is None:
        return None
    key = selectors.token_lookup(token)
    if key is None:
        return None
    caller = caller_from_key(key)
    return caller if caller.is_authenticated else None


def _require_credentials(caller: Caller) -> None:
    if not caller.is_authenticated:
        raise UnauthenticatedError(
            "not_authenticated",
            "Send `Authorization: Bearer <agent key or user token>`, or log in.",
        )


# --- the table: what each action needs, for each kind of caller -------------------------------


class Action(StrEnum):
    """Everything an entry point asks ``require`` (or a filter) about; ``TABLE`` says who may."""

    READ = "read"  # list, read, download; versions, diffs, kinds, the tool's kinds; MCP's door
    CREATE_SESSION = "create a session"
    TAG = "tag"  # a tag, a content replacement, a run of the tool (REST, MCP)
    UPLOAD = "upload"  # resumable uploads (tus): hidden from everyone but the agent's key
    DECLARE = "declare kinds"
    RESTORE = "restore a version"
    DELETE = "delete"
    PIN = "pin, unpin"
    TOOL_DEFINITION = "read the tool's definition"
    WATCH_AGENT = "watch the agent's stream"
    WATCH_SESSION = "watch a session's stream"
    WATCH_EVERY_AGENT = "watch every agent's stream"  # the admin's home: what shipped, live
    WEBHOOK_READ = "list and read webhooks and their deliveries"
    WEBHOOK_CREATE = "create a webhook"
    WEBHOOK_CHANGE = "change a webhook, rotate its secret, replay"
    WEBHOOK_DELETE = "delete a webhook"


@dataclass(frozen=True)
class Rule:
    """Who may: ``kinds`` of caller (an agent key only ever on its own agent; a user only on what
    lies in sessions it owns). The others get 403 with ``refusal``; a user on a session it does not
    own gets ``not_owner`` (reads: nothing of it, a 404 like a missing one)."""

    kinds: frozenset[str]
    refusal: str = ""
    not_owner: str = ""
    # A Django model permission that also lets a user (staff or not) in, on every agent.
    permission: str = ""


_KEY, _KEY_STAFF, _ALL = (
    frozenset({AGENT}),
    frozenset({AGENT, STAFF}),
    frozenset({AGENT, STAFF, USER}),
)

TABLE: dict[Action, Rule] = {
    Action.READ: Rule(_ALL),
    Action.CREATE_SESSION: Rule(
        frozenset({AGENT, USER}),
        "Staff supervise; sessions are created by agents and their users.",
        "A user creates sessions it owns; leave `owner` out or name yourself.",
    ),
    Action.TAG: Rule(_KEY, "Only the agent's key may tag artifacts or run its tool."),
    Action.UPLOAD: Rule(_KEY, "Only the agent's key may upload contents."),
    Action.DECLARE: Rule(_KEY, "Only the agent's key may declare its kinds."),
    Action.RESTORE: Rule(_KEY, "Only the agent's key may restore a version (it is a tag)."),
    Action.DELETE: Rule(_KEY_STAFF, "Only the agent's key or a staff user may delete artifacts."),
    Action.PIN: Rule(_KEY_STAFF, "Only the agent's key or a staff user may pin or unpin."),
    Action.TOOL_DEFINITION: Rule(
        _KEY_STAFF, "Only the agent's key or a staff user may read its tool definition."
    ),
    Action.WATCH_AGENT: Rule(
        _KEY_STAFF, "Only the agent's key or a staff user may watch the agent's stream."
    ),
    Action.WATCH_SESSION: Rule(_ALL, not_owner="This session belongs to someone else."),
    Action.WATCH_EVERY_AGENT: Rule(
        frozenset({STAFF}), "Only staff may watch every agent's stream at once."
    ),
    Action.WEBHOOK_READ: Rule(
        _KEY,
        "Only the agent's key, or a user with the `view_webhook` permission, may read webhooks.",
        permission="artifacts_app.view_webhook",
    ),
    Action.WEBHOOK_CREATE: Rule(
        _KEY,
        "Only the agent's key, or a user with the `add_webhook` permission, may create webhooks.",
        permission="artifacts_app.add_webhook",
    ),
    Action.WEBHOOK_CHANGE: Rule(
        _KEY,
        "Only the agent's key, or a user with the `change_webhook` permission, may change webhooks.",
        permission="artifacts_app.change_webhook",
    ),
    Action.WEBHOOK_DELETE: Rule(
        _KEY,
        "Only the agent's key, or a user with the `delete_webhook` permission, may delete webhooks.",
        permission="artifacts_app.delete_webhook",
    ),
}


def require(caller: Caller, agent: Agent, action: Action) -> None:
    """The one rule: no credentials are 401; an agent key on another agent, and a caller whose
    kind ``TABLE`` leaves out of ``action``, are 403. A user passes where it may act on its own
    sessions; which those are is ``visible``'s, ``sees_session``'s or ``require_own``'s."""
    _require_credentials(caller)
    if caller.kind == AGENT and caller.agent_id != agent.pk:
        raise ForbiddenError(
            "wrong_agent", f"This agent key belongs to another agent, not {agent.slug!r}."
        )
    rule = TABLE[action]
    if caller.kind not in rule.kinds and not has_permission(caller, rule.permission):
        raise ForbiddenError("forbidden", rule.refusal)


def require_everywhere(caller: Caller, action: Action) -> None:
    """``require`` for an action over every agent at once: no credentials are 401, a caller
    whose kind ``TABLE`` leaves out of ``action`` is 403 (an agent key is always left out: it
    acts in its own agent only)."""
    _require_credentials(caller)
    rule = TABLE[action]
    if caller.kind not in rule.kinds or caller.kind == AGENT:
        raise ForbiddenError("forbidden", rule.refusal)


def every_stream_open(caller: Caller) -> list[Stream]:
    """Resolve and authorise the stream of every agent at once (staff): one ``Stream`` per agent
    there is now."""
    require_everywhere(caller, Action.WATCH_EVERY_AGENT)
    return [Stream(agent.pk, agent.slug, None) for agent in selectors.agents_all()]


def has_permission(caller: Caller, permission: str) -> bool:
    """Whether the caller is an active user holding the Django model ``permission``."""
    user = caller.user
    return bool(permission) and user is not None and user.is_active and user.has_perm(permission)


def require_hidden(caller: Caller, agent: Agent, action: Action, missing: ArtifactError) -> None:
    """``require``, with ``missing`` (a 404) in place of its 403s: what the caller may not touch
    is not shown to exist (an agent's uploads to anyone but its key). No credentials stay 401."""
    try:
        require(caller, agent, action)
    except ForbiddenError:
        raise missing from None


_SEES_EVERYTHING = TABLE[Action.READ].kinds - {USER}  # read once: every read asks it


def sees_everything(caller: Caller) -> bool:
    """Whether the caller, once let in, sees every session of the agent (and what lies outside
    sessions): agent keys and staff; a user sees its own sessions only."""
    return caller.kind in _SEES_EVERYTHING


def sees_session(caller: Caller, owner_id: int | None) -> bool:
    """Whether the caller, once let in, sees what lies in a session owned by ``owner_id`` (None:
    a session without an owner, or no session): the rule ``visible`` writes as a filter, asked
    of one session in memory."""
    if sees_everything(caller):
        return True
    return caller.user is not None and owner_id is not None and owner_id == caller.user.pk


def require_own(caller: Caller, agent: Agent, action: Action, owner_id: int | None) -> None:
    """``require``, then, for a user, that the session (of owner ``owner_id``) is its own."""
    require(caller, agent, action)
    if not sees_session(caller, owner_id):
        raise ForbiddenError("forbidden", TABLE[action].not_owner)


def visible(caller: Caller, agent: Agent) -> Q | None:
    """The filter on the rows of ``agent`` that lie in a session — artifacts, and versions by
    **their own** session, not the record's, so a record moved from alice's session into bob's
    never shows bob what it held in alice's (API.md "Versions, pins and diffs") — the caller may
    read (None: all of them). Hidden and missing then look the same: 404."""
    require(caller, agent, Action.READ)
    return None if sees_everything(caller) else Q(session__owner=caller.user)


def visible_across(caller: Caller) -> Q | None:
    """The filter on artifact rows of every agent the caller may read (``GET /api/v1/artifacts``):
    staff everything (None), a user the records of sessions it owns, an agent key its own agent's.
    No credentials are 401."""
    _require_credentials(caller)
    if caller.kind == AGENT:
        return Q(agent_id=caller.agent_id)
    if caller.kind == STAFF:
        return None
    return Q(session__owner=caller.user)


def visible_sessions(caller: Caller, agent: Agent) -> Q | None:
    """The filter on ``Session`` rows of ``agent`` the caller may read (None: all of them)."""
    require(caller, agent, Action.READ)
    return None if sees_everything(caller) else Q(owner=caller.user)


def require_session_create(caller: Caller, agent: Agent, owner: str | None) -> str | None:
    """Agent keys and users create sessions; a user always owns what it creates. Answers the owner."""
    require(caller, agent, Action.CREATE_SESSION)
    if caller.kind != USER or caller.user is None:  # a user caller always has its user
        return owner
    username = caller.user.get_username()
    if owner is not None and owner != username:
        raise ForbiddenError("forbidden", TABLE[Action.CREATE_SESSION].not_owner)
    return username


class _Missing(Enum):
    SESSION = "a session stream's session that does not exist"


_NO_SESSION: Final = _Missing.SESSION
Owner = int | None | Literal[_Missing.SESSION]  # a session's owner id, None: it has none


def stream_open(caller: Caller, slug: str, session_sid: str | None) -> Stream:
    """Resolve and authorise a websocket stream. Unknown agent or session → ``NotFoundError``;
    a user learns nothing about sessions it does not own: those look forbidden whether or not
    they exist."""
    _require_credentials(caller)  # before the slug: no credentials learn nothing
    agent = selectors.agent_get(slug)
    owner: Owner = None
    if session_sid is not None:
        session = selectors.session_owner(agent.pk, session_sid)
        owner = _NO_SESSION if session is None else session.owner_id
    return _stream_rule(caller, agent, session_sid, owner)


def _stream_rule(caller: Caller, agent: Agent, session_sid: str | None, owner: Owner) -> Stream:
    """``stream_open``'s rule on what was looked up: ``owner`` is the session's owner id (None: it
    has none), or ``_NO_SESSION`` — a session stream of a session that does not exist."""
    if session_sid is None:
        require(caller, agent, Action.WATCH_AGENT)
        return Stream(agent.pk, agent.slug, None)
    if owner is _NO_SESSION:
        if sees_everything(caller):
            require(caller, agent, Action.WATCH_SESSION)  # a wrong agent's key is still 403
            raise NotFoundError(
                "unknown_session",
                f"Session {session_sid!r} does not exist for agent {agent.slug!r}.",
            )
        raise ForbiddenError("forbidden", TABLE[Action.WATCH_SESSION].not_owner)
    require_own(caller, agent, Action.WATCH_SESSION, owner)
    return Stream(agent.pk, agent.slug, session_sid)


# --- open streams, asked again (API.md "Limits": revocation reaches open streams) -------------


@dataclass(frozen=True)
class Grant:
    """What an open stream was let in with, asked again while it stays open (``grant_recheck``):
    a websocket's event stream (``stream_open``'s rule) or an MCP stream (``events=False``: what
    the caller may read, ``Action.READ``'s rule, and as the same kind of caller)."""

    caller: Caller
    agent: Agent | None  # None: every agent's stream at once (``every_stream_open``)
    session_sid: str | None = None  # an event stream of one session
    cookie: str | None = None  # the Django session key behind a cookie-authenticated caller
    events: bool = True

    @cached_property
    def credentials(self) -> selectors.Credentials:
        caller = self.caller
        user = caller.user
        watched = (
            (self.agent.pk, self.session_sid)
            if self.agent is not None and self.events and self.session_sid
            else None
        )
        return selectors.Credentials(
            key_id=caller.key.pk if caller.key is not None else None,
            user_id=user.pk if user is not None else None,
            cookie=self.cookie,
            session=watched,
        )


def stream_grant(caller: Caller, stream: Stream, cookie: str | None = None) -> Grant:
    """The grant of an event stream that ``stream_open`` let in."""
    agent = Agent(pk=stream.agent_id, slug=stream.slug)
    return Grant(caller=caller, agent=agent, session_sid=stream.session_sid, cookie=cookie)


REVOKED_MESSAGE = (
    "The credentials of this stream were revoked, or their user deactivated or logged out; "
    "reconnect with valid ones."
)


def _caller_now(caller: Caller, cookie: str | None, state: selectors.CredentialsState) -> Caller:
    """The caller as the credentials' state now makes it (anonymous once they no longer count)."""
    if caller.key is not None:
        if caller.key.pk not in state.keys:
            return ANONYMOUS_CALLER
        if caller.kind == AGENT:
            return caller
    if caller.user is None:
        return ANONYMOUS_CALLER
    found = state.users.get(caller.user.pk)
    if found is None or (cookie is not None and cookie not in state.cookies):
        return ANONYMOUS_CALLER
    if found == (caller.user.is_active, caller.user.is_staff):
        return caller  # the common case: nothing changed, nothing to build
    user = copy.copy(caller.user)
    user.is_active, user.is_staff = found
    now = caller_from_user(user)  # the staff rule, asked of the user as it is now
    return replace(now, key=caller.key) if now.is_authenticated else now


def grant_recheck(grant: Grant, state: selectors.CredentialsState) -> ArtifactError | None:
    """Why the stream of ``grant`` may no longer stay open, given the credentials' ``state``
    (``selectors.credentials_state``), or None while it may: the rule that let it in, asked again
    of the caller as it is now."""
    caller = _caller_now(grant.caller, grant.cookie, state)
    if not caller.is_authenticated:
        return UnauthenticatedError("invalid_token", REVOKED_MESSAGE)
    try:
        if grant.agent is None:
            require_everywhere(caller, Action.WATCH_EVERY_AGENT)
        elif grant.events:
            owner = (
                state.sessions.get((grant.agent.pk, grant.session_sid), _NO_SESSION)
                if grant.session_sid is not None
                else None
            )
            _stream_rule(caller, grant.agent, grant.session_sid, owner)
        else:
            require(caller, grant.agent, Action.READ)
            if caller.kind != grant.caller.kind:  # what it was shown was chosen by its kind
                raise ForbiddenError(
                    "forbidden", "This caller's access changed; reconnect to see what it may."
                )
    except ArtifactError as error:
        return error
    return None


# --- secrets (API.md "Authentication": is_staff alone never mints or revokes them) ------------

MINT_PERMISSION = "artifacts_app.add_apikey"
REVOKE_PERMISSION = "artifacts_app.change_apikey"


def _may(user: object, permission: str, owner: AbstractUser | None) -> bool:
    if not isinstance(user, AbstractUser) or not user.is_active or not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    # A holder of the permission acts on agents' keys and users' tokens, but never on a
    # superuser's: that would hand out (or take away) more than the holder has.
    if owner is not None and owner.is_superuser:
        return False
    return bool(user.is_staff and user.has_perm(permission))


def may_mint_secret(user: object, owner: AbstractUser | None = None) -> bool:
    """Whether ``user`` may create an agent key, or a user token for ``owner`` (a user)."""
    return _may(user, MINT_PERMISSION, owner)


def may_revoke_secret(user: object, key: ApiKey | None = None) -> bool:
    """Whether ``user`` may revoke ``key`` (any key or token, when None)."""
    owner = key.user if key is not None and key.user_id else None
    return _may(user, REVOKE_PERMISSION, owner)
