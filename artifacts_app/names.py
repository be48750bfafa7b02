"""Names and limits (API.md "Names"), defined once: services validate with them, URLconfs, websocket
routing, serializers and filters import them, so a limit cannot drift between entry points.

The ``*_PATTERN`` strings are regex bodies without anchors, for URL patterns; the ``*_RE`` objects
are compiled from the same strings for ``fullmatch``.
"""

from __future__ import annotations

import hashlib
import re
import secrets

SLUG_MAX = 63
KIND_MAX = 64
SESSION_ID_MAX = 128
ARTIFACT_ID_MAX = 40
KEY_MAX = 1024
TITLE_MAX = 512
TURN_MAX = 128
CONTENT_TYPE_MAX = 255
LABEL_MAX = 100

SLUG_PATTERN = rf"[a-z0-9][a-z0-9-]{{0,{SLUG_MAX - 1}}}"
KIND_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9._:-]{{0,{KIND_MAX - 1}}}"
SESSION_ID_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9._:-]{{0,{SESSION_ID_MAX - 1}}}"
ARTIFACT_ID_PATTERN = rf"[A-Za-z0-9_]{{1,{ARTIFACT_ID_MAX}}}"

SLUG_RE = re.compile(SLUG_PATTERN)
KIND_RE = re.compile(KIND_PATTERN)
SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)
# RFC 7231 media type with optional parameters, printable ASCII only (it becomes a response header).
CONTENT_TYPE_RE = re.compile(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(\s*;\s*[\x20-\x7e]*)?")

RESERVED_SLUGS = frozenset({"admin", "api", "static", "media", "playground", "accounts", "ws"})

AGENT_KEY_PREFIX = "aak_"
USER_TOKEN_PREFIX = "aau_"


def keyed_id(slug: str, key: str) -> str:
    """The stable id of a keyed record: the same (agent, key) always has the same id."""
    return "art_" + hashlib.sha256(f"{slug}\x00{key}".encode()).hexdigest()[:24]


def new_id() -> str:
    """The id of an unkeyed record."""
    return "art_" + secrets.token_hex(12)


def secret_hash(secret: str) -> str:
    """What is stored of an agent key or user token: they are random, so a slow hash adds nothing."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()
