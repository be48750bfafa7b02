"""Search, as plain values: the words of a record, ``q`` parsed into terms, ``where`` parsed into
conditions (API.md "Search"; DESIGN.md §15). No SQL here: ``selectors.search`` compiles these for
each database, and ``services._index`` writes a record's words.

Words are runs of Unicode letters and digits (``str.isalnum``), case-folded; nothing else ever
reaches a full-text engine. The database's own tokenizers never decide a word: SQLite's FTS5 is
handed the words joined by spaces (its tokenizer told that everything but a space is part of a
word), PostgreSQL a ``tsvector`` / ``tsquery`` written as lexemes. So both answer the same records.

Positions: PostgreSQL keeps a word's position up to 16,383 (and 256 positions per word). A
record's words are split there: the first ``HEAD_WORDS`` are its *head* (phrases match within it),
the rest its *tail* (found as words, never as part of a phrase). SQLite keeps the two in two
columns, PostgreSQL puts every tail word at position ``TAIL_POSITION``, two past the head's end, so
no phrase can cross into it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.conf import settings

from artifacts_app.errors import ArtifactError
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.values import INT64_MAX, INT64_MIN, json_loads, text_problem

WORD = re.compile(r"[^\W_]+")

Q_MAX_CHARS = 512
Q_MAX_WORDS = 32
# A longer run of letters (a hash, base64) is no word anyone types: it is left out of the index,
# and refused in a query (it could never match). PostgreSQL refuses lexemes past 2,047 bytes.
WORD_MAX_CHARS = 200
HEAD_WORDS = 16_381
TAIL_POSITION = 16_383
# PostgreSQL's tsvector holds at most 1 MiB of distinct lexemes: a record stops adding new words
# past this many bytes of them (the same cut on both databases).
DISTINCT_BYTES_MAX = 900_000
TEXT_TYPES = ("text/",)
JSON_TYPES = ("application/json",)

WHERE_MAX_CHARS = 4096
WHERE_MAX_CONDITIONS = 16
WHERE_MAX_DEPTH = 4
WHERE_MAX_IN = 100
PATH_MAX_SEGMENTS = 8
SEGMENT = re.compile(r"[^\W\d][\w-]{0,63}")

COMPARE = ("$gt", "$gte", "$lt", "$lte")
OPERATORS = ("$eq", "$ne", *COMPARE, "$in", "$nin", "$exists", "$contains")


def content_bytes() -> int:
    """How much of a text content is searched: ``ARTIFACTS_SEARCH_CONTENT_BYTES``."""
    return int(settings.ARTIFACTS_SEARCH_CONTENT_BYTES)


def words(text: str) -> list[str]:
    """The words of ``text``, case-folded, in order (too-long runs left out)."""
    found = []
    for match in WORD.finditer(text):
        word = match.group().casefold()
        # Case folding can add a combining mark (İ → i̇): keep what the word became, whole.
        if len(word) <= WORD_MAX_CHARS:
            found.append(word)
    return found


def searchable_type(content_type: str | None) -> bool:
    """Whether a content of this type is searched: ``text/*`` and ``application/json``."""
    if not content_type:
        return False
    base = content_type.split(";", 1)[0].strip().lower()
    return base.startswith(TEXT_TYPES) or base in JSON_TYPES


def content_words(head: bytes) -> str:
    """A text content's words (its first ``content_bytes()`` read as UTF-8), space-joined: what
    the blob row keeps so that a record keeping its content is indexed without reading it again."""
    text = head[: content_bytes()].decode("utf-8", errors="replace")
    return " ".join(words(text))


def _strings(value: JSON) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@dataclass(frozen=True)
class Document:
    """A record's words as indexed: ``head`` (phrases match here) and ``tail``."""

    head: list[str]
    tail: list[str]

    def fts(self) -> tuple[str, str]:
        """SQLite: the two FTS5 columns."""
        return " ".join(self.head), " ".join(self.tail)

    def tsvector(self) -> str:
        """PostgreSQL: a ``tsvector`` literal, lexemes with their positions (at most 256 each)."""
        positions: dict[str, list[int]] = {}
        for number, word in enumerate(self.head, start=1):
            kept = positions.setdefault(word, [])
            if len(kept) < 256:
                kept.append(number)
        for word in self.tail:
            kept = positions.setdefault(word, [])
            if not kept or kept[-1] != TAIL_POSITION:
                if len(kept) < 256:
                    kept.append(TAIL_POSITION)
        # Words are letters and digits only: nothing in them needs quoting inside '…'.
        return " ".join(f"'{word}':{','.join(map(str, kept))}" for word, kept in positions.items())


def document(
    *, kind: str, key: str | None, title: str | None, data: JSON, content: str | None
) -> Document:
    """A record's searchable words: title, key, kind, every string in ``data``, then the words of
    its text content (``content``, already space-joined words)."""
    found: list[str] = []
    for text in (title, key, kind):
        if text:
            found.extend(words(text))
    for text in _strings(data):
        found.extend(words(text))
    if content:
        found.extend(content.split(" "))
    seen: set[str] = set()
    budget = DISTINCT_BYTES_MAX
    kept: list[str] = []
    for word in found:
        if word not in seen:
            size = len(word.encode()) + 8
            if size > budget:
                continue
            budget -= size
            seen.add(word)
        kept.append(word)
    return Document(head=kept[:HEAD_WORDS], tail=kept[HEAD_WORDS:])


# --- q -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    """One term of ``q``: a word (``prefix``: the query's last one), or a phrase of several."""

    words: tuple[str, ...]
    prefix: bool = False


@dataclass(frozen=True)
class TextQuery:
    include: tuple[Term, ...] = ()
    exclude: tuple[Term, ...] = ()


def _invalid(message: str, details: JSONObject) -> ArtifactError:
    return ArtifactError("invalid_query", message, details)


def parse_q(q: str) -> TextQuery:
    """``q`` as terms: words and ``"phrases"`` to include, ``-word`` / ``-"phrase"`` to exclude;
    the last term, when it is a word to include, also matches as a prefix. A query of no words, or
    past ``Q_MAX_CHARS`` characters or ``Q_MAX_WORDS`` words, is 400 ``invalid_query``."""
    if len(q) > Q_MAX_CHARS:
        raise _invalid(
            f"`q` is at most {Q_MAX_CHARS} characters.", {"field": "q", "max": Q_MAX_CHARS}
        )
    problem = text_problem(q)
    if problem:
        raise _invalid(f"`q` {problem}; remove that character.", {"field": "q"})
    terms: list[tuple[bool, tuple[str, ...]]] = []
    count = 0
    position = 0
    while position < len(q):
        char = q[position]
        excluded = False
        if char == "-" and position + 1 < len(q) and not q[position + 1].isspace():
            excluded = True
            position += 1
            char = q[position]
        if char == '"':
            end = q.find('"', position + 1)
            end = len(q) if end == -1 else end
            chunk = q[position + 1 : end]
            position = end + 1
        else:
            match = re.compile(r'[^\s"]*').match(q, position)
            end = match.end() if match else position + 1
            chunk = q[position : max(end, position + 1)]
            position = max(end, position + 1)
            if not excluded:
                # Outside quotes each word is its own term (``foo-bar`` is two words).
                for word in _query_words(chunk):
                    terms.append((False, (word,)))
                    count += 1
                continue
        found = _query_words(chunk)
        if found:
            terms.append((excluded, tuple(found)))
            count += len(found)
    if count > Q_MAX_WORDS:
        raise _invalid(
            f"`q` holds at most {Q_MAX_WORDS} words; it holds {count}.",
            {"field": "q", "max": Q_MAX_WORDS},
        )
    if not count:
        raise _invalid("`q` holds no words: a word is a run of letters and digits.", {"field": "q"})
    include = [Term(found) for excluded, found in terms if not excluded]
    exclude = tuple(Term(found) for excluded, found in terms if excluded)
    last_excluded, last = terms[-1]
    if not last_excluded and len(last) == 1:
        include[-1] = Term(last, prefix=True)
    return TextQuery(include=tuple(include), exclude=exclude)


def _query_words(text: str) -> list[str]:
    found = []
    for match in WORD.finditer(text):
        word = match.group().casefold()
        if len(word) > WORD_MAX_CHARS:
            raise _invalid(
                f"`q` has a word longer than {WORD_MAX_CHARS} characters, which is never indexed.",
                {"field": "q", "max": WORD_MAX_CHARS},
            )
        found.append(word)
    return found


# --- where ---------------------------------------------------------------------------------------

Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Condition:
    """``path`` (its segments) compared by ``op`` (one of ``OPERATORS``) with ``value``: a scalar,
    a list of scalars (``$in``, ``$nin``) or a bool (``$exists``)."""

    path: tuple[str, ...]
    op: str
    value: Scalar | tuple[Scalar, ...]


@dataclass(frozen=True)
class All:
    parts: tuple[Condition | All | Any_, ...] = field(default=())


@dataclass(frozen=True)
class Any_:
    parts: tuple[Condition | All | Any_, ...] = field(default=())


Where = Condition | All | Any_


class _Budget:
    def __init__(self) -> None:
        self.conditions = 0

    def spend(self, where: str) -> None:
        self.conditions += 1
        if self.conditions > WHERE_MAX_CONDITIONS:
            raise _invalid(
                f"`where` holds at most {WHERE_MAX_CONDITIONS} conditions.",
                {"field": "where", "part": where, "max": WHERE_MAX_CONDITIONS},
            )


def parse_where(where: str | JSON) -> Where:
    """``where`` (JSON text, or the parsed object) as conditions; 400 ``invalid_query`` whose
    ``details.part`` names what is malformed."""
    if isinstance(where, str):
        if len(where) > WHERE_MAX_CHARS:
            raise _invalid(
                f"`where` is at most {WHERE_MAX_CHARS} characters of JSON.",
                {"field": "where", "max": WHERE_MAX_CHARS},
            )
        try:
            where = json_loads(where, what="`where`", field="where")
        except ArtifactError as error:
            raise _invalid(error.message, {"field": "where", "part": "$"}) from None
    return _object(where, "$", 1, _Budget())


def _object(value: JSON, part: str, depth: int, budget: _Budget) -> Where:
    if not isinstance(value, dict):
        raise _invalid(
            f"`where` at {part}: expected a JSON object of conditions.",
            {"field": "where", "part": part},
        )
    if depth > WHERE_MAX_DEPTH:
        raise _invalid(
            f"`where` nests at most {WHERE_MAX_DEPTH} deep.",
            {"field": "where", "part": part, "max": WHERE_MAX_DEPTH},
        )
    parts: list[Where] = []
    for name, item in value.items():
        here = f"{part}.{name}" if part != "$" else name
        if name in ("$and", "$or"):
            if not isinstance(item, list) or not item:
                raise _invalid(
                    f"`where` at {here}: `{name}` takes a non-empty list of objects.",
                    {"field": "where", "part": here},
                )
            inner = tuple(
                _object(entry, f"{here}[{index}]", depth + 1, budget)
                for index, entry in enumerate(item)
            )
            parts.append(All(inner) if name == "$and" else Any_(inner))
        elif name.startswith("$"):
            raise _invalid(
                f"`where` at {here}: unknown operator `{name}` (at the top of an object only "
                "`$and` and `$or`).",
                {"field": "where", "part": here},
            )
        else:
            path = _path(name, here)
            parts.extend(_conditions(path, item, here, budget))
    if not parts:
        raise _invalid(
            f"`where` at {part}: an empty object holds no condition.",
            {"field": "where", "part": part},
        )
    return parts[0] if len(parts) == 1 else All(tuple(parts))


def _path(name: str, part: str) -> tuple[str, ...]:
    segments = tuple(name.split("."))
    if len(segments) > PATH_MAX_SEGMENTS or not all(SEGMENT.fullmatch(s) for s in segments):
        raise _invalid(
            f"`where` at {part}: a path is up to {PATH_MAX_SEGMENTS} names joined by dots, each "
            "a letter or _ then up to 63 letters, digits, _ or - (no brackets, quotes or $).",
            {"field": "where", "part": part},
        )
    return segments


def _scalar(value: JSON, part: str) -> Scalar:
    if isinstance(value, dict | list):
        raise _invalid(
            f"`where` at {part}: expected a JSON scalar (a string, number, true, false or null); "
            "name a nested field with a dotted path.",
            {"field": "where", "part": part},
        )
    if isinstance(value, str) and text_problem(value):
        raise _invalid(
            f"`where` at {part}: the string {text_problem(value)}.",
            {"field": "where", "part": part},
        )
    if isinstance(value, int) and not isinstance(value, bool):
        if not INT64_MIN <= value <= INT64_MAX:
            raise _invalid(
                f"`where` at {part}: integers are within 64 bits.",
                {"field": "where", "part": part},
            )
    if isinstance(value, float) and not abs(value) < 2.0**63:
        raise _invalid(
            f"`where` at {part}: numbers are below 2**63 in magnitude.",
            {"field": "where", "part": part},
        )
    return value


def _conditions(path: tuple[str, ...], value: JSON, part: str, budget: _Budget) -> list[Condition]:
    if not isinstance(value, dict):
        budget.spend(part)
        return [Condition(path, "$eq", _scalar(value, part))]
    if not value:
        raise _invalid(
            f"`where` at {part}: an empty operator object.", {"field": "where", "part": part}
        )
    found = []
    for op, operand in value.items():
        here = f"{part}.{op}"
        if op not in OPERATORS:
            raise _invalid(
                f"`where` at {here}: unknown operator `{op}`; the operators are "
                f"{', '.join(OPERATORS)} (a nested field is a dotted path).",
                {"field": "where", "part": here},
            )
        budget.spend(here)
        if op in ("$in", "$nin"):
            if not isinstance(operand, list) or not operand:
                raise _invalid(
                    f"`where` at {here}: `{op}` takes a non-empty list of scalars.",
                    {"field": "where", "part": here},
                )
            if len(operand) > WHERE_MAX_IN:
                raise _invalid(
                    f"`where` at {here}: `{op}` takes at most {WHERE_MAX_IN} values.",
                    {"field": "where", "part": here, "max": WHERE_MAX_IN},
                )
            items = tuple(_scalar(item, f"{here}[{i}]") for i, item in enumerate(operand))
            found.append(Condition(path, op, items))
        elif op == "$exists":
            if not isinstance(operand, bool):
                raise _invalid(
                    f"`where` at {here}: `$exists` takes true or false.",
                    {"field": "where", "part": here},
                )
            found.append(Condition(path, op, operand))
        elif op in COMPARE:
            scalar = _scalar(operand, here)
            if scalar is None or isinstance(scalar, bool):
                raise _invalid(
                    f"`where` at {here}: `{op}` compares with a number or a string.",
                    {"field": "where", "part": here},
                )
            found.append(Condition(path, op, scalar))
        else:
            found.append(Condition(path, op, _scalar(operand, here)))
    return found


def check_q(q: str | None) -> TextQuery | None:
    return None if q is None else parse_q(q)


def check_where(where: str | JSON | None) -> Where | None:
    return None if where is None else parse_where(where)
