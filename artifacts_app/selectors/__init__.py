"""Reads, every one of them: entry points and services ask here, never the models directly.

``pages`` (keyset pages of artifacts and sessions, one record, one session), ``agents`` (agent by
slug, session by id, users, keys, the agent's last seq), ``events`` (replay, gap filling, a turn's
tags), ``sessions`` (sessions at a glance: last activity, bounded counts, search by id, turns),
``search`` (``q`` and ``where`` as SQL; ``artifacts_across`` in ``pages`` is the list across
agents), ``versions`` (a record's history: its versions, one version, a diff; used as
``selectors.versions``), ``dashboard`` (an agent's activity per hour, kinds with counts, latest
events; used as ``selectors.dashboard``). ``visible`` arguments are the access filters from ``access`` (None: all of the agent).
"""

from __future__ import annotations

from artifacts_app.selectors.agents import (
    Credentials,
    CredentialsState,
    SessionOwner,
    agent_find,
    agent_get,
    agent_last_seq,
    agent_slugs,
    agents_by_pk,
    credentials_state,
    session_owner,
    session_pk,
    token_lookup,
    user_get,
)
from artifacts_app.selectors.events import (
    REPLAY_PAGE,
    Replay,
    Stream,
    events_between,
    replay_page,
    turn_records,
)
from artifacts_app.selectors.pages import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    SESSION_FIELDS,
    Page,
    after,
    artifact_get,
    artifact_values,
    artifacts_across,
    artifacts_all,
    artifacts_page,
    before,
    check_limit,
    cursor_decode,
    cursor_encode,
    keyset_page,
    session_json,
    session_values,
    sessions_page,
)
from artifacts_app.selectors.sessions import (
    SessionSummary,
    Turn,
    Turns,
    iso_seconds,
    session_summaries,
    session_summary,
    session_turns,
    sessions_search,
)

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "REPLAY_PAGE",
    "SESSION_FIELDS",
    "Page",
    "Replay",
    "Credentials",
    "CredentialsState",
    "SessionOwner",
    "SessionSummary",
    "Stream",
    "Turn",
    "Turns",
    "after",
    "agent_find",
    "agent_get",
    "agent_last_seq",
    "agent_slugs",
    "agents_by_pk",
    "credentials_state",
    "artifact_get",
    "artifact_values",
    "artifacts_across",
    "artifacts_all",
    "artifacts_page",
    "before",
    "check_limit",
    "cursor_decode",
    "cursor_encode",
    "events_between",
    "iso_seconds",
    "keyset_page",
    "replay_page",
    "session_json",
    "session_owner",
    "session_pk",
    "session_summaries",
    "session_summary",
    "session_turns",
    "session_values",
    "sessions_page",
    "sessions_search",
    "token_lookup",
    "turn_records",
    "user_get",
]
