"""The one door for values (API.md "Errors"): what every JSON body is parsed with, and what every
stored value is checked against, so that SQLite and PostgreSQL hold exactly the same things.

Low in the layers: it knows only ``errors``. ``json_loads`` is the one parser (REST JSON bodies,
the multipart ``record`` part, the tool's JSON-text input); ``value_problem`` / ``check_value`` is
the one check of a value the services are about to store, and ``check_text`` the one check of a
string that will reach SQL (a path segment, a query parameter, a key, a username).

What both databases can hold, and why each rule exists:

* integers within signed 64 bits: PostgreSQL's jsonb keeps any numeric, but reading it back gives
  Python an integer orjson cannot render (``Integer exceeds 64-bit range``), so every list holding
  the record would fail; SQLite's JSON functions turn such integers into floats;
* floats that are finite and below 2**63 in magnitude: a float that large is an integer in disguise
  (``1e20``, or an integer past 64 bits that orjson parsed as a float), and jsonb hands it back as
  that integer;
* strings and keys without U+0000 (PostgreSQL's text and jsonb cannot hold it) and without lone
  surrogates (not Unicode: UTF-8 cannot encode them, so PostgreSQL refuses them and SQLite stores
  bytes no reader can decode);
* at most ``MAX_DEPTH`` nested arrays and objects: orjson renders at most 254 levels, and a record
  is rendered inside a list page or an event.
"""

from __future__ import annotations

import math
import re

import orjson

from artifacts_app.errors import ArtifactError
from artifacts_app.jsontypes import JSON, JSONObject

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
FLOAT_LIMIT = float(2**63)
MAX_DEPTH = 100
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Filters over JSON text, at C speed; a hit is only a suspicion, which the exact walk decides.
_BIG_EXPONENT = re.compile(rb"e\+?(?:1[89]|[2-9][0-9]|[0-9]{3})")  # 1e18 and up
_DIGIT_RUNS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))  # digits -> "0", else " "
_LONG_DIGITS = b"0" * 19
_NOT_QUOTES_OR_BRACKETS = bytes(b for b in range(256) if b not in b'"[]{}')
_QUOTED = re.compile(rb'"[^"]*"')
_TO_SQUARE = bytes.maketrans(b"{}", b"[]")


# --- strings ---------------------------------------------------------------------------------


def text_problem(value: str) -> str | None:
    """Why a string cannot be stored or queried on both databases, or None."""
    if "\x00" in value:
        return "contains NUL (U+0000), which PostgreSQL cannot store"
    if not value.isascii() and _SURROGATE.search(value):
        return "contains a lone surrogate (U+D800–U+DFFF), which is not Unicode text"
    return None


def check_text(value: JSON, *, field: str, code: str) -> None:
    """Refuse (400 ``code``, naming ``field``) a string neither database can hold."""
    if isinstance(value, str):
        problem = text_problem(value)
        if problem:
            raise ArtifactError(
                code, f"`{field}` {problem}; remove that character.", {"field": field}
            )


# --- JSON values -------------------------------------------------------------------------------


def _scalar_problem(value: JSON) -> str | None:
    if value is None or value is True or value is False:
        return None
    if isinstance(value, str):
        return text_problem(value)
    if isinstance(value, int):
        if INT64_MIN <= value <= INT64_MAX:
            return None
        return (
            f"is an integer outside 64 bits ({INT64_MIN} to {INT64_MAX}); "
            "send a number that large as a string"
        )
    if isinstance(value, float):
        if not math.isfinite(value):
            return "is not a finite number (NaN and Infinity are not JSON)"
        if abs(value) >= FLOAT_LIMIT:
            return (
                f"is {value!r}, a number too large to keep exactly (at least 2**63, it would be "
                "read back as an integer outside 64 bits); send it as a string"
            )
        return None
    return f"is a {type(value).__name__}, not a JSON value"


def _brackets(raw: bytes) -> bytes:
    """The brackets of valid JSON text outside its strings, as one kind (``[``/``]``).

    At C speed: escapes go first (``\\\\`` then ``\\"``); then only quotes and brackets are kept,
    so a string is its quotes and the brackets inside it; adjacent quotes (an empty string, or
    two strings with nothing but separators between them) go, and what still lies between
    quotes is brackets inside strings."""
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = raw.translate(None, _NOT_QUOTES_OR_BRACKETS).replace(b'""', b"")
    if b'"' in kept:
        kept = _QUOTED.sub(b"", kept)
    return kept.translate(_TO_SQUARE)


def _depth_ok_bytes(raw: bytes, max_depth: int) -> bool:
    """Whether valid JSON text ``raw`` nests at most ``max_depth`` arrays and objects: its brackets
    (as one kind), with one innermost level removed per pass."""
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return True
    brackets = _brackets(raw)
    for _ in range(max_depth):
        if not brackets:
            return True
        brackets = brackets.replace(b"[]", b"")
    return not brackets


def _fast_ok(value: JSON, max_depth: int) -> bytes | None:
    """The common case at C speed: orjson's own encoding (which refuses lone surrogates, keys
    that are not strings, other types and integers past 64 bits unsigned), then filters for NUL,
    NaN/Infinity (orjson writes them as null), long integers, large exponents and depth. Answers
    the encoding when all is storable; None when the exact walk must decide."""
    try:
        encoded = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return None
    if b"\\u0000" in encoded or b"null" in encoded:
        return None
    if b"e+" in encoded and _BIG_EXPONENT.search(encoded):
        return None
    if len(encoded) >= 19 and _LONG_DIGITS in encoded.translate(_DIGIT_RUNS):
        return None
    if not _depth_ok_bytes(encoded, max_depth):
        return None
    return encoded


def _step(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if isinstance(key, str) and _NAME.fullmatch(key):
        return f"{path}.{key}"
    shown = (
        orjson.dumps(key).decode() if isinstance(key, str) and not text_problem(key) else repr(key)
    )
    return f"{path}[{shown}]"


def _first_problem(value: JSON, root: str, max_depth: int) -> tuple[str, str] | None:
    # Depth first, in document order, so that the path named is the first a reader would find.
    stack: list[tuple[JSON, int, str]] = [(value, 0, root)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, dict):
            if depth >= max_depth:
                return path, f"nests deeper than {max_depth} arrays and objects; flatten it"
            children = []
            for key, child in item.items():
                if not isinstance(key, str):
                    return path, f"has a key {key!r} that is not a string"
                problem = text_problem(key)
                if problem:
                    return path, f"has a key that {problem}"
                children.append((child, depth + 1, _step(path, key)))
            stack.extend(reversed(children))
        elif isinstance(item, (list, tuple)):
            if depth >= max_depth:
                return path, f"nests deeper than {max_depth} arrays and objects; flatten it"
            stack.extend(
                reversed([(child, depth + 1, _step(path, i)) for i, child in enumerate(item)])
            )
        else:
            problem = _scalar_problem(item)
            if problem:
                return path, problem
    return None


def value_problem(
    value: JSON, *, root: str = "data", max_depth: int = MAX_DEPTH
) -> tuple[str, str] | None:
    """The first thing in ``value`` that both databases cannot hold: (path, what), or None."""
    if _fast_ok(value, max_depth) is not None:
        return None
    return _first_problem(value, root, max_depth)


def check_value(value: JSON, *, field: str = "data", code: str = "invalid_data") -> bytes:
    """Refuse (400 ``code``) a value that SQLite or PostgreSQL could not store and give back;
    answers its JSON encoding, so that a caller measuring its size need not encode it again.

    ``details`` names the field (``field``) and where inside it (``path``, e.g. ``data.items[3]``).
    """
    encoded = _fast_ok(value, MAX_DEPTH)
    if encoded is not None:
        return encoded
    found = _first_problem(value, field, MAX_DEPTH)
    if found is None:  # a filter's false alarm (e.g. "e20" inside a string)
        return orjson.dumps(value)
    path, what = found
    raise ArtifactError(code, f"`{path}` {what}.", {"field": field, "path": path})


# --- the one JSON parser --------------------------------------------------------------------


def json_loads(
    raw: bytes | bytearray | memoryview | str, *, what: str = "The body", field: str | None = None
) -> JSON:
    """Parse JSON text the one way: orjson (strict UTF-8, no NaN/Infinity, no lone surrogates),
    at most ``MAX_DEPTH`` + 2 levels (room for the envelope around ``data``).

    Refusals are 400 ``malformed_json`` whose message starts with ``what``; ``field`` goes into
    ``details`` when the JSON is one field of a larger request (the multipart ``record`` part, the
    tool's ``input``).
    """
    details: JSONObject = {} if field is None else {"field": field}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ArtifactError(
            "malformed_json",
            f"{what} is not valid JSON: {exc}.",
            {**details, "position": exc.pos},
        ) from None
    text = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)  # valid: orjson read it
    if not _depth_ok_bytes(text, MAX_DEPTH + 2):
        raise ArtifactError(
            "malformed_json",
            f"{what} nests deeper than {MAX_DEPTH + 2} arrays and objects; flatten it.",
            details or None,
        )
    return value
