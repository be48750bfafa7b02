"""JSON Schema kinds (API.md "Kinds declared over HTTP"): checked once when declared, compiled once
per declaration, then used on every tag to fill in defaults and validate.

Draft 2020-12 with the ``jsonschema`` library. Nothing is ever fetched: every ``$ref`` must be local
(``#…``) and resolve inside the schema, and the registry references resolve through has no way to
retrieve anything else (``_refuse``), so even a reference this module missed cannot reach the network.

What a caller can make validation cost is bounded (API.md "Limits on what a caller can make the
server do"; docs/architecture.md "Schemas that cannot stall the server"):

* every regular expression of a schema (``pattern``, ``patternProperties``, and so ``propertyNames``
  through its subschema's ``pattern``) runs on RE2, whose matching is linear in the text and
  releases the GIL: ``Validator`` is jsonschema's draft 2020-12 validator extended, through its
  public ``validators.extend``, with keyword functions of our own for every keyword that used
  Python's ``re`` (``pattern``, ``patternProperties``, ``additionalProperties``,
  ``unevaluatedProperties``); ``check`` refuses a pattern RE2 cannot run (backreferences,
  lookaround…) and checks the schema against the meta-schema without jsonschema's format checker
  (its ``regex`` format compiles with ``re``), so no pattern a caller wrote ever reaches ``re``.
  ``format`` stays an annotation (no format checker on data);
* ``check`` refuses a schema under which one value could be checked against more than
  ``MAX_APPLICATIONS`` subschemas (``$ref`` fan-out through ``allOf``/``anyOf``/``oneOf``/``not``/
  ``if``/``dependentSchemas``), computed once per node at PUT, and level by level of the data for
  fan-out that multiplies as the data nests (``_Walk.descent``);
* ``CompiledSchema.parse`` takes a budget in milliseconds of this thread's CPU time: every
  applicator keyword the validator applies, every pattern matched and every step of the defaults'
  walk counts a step, every ``CLOCK_EVERY`` steps the clock is read, and past the budget
  ``TooCostly`` ends it; a match whose worst case would pass it is not started (``search``);
* ``Share`` holds each agent to a fair share of the process's validation time: the CPU time
  ``CompiledSchema.parse`` measures is charged to the agent's bucket, and an agent in debt waits
  before its next validation (``registry.SchemaKind.parse`` says how long, and when it refuses);
* ``uniqueItems`` hashes the items (jsonschema compares unhashable ones pairwise: quadratic).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias
from urllib.parse import quote, urljoin

import orjson
import re2
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, relevance
from jsonschema.protocols import Validator as SchemaValidator
from jsonschema.validators import extend
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012

from artifacts_app.jsontypes import JSON, JSONObject

SCHEMA_MAX_BYTES = 64 * 1024
DIALECT = "https://json-schema.org/draft/2020-12/schema"
ERRORS_LISTED = 50
# RE2 programs: one pattern's instructions at most, a schema's in all, the process's cache in all.
MAX_PROGRAM = 5_000
MAX_SCHEMA_PROGRAM = 50_000
CACHE_PROGRAM = 500_000
# RE2's worst case measured on this project's machine: ~25 ns per byte of text per instruction
# (its DFA's cache thrashing, so its NFA runs; docs/benchmarks.md). A match whose worst case
# passes what is left of the budget is not started; under INLINE_STEPS it always runs (~2.5 ms).
STEPS_PER_MS = 40_000
INLINE_STEPS = 100_000
ROOT_URI = (
    "urn:agent-artifacts:kind-schema"  # a schema without `$id`, as the registry also holds it
)
# How many subschemas one value may be checked against, counting each one a `$ref`, `allOf`,
# `anyOf`, `oneOf`, `not`, `if`/`then`/`else` or `dependentSchemas` applies to that same value
# (docs/architecture.md says why 1,000). The fan-out d_i = allOf[$ref d_i+1, $ref d_i+1] passes it
# at depth 7 (510, each `{"$ref"}` branch counting too) and is refused from depth 8 (1,021).
MAX_APPLICATIONS = 1000
QUOTED = 200  # characters of a value quoted in a refusal's message


def cut(text: str, limit: int = QUOTED) -> str:
    """``text`` up to ``limit`` characters, marked with "…" where it was cut."""
    return text if len(text) <= limit else text[:limit] + "…"


def shown(value: str) -> str:
    """``value`` as a refusal quotes it: its repr, of its first ``QUOTED`` characters only."""
    return repr(value) if len(value) <= QUOTED else repr(value[:QUOTED]) + "…"


DATA_DEPTH = 100  # how deep data nests (values.MAX_DEPTH): the levels the fan-out bound looks at

# Keywords whose value is one subschema, a list of them, or a map of names to them (2020-12, plus
# the older `definitions`, which a `$ref` may still point into).
_ONE = (
    "additionalProperties",
    "propertyNames",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords that apply their subschemas to the same value: a loop through only these never ends.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas",)
_MISSING = object()


class SchemaProblem(Exception):
    """Why a schema is refused; ``at`` is the JSON path inside the schema."""

    def __init__(self, message: str, at: list[str | int]) -> None:
        super().__init__(message)
        self.message = message
        self.at = at


class TooCostly(Exception):
    """Validation passed its budget (``CompiledSchema.parse``): nothing was decided."""

    def __init__(self, budget_ms: int) -> None:
        super().__init__(f"validation took more than {budget_ms} ms")
        self.budget_ms = budget_ms


def _refuse(uri: str) -> Resource:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class


# --- regular expressions, on RE2 ------------------------------------------------------------
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is the caller's, answered with 400, not logged
# RE2's memory per pattern (its program and its DFA's cache): programs past ~5,400 instructions
# fail to compile within ~3 ms ("pattern too large") instead of taking 100+ ms and megabytes
# (`\p{L}{100}`: 120,000 instructions, 120 ms with RE2's default 8 MiB).
_RE2_OPTIONS.max_mem = 512 * 1024
_HEX = frozenset("0123456789abcdefABCDEF")


def _ecma_escapes(pattern: str) -> str:
    """``pattern`` with ECMA-262's ``\\uXXXX`` and ``\\u{X…}`` escapes (JSON Schema's dialect) written
    as RE2's ``\\x{X…}``, a surrogate pair as the one code point it stands for. A scan, not a
    regular expression: the caller's text reaches no backtracking engine, not even here."""
    if "\\u" not in pattern:
        return pattern
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern[i] != "\\" or i + 1 == n:
            out.append(pattern[i])
            i += 1
            continue
        point, end = _code_point(pattern, i)
        if point is None:
            out.append(pattern[i : i + 2])  # `\\\\` or another escape: RE2 reads it as it is
            i += 2
            continue
        if 0xD800 <= point < 0xDC00:
            low, after = _code_point(pattern, end)
            if low is not None and 0xDC00 <= low < 0xE000:
                point, end = 0x10000 + ((point - 0xD800) << 10) + (low - 0xDC00), after
        out.append(f"\\x{{{point:X}}}")
        i = end
    return "".join(out)


def _code_point(pattern: str, i: int) -> tuple[int | None, int]:
    """The code point of a ``\\u`` escape at ``i`` and the index after it, or ``(None, i)``."""
    if pattern[i : i + 2] != "\\u":
        return None, i
    four = pattern[i + 2 : i + 6]
    if len(four) == 4 and set(four) <= _HEX:
        return int(four, 16), i + 6
    if pattern[i + 2 : i + 3] == "{":
        end = pattern.find("}", i + 3)
        digits = pattern[i + 3 : end]
        if end != -1 and 1 <= len(digits) <= 6 and set(digits) <= _HEX:
            return int(digits, 16), end + 1
    return None, i


class _Resolved(Protocol):
    """What a reference names, and the resolver for references inside it (``Resolver.lookup``)."""

    @property
    def contents(self) -> JSON: ...
    @property
    def resolver(self) -> Resolver: ...


class Resolver(Protocol):
    """What is used of a ``referencing`` resolver (``Registry.resolver``; the library exports
    its class only for typing)."""

    def lookup(self, ref: str) -> _Resolved: ...
    def in_subresource(self, subresource: Resource[JSON]) -> Resolver: ...


class RE2Pattern(Protocol):
    """What is used of a pattern compiled by RE2 (``re2.compile``)."""

    programsize: int

    def search(self, text: bytes) -> object | None: ...


class _RE2Set(Protocol):
    """What is used of a compiled one-pattern ``re2.Set``."""

    def Match(self, text: bytes) -> list[int] | None: ...  # noqa: N802  # (RE2's own name)


@dataclass(frozen=True)
class _Regex:
    """One pattern on RE2: ``regexp`` for an exact answer, and ``quick``, the same pattern as a
    one-pattern ``re2.Set`` (its DFA only, ~1 µs a call where the wrapper's search costs ~9 µs):
    when ``quick`` finds a match, that is the answer; when it does not, ``regexp`` confirms (a
    DFA that gives up on a thrashing pattern answers "no match" without saying so)."""

    regexp: RE2Pattern
    quick: _RE2Set
    size: int  # RE2 instructions, both programs together (what the cache holds)
    steps: int  # the worst case's cost per byte of text: ``regexp``'s instructions


_cache: dict[str, _Regex] = {}  # pattern -> compiled, oldest first
_cached_program = 0  # the cached programs' sizes added up
_cache_lock = threading.Lock()


def _compiled(pattern: str) -> _Regex:
    """``pattern`` on RE2 (``re2.error`` when RE2 cannot run it), cached per process: at most
    ``CACHE_PROGRAM`` instructions in all, oldest out first (RE2 holds ~50 bytes an
    instruction)."""
    global _cached_program
    found = _cache.get(pattern)
    if found is not None:
        return found
    translated = _ecma_escapes(pattern)
    regexp = re2.compile(translated, _RE2_OPTIONS)
    quick = re2.Set.SearchSet(_RE2_OPTIONS)
    quick.Add(translated)
    quick.Compile()
    made = _Regex(regexp, quick, 2 * regexp.programsize, regexp.programsize)
    with _cache_lock:
        if pattern not in _cache:
            _cache[pattern] = made
            _cached_program += made.size
        while _cached_program > CACHE_PROGRAM and len(_cache) > 1:
            _cached_program -= _cache.pop(next(iter(_cache))).size
    return made


def regex(pattern: str) -> RE2Pattern:
    """``pattern`` compiled by RE2 (``re2.error`` when RE2 cannot run it)."""
    return _compiled(pattern).regexp


def regex_problem(pattern: str) -> str | None:
    """Why RE2 cannot run ``pattern`` (or will not: a program past ``MAX_PROGRAM``), or None."""
    quoted = shown(pattern)
    try:
        size = regex(pattern).programsize
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        why = cut(why)
        if "too large" in why or "compile Set" in why:  # past RE2's memory (``max_mem``)
            size = MAX_PROGRAM + 1
        else:
            return (
                f"the regular expression {quoted} cannot run on RE2, the linear-time engine "
                f"schemas run on here ({why}); backreferences and lookaround are not supported"
            )
    if size > MAX_PROGRAM:
        return (
            f"the regular expression {quoted} compiles to more than {MAX_PROGRAM:,} RE2 "
            "instructions, the limit (a long bounded repetition such as `.{1,1000}` or "
            "`\\p{L}{100}`: use maxLength)"
        )
    return None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (JSON Schema's unanchored match).

    RE2 is linear in the text, but its worst case (its DFA's cache thrashing, so its NFA runs) costs
    about ``1 / STEPS_PER_MS`` ms per byte per instruction of the program, and a match cannot be
    interrupted: a match whose worst case passes what is left of the budget is not started."""
    _spend()  # one step: loops over keys and patterns look at the budget through here
    compiled = _compiled(pattern)
    run = _RUN.get()
    if run is not None:
        steps = compiled.steps * (len(text) if text.isascii() else 4 * len(text))
        left_ms = (run.deadline - time.thread_time()) * 1000
        if steps > INLINE_STEPS and steps > left_ms * STEPS_PER_MS:
            raise TooCostly(run.budget_ms)
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8, so match it as U+FFFD
        encoded = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()
    return compiled.quick.Match(encoded) is not None or compiled.regexp.search(encoded) is not None


# --- the budget -----------------------------------------------------------------------------
@dataclass
class _Run:
    """One ``parse``: when its budget ends (in this thread's CPU time, so that waiting for the GIL
    behind other requests costs it nothing), and the schema it runs (for unevaluatedProperties)."""

    deadline: float
    budget_ms: int
    compiled: CompiledSchema
    steps: int = 0


_RUN: ContextVar[_Run | None] = ContextVar("artifacts_jsonschema_run", default=None)
CLOCK_EVERY = 16  # steps between looks at the clock (a look costs ~0.5 µs, a keyword ~2 µs)


class ShareExceeded(Exception):
    """The agent's debt would take longer than the wait allowed to pay back (``Share.admit``)."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(f"the agent would wait {wait_s:.2f} s")
        self.wait_s = wait_s


@dataclass
class _Bucket:
    balance_ms: float  # may go below zero: the agent's debt
    at: float  # the share clock when ``balance_ms`` was last brought up to date
    waits: int = 0  # tags made to wait, and for how long in all (what the tests and the bench read)
    waited_s: float = 0.0


class Share:
    """A fair share of validation time per agent, in one process: a token bucket per agent of
    ``rate_ms`` milliseconds of validation CPU per second of the clock, holding at most
    ``burst_ms`` (a full bucket is where every agent starts). ``charge`` takes from it the CPU
    time a validation actually spent (whatever its outcome); ``admit`` answers how long a tag must
    wait before validating: nothing while the bucket is not in debt, else the time the debt takes
    to be paid back, and ``ShareExceeded`` past ``max_wait_s``. So an agent that costs little is
    never slowed, and one agent cannot take more than ``rate_ms`` per second of the process however
    many requests it sends at once (concurrent waiters each pay the debt they saw, then each charge
    what they spend, which the next of them pays). Thread-safe: one lock, held for a few
    arithmetic operations, never while waiting. The rate is passed on every call (settings may
    change while the process runs; tests change them)."""

    MAX_BUCKETS = 4096  # past it, full buckets (agents owing nothing) are forgotten

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

    def _bucket(self, agent: str, rate_ms: float, burst_ms: float, now: float) -> _Bucket:
        bucket = self._buckets.get(agent)
        if bucket is None:
            if len(self._buckets) >= self.MAX_BUCKETS:
                self._forget_full(rate_ms, burst_ms, now)
            bucket = self._buckets[agent] = _Bucket(burst_ms, now)
        else:
            bucket.balance_ms = min(burst_ms, bucket.balance_ms + (now - bucket.at) * rate_ms)
            bucket.at = now
        return bucket

    def _forget_full(self, rate_ms: float, burst_ms: float, now: float) -> None:
        for agent, bucket in list(self._buckets.items()):
            if bucket.balance_ms + (now - bucket.at) * rate_ms >= burst_ms:
                del self._buckets[agent]

    def admit(self, agent: str, rate_ms: float, burst_ms: float, max_wait_s: float) -> float:
        """Seconds ``agent``'s next validation must wait (0.0 when it owes nothing);
        ``ShareExceeded`` when that is more than ``max_wait_s``. The wait is counted as made."""
        with self._lock:
            bucket = self._bucket(agent, rate_ms, burst_ms, self.clock())
            if bucket.balance_ms >= 0:
                return 0.0
            wait_s = -bucket.balance_ms / rate_ms
            if wait_s > max_wait_s:
                raise ShareExceeded(wait_s)
            bucket.waits += 1
            bucket.waited_s += wait_s
            return wait_s

    def charge(self, agent: str, spent_s: float, rate_ms: float, burst_ms: float) -> None:
        """Take ``spent_s`` seconds of validation CPU from ``agent``'s bucket."""
        with self._lock:
            bucket = self._bucket(agent, rate_ms, burst_ms, self.clock())
            bucket.balance_ms -= spent_s * 1000

    def state(self, agent: str) -> _Bucket | None:
        """A copy of ``agent``'s bucket as last brought up to date (None: never charged)."""
        with self._lock:
            bucket = self._buckets.get(agent)
            return None if bucket is None else _Bucket(**vars(bucket))

    def forget(self, agent: str | None = None) -> None:
        """Drop one agent's bucket, or all of them."""
        with self._lock:
            if agent is None:
                self._buckets.clear()
            else:
                self._buckets.pop(agent, None)


SHARE = Share()  # the process's: every validation of a kind declared over HTTP is charged here


def _spend() -> None:
    """One step of validation; every ``CLOCK_EVERY`` steps, ``TooCostly`` past the budget."""
    run = _RUN.get()
    if run is not None:
        run.steps += 1
        if not run.steps % CLOCK_EVERY and time.thread_time() > run.deadline:
            raise TooCostly(run.budget_ms)


# --- keywords -------------------------------------------------------------------------------
def _bad_regex(pattern: str) -> ValidationError | None:
    """A stored schema from before patterns ran on RE2 may hold one it cannot run: the tag is
    refused (never run on ``re``), naming the pattern."""
    try:
        _compiled(pattern)
    except re2.error:
        return ValidationError(
            f"the kind's schema must be declared again: {regex_problem(pattern)}"
        )
    return None


def _pattern(
    validator: SchemaValidator, pattern: str, instance: JSON, schema: JSON
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    bad = _bad_regex(pattern)
    if bad is not None:
        yield bad
    elif not search(pattern, instance):
        # The value quoted by its first QUOTED characters: a large string quoted whole made a
        # message (and a repr) as large as the data, for each pattern it failed, built only to
        # be cut when the refusal is made.
        yield ValidationError(f"{shown(instance)} does not match {pattern!r}")


def _pattern_properties(
    validator: SchemaValidator, patterns: JSONObject, instance: JSON, schema: JSON
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        bad = _bad_regex(pattern)
        if bad is not None:
            yield bad
            continue
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _matched(schema: JSONObject, key: str) -> bool:
    """Whether ``properties`` or ``patternProperties`` of ``schema`` takes ``key``."""
    properties = schema.get("properties")
    if isinstance(properties, dict) and key in properties:
        return True
    patterns = schema.get("patternProperties")
    return isinstance(patterns, dict) and any(
        _bad_regex(p) is None and search(p, key) for p in patterns
    )


def _additional_properties(
    validator: SchemaValidator, extra: JSON, instance: JSON, schema: JSON
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = [key for key in instance if not _matched(schema, key)]
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            listed = ", ".join(repr(each) for each in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


def _unevaluated_properties(
    validator: SchemaValidator, unevaluated: JSON, instance: JSON, schema: JSON
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    run = _RUN.get()
    # Outside ``parse`` (the validator used on its own) the schema at hand is all there is.
    compiled = run.compiled if run is not None else CompiledSchema(schema)
    evaluated = compiled.evaluated_keys(instance, schema)
    invalid = [
        key
        for key in instance
        if key not in evaluated
        and not _is_valid(validator.descend(instance[key], unevaluated, path=key, schema_path=key))
    ]
    if not invalid:
        return
    listed = ", ".join(repr(each) for each in sorted(invalid, key=str))
    verb = "was" if len(invalid) == 1 else "were"
    if unevaluated is False:
        yield ValidationError(
            f"Unevaluated properties are not allowed ({listed} {verb} unexpected)"
        )
    else:
        yield ValidationError(
            "Unevaluated properties are not valid under the given schema "
            f"({listed} {verb} unevaluated and invalid)"
        )


def _is_valid(errors: Iterator[ValidationError]) -> bool:
    return next(errors, None) is None


def _canonical(value: JSON) -> Hashable:
    """A hashable form of a JSON value, equal exactly when JSON Schema calls two values equal
    (``1`` and ``1.0`` are, ``true`` and ``1`` are not, objects ignore key order)."""
    kind = type(value)
    if kind is str or kind is int or value is None:
        return value  # a bool is not an int here (type(True) is bool): True and 1 stay apart
    if kind is bool:
        return (bool, value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is list:
        return (list, tuple(_canonical(item) for item in value))
    if kind is dict:
        return (dict, frozenset((key, _canonical(item)) for key, item in value.items()))
    return (object, id(value))


def _unique_items(
    validator: SchemaValidator, unique: JSON, instance: JSON, schema: JSON
) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Hashable] = set()
    for i, item in enumerate(instance):
        if not i % 16:
            _spend()
        key = _canonical(item)
        if key in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(key)


# A keyword's implementation, as jsonschema calls it: the validator, the keyword's value in the
# schema, the instance, and the schema node.
Keyword: TypeAlias = Callable[
    [SchemaValidator, JSON, JSON, JSONObject], Iterable[ValidationError] | None
]

_OWN: dict[str, Keyword] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "unevaluatedProperties": _unevaluated_properties,
    "uniqueItems": _unique_items,
}


# The keywords that apply subschemas (to the value or into it): all the work of a validation
# passes through them, a bounded amount (the keywords of one schema node) between two of them.
_APPLICATORS = frozenset(
    {
        "$ref",
        "$dynamicRef",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "dependentSchemas",
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "items",
        "prefixItems",
        "contains",
        "unevaluatedItems",
    }
)


def _metered(keyword: Keyword) -> Keyword:
    """``keyword`` counting a step each time it is applied (``_spend``): every descent into the
    data and every subschema applied in place goes through one, so no run passes its budget by
    more than ``CLOCK_EVERY`` steps and one keyword's own work (each linear: RE2 under its own
    estimate, hashed ``uniqueItems`` counting its items, the rest bounded by the schema)."""

    def metered(
        validator: SchemaValidator, value: JSON, instance: JSON, schema: JSONObject
    ) -> Iterable[ValidationError] | None:
        run = _RUN.get()
        if run is not None:
            run.steps += 1
            if not run.steps % CLOCK_EVERY and time.thread_time() > run.deadline:
                raise TooCostly(run.budget_ms)
        return keyword(validator, value, instance, schema)

    return metered


Validator: type[SchemaValidator] = extend(
    Draft202012Validator,
    validators={
        name: _metered(found) if name in _APPLICATORS else found
        for name, keyword in Draft202012Validator.VALIDATORS.items()
        for found in [_OWN.get(name, keyword)]
    },
)


def subschemas(node: JSONObject) -> Iterator[tuple[list[str | int], JSON]]:
    """Each subschema of ``node`` (one level down) with its path below ``node``."""
    for key in _ONE:
        if key in node:
            yield [key], node[key]
    for key in _MANY:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield [key, i], sub
    for key in _MAP:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                yield [key, name], sub


@dataclass
class _Walk:
    """One pass over a schema: every reference local and resolvable, no loop that never descends,
    and no node applying more than ``MAX_APPLICATIONS`` subschemas to one value (each node's count
    computed once: ``cost``)."""

    done: set[int] = field(default_factory=set)
    in_place: list[int] = field(default_factory=list)  # applied to the same value, in order
    cost: dict[int, int] = field(default_factory=dict)  # subschemas applied to one value, by node
    program: int = 0  # RE2 instructions of the patterns seen
    inner: dict[int, list[JSON]] = field(default_factory=dict)  # in-place subschemas, by node
    order: list[JSONObject] = field(default_factory=list)  # each node after its in-place ones

    def walk(self, node: JSON, resolver: Resolver, at: list[str | int]) -> int:
        """How many subschemas ``node`` applies to one value, itself included."""
        if not isinstance(node, dict):
            return 1
        if id(node) in self.done:
            return self.cost[id(node)]
        if id(node) in self.in_place:
            raise SchemaProblem(
                "a `$ref` leads back to the same schema without going into the data, so "
                "validation would never end",
                at,
            )
        if at and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        self.in_place.append(id(node))
        total = 1
        inner: list[JSON] = []  # what the node applies to the same value
        try:
            for key in ("$ref", "$dynamicRef"):
                ref = node.get(key)
                if isinstance(ref, str):
                    target = self.reference(key, ref, resolver, [*at, key])
                    total += self.cost.get(id(target), 1)
                    inner.append(target)
            for key in _IN_PLACE_ONE:
                if key in node:
                    total += self.walk(node[key], resolver, [*at, key])
                    inner.append(node[key])
            for key in _IN_PLACE_MANY:
                for i, sub in enumerate(node.get(key) or []):
                    total += self.walk(sub, resolver, [*at, key, i])
                    inner.append(sub)
            for key in _IN_PLACE_MAP:
                if isinstance(node.get(key), dict):
                    for name, sub in node[key].items():
                        total += self.walk(sub, resolver, [*at, key, name])
                        inner.append(sub)
        finally:
            self.in_place.pop()
        if total > MAX_APPLICATIONS:
            raise SchemaProblem(
                f"one value would be checked against more than {MAX_APPLICATIONS:,} subschemas "
                f"here ({total:,}: `$ref`s fanning out through allOf, anyOf, oneOf, not, if or "
                "dependentSchemas), which costs too much per byte of data; share fewer branches",
                at,
            )
        self.cost[id(node)] = total
        self.inner[id(node)] = inner
        self.order.append(node)
        self.done.add(id(node))
        self.patterns(node, at)
        saved, self.in_place = self.in_place, []  # below here the data is one level down
        try:
            for path, sub in subschemas(node):
                if path[0] not in (*_IN_PLACE_ONE, *_IN_PLACE_MANY, *_IN_PLACE_MAP):
                    self.walk(sub, resolver, [*at, *path])
        finally:
            self.in_place = saved
        return total

    def patterns(self, node: JSONObject, at: list[str | int]) -> None:
        """Each regular expression of ``node`` runs on RE2, and the schema's fit in memory."""
        found: list[tuple[str, list[str | int]]] = []
        if isinstance(node.get("pattern"), str):
            found.append((node["pattern"], [*at, "pattern"]))
        if isinstance(node.get("patternProperties"), dict):
            found += [(p, [*at, "patternProperties", p]) for p in node["patternProperties"]]
        for pattern, where in found:
            problem = regex_problem(pattern)
            if problem:
                raise SchemaProblem(problem, where)
            self.program += regex(pattern).programsize
            if self.program > MAX_SCHEMA_PROGRAM:
                raise SchemaProblem(
                    f"its regular expressions compile to more than {MAX_SCHEMA_PROGRAM:,} RE2 "
                    "instructions in all; use fewer or simpler patterns (maxLength for lengths)",
                    where,
                )

    def reference(self, key: str, ref: str, resolver: Resolver, at: list[str | int]) -> JSON:
        """The node ``ref`` names, walked."""
        if not ref.startswith("#"):
            raise SchemaProblem(
                f"`{key}` {ref!r} is not local: the server never fetches anything, so put what it "
                "names under `$defs` and refer to it as `#/$defs/<name>`",
                at,
            )
        try:
            resolved = resolver.lookup(ref)
        except Unresolvable:
            raise SchemaProblem(
                f"`{key}` {ref!r} points at nothing inside this schema", at
            ) from None
        self.walk(resolved.contents, resolved.resolver, at)
        return resolved.contents

    def descent(self, root: JSONObject) -> None:
        """Refuse fan-out that multiplies as the data nests (``items`` whose ``anyOf`` branches
        both lead back, ``contains`` beside ``items``…): for each level of the data, level by
        level, how many subschemas one value there can be checked against (per node: its in-place
        subschemas' counts, plus what it applies to one key or item of the level above, the worst
        kind of slot), until that settles, passes ``MAX_APPLICATIONS`` or the data's depth."""
        previous: dict[int, int] = dict(self.cost)
        cap = MAX_APPLICATIONS + 1
        for depth in range(1, DATA_DEPTH + 1):
            slots: dict[int, tuple[int, int, int]] = {}  # per kind of slot: key, item, name
            for node in self.order:  # in-place subschemas before the nodes that apply them
                key, item, name = _slots(node, previous, depth == 1)
                for sub in self.inner[id(node)]:
                    if isinstance(sub, dict):
                        more = slots.get(id(sub), (0, 0, 0))
                        key, item, name = key + more[0], item + more[1], name + more[2]
                slots[id(node)] = (min(key, cap), min(item, cap), min(name, cap))
            current = {found: max(counts) for found, counts in slots.items()}
            if current.get(id(root), 0) > MAX_APPLICATIONS:
                raise SchemaProblem(
                    f"a value {depth} levels deep in the data would be checked against more than "
                    f"{MAX_APPLICATIONS:,} subschemas (references fanning out again at each level "
                    "of the data), which costs too much per byte of data; share fewer branches",
                    [],
                )
            if current == previous:
                return
            previous = current


def _slots(node: JSONObject, counts: dict[int, int], first: bool) -> tuple[int, int, int]:
    """How many subschemas ``node`` applies to one property value, to one item and to one property
    name of a value, at most: each counted as ``counts`` says (a boolean schema: 1 on the first
    level, 0 below). Kept apart because a value is an object or an array, never both: the
    in-place subschemas' counts add up per kind, and the worst kind counts."""

    def count(sub: JSON) -> int:
        return counts.get(id(sub), 0) if isinstance(sub, dict) else int(first)

    def at_most_one(*subs: JSON) -> int:  # one `properties` entry takes a key, one prefix an item
        return max((count(sub) for sub in subs), default=0)

    found = node.get("properties")
    properties: JSONObject = found if isinstance(found, dict) else {}
    found = node.get("patternProperties")
    patterns: JSONObject = found if isinstance(found, dict) else {}
    found = node.get("prefixItems")
    prefix: list[JSON] = found if isinstance(found, list) else []
    key = (
        at_most_one(
            *properties.values(), *(node[k] for k in ("additionalProperties",) if k in node)
        )
        + sum(count(sub) for sub in patterns.values())
        + (count(node["unevaluatedProperties"]) if "unevaluatedProperties" in node else 0)
    )
    item = at_most_one(*prefix, *(node[k] for k in ("items",) if k in node)) + sum(
        count(node[k]) for k in ("contains", "unevaluatedItems") if k in node
    )
    name = count(node["propertyNames"]) if "propertyNames" in node else 0
    return key, item, name


def check(schema: JSON) -> None:
    """Refuse (``SchemaProblem``) a schema that is not a valid draft 2020-12 JSON Schema object,
    is larger than 64 KiB, names another dialect, has a reference that is not local, a regular
    expression RE2 cannot run, or a fan-out past ``MAX_APPLICATIONS``."""
    if not isinstance(schema, dict):
        raise SchemaProblem("a schema is a JSON object (or null for none)", [])
    size = len(orjson.dumps(schema))
    if size > SCHEMA_MAX_BYTES:
        raise SchemaProblem(
            f"the schema is {size} bytes as JSON; the limit is {SCHEMA_MAX_BYTES} (64 KiB)", []
        )
    dialect = schema.get("$schema")
    if dialect is not None and str(dialect).rstrip("#") != DIALECT:
        raise SchemaProblem(
            f"`$schema` is {dialect!r}; schemas here are draft 2020-12: use {DIALECT!r} or leave "
            "it out",
            ["$schema"],
        )
    # jsonschema's check_schema on our validator (the meta-schema's own patterns on RE2 too) and
    # without its format checker, whose `regex` format compiles every pattern with `re`: the walk
    # below compiles them on RE2, one at a time, and stops at the first it refuses.
    for exc in Validator(Validator.META_SCHEMA).iter_errors(schema):
        at = list(exc.absolute_path)
        where = "/".join(str(p) for p in at) or "(root)"
        raise SchemaProblem(f"not a valid JSON Schema at {where}: {exc.message}", at)
    try:
        walk = _Walk()
        walk.walk(schema, _registry(schema)[1], [])
        walk.descent(schema)
    except RecursionError:
        raise SchemaProblem(
            "its references nest too deeply to be followed (a chain of `$ref`s hundreds long)", []
        ) from None


def _registry(schema: JSONObject) -> tuple[Registry[JSON], Resolver]:
    resource = DRAFT202012.create_resource(schema)
    registry: Registry[JSON] = Registry(retrieve=_refuse)  # type: ignore[call-arg]  # attrs
    registry = registry.with_resource(resource.id() or "", resource)
    if not resource.id():  # also under a name a validator of its own can point at (``_holds``)
        registry = registry.with_resource(ROOT_URI, resource)
    registry = registry.crawl()
    return registry, registry.resolver(base_uri=resource.id() or "")


class CompiledSchema:
    """A checked schema, ready for tags: ``parse`` fills in defaults then validates."""

    def __init__(self, schema: JSONObject) -> None:
        self.schema = schema
        self.registry, self.resolver = _registry(schema)
        self.validator = Validator(schema, registry=self.registry)
        # Most schemas have no default: those skip the walk (a property *named* "default" only
        # costs the walk, which then fills nothing).
        self.fills = b'"default"' in orjson.dumps(schema)
        self._uris: dict[int, str] | None = None  # for unevaluatedProperties: node -> its URI
        self._at: dict[str, SchemaValidator] = {}

    def parse(
        self,
        data: JSON,
        budget_ms: int | None = None,
        spent: Callable[[float], None] | None = None,
    ) -> tuple[JSON, list[JSONObject]]:
        """``data`` with the defaults of absent object properties filled in (recursively, inside
        objects that are present), and its problems as ``{"type", "loc", "msg", "input"}`` like
        pydantic's (empty when it is valid). ``data`` itself is never changed. Past ``budget_ms``
        milliseconds of work, ``TooCostly``. ``spent`` is told the seconds of this thread's CPU
        time the call took, however it ended (the measure the budget is taken from)."""
        started = time.thread_time()
        deadline = started + budget_ms / 1000 if budget_ms is not None else float("inf")
        token = _RUN.set(_Run(deadline, budget_ms or 0, self))
        try:
            filled = self._fill(self.schema, data, self.resolver, 0) if self.fills else data
            problems = sorted(self.validator.iter_errors(filled), key=relevance)
        except RecursionError:  # data and references nested past Python's stack: too costly
            raise TooCostly(budget_ms or 0) from None
        finally:
            _RUN.reset(token)
            if spent is not None:
                spent(time.thread_time() - started)
        return filled, _details(problems[:ERRORS_LISTED])

    def _valid(self, schema: JSON, value: JSON) -> bool:
        return bool(self.validator.evolve(schema=schema).is_valid(value))

    # -- unevaluatedProperties: which keys the schema's other keywords evaluated ----------------
    def evaluated_keys(self, instance: JSONObject, schema: JSON) -> set[str]:
        """The keys of ``instance`` that ``schema`` evaluates in place (draft 2020-12's
        annotations: properties, patternProperties on RE2, additionalProperties,
        unevaluatedProperties, and what the in-place subschemas that hold evaluate)."""
        found: set[str] = set()
        self._evaluated(instance, schema, found, 0)
        return found

    def _evaluated(self, instance: JSONObject, schema: JSON, found: set[str], depth: int) -> None:
        _spend()
        if not isinstance(schema, dict) or depth > 100:
            return
        for key in ("$ref", "$dynamicRef"):
            ref = schema.get(key)
            if isinstance(ref, str):
                target = self._lookup(schema, ref)
                if target is not None:
                    self._evaluated(instance, target, found, depth + 1)
        properties = schema.get("properties")
        if isinstance(properties, dict):
            found.update(key for key in instance if key in properties)
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict):
            found.update(
                key
                for key in instance
                for pattern in patterns
                if _bad_regex(pattern) is None and search(pattern, key)
            )
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            if keyword in schema:
                sub = schema[keyword]
                found.update(key for key, value in instance.items() if self._holds(sub, value))
        dependent = schema.get("dependentSchemas")
        if isinstance(dependent, dict):
            for name, sub in dependent.items():
                if name in instance:
                    self._evaluated(instance, sub, found, depth + 1)
        for keyword in ("allOf", "oneOf", "anyOf"):
            for sub in schema.get(keyword) or []:
                if self._holds(sub, instance):
                    self._evaluated(instance, sub, found, depth + 1)
        if "if" in schema:
            if self._holds(schema["if"], instance):
                self._evaluated(instance, schema["if"], found, depth + 1)
                self._evaluated(instance, schema.get("then"), found, depth + 1)
            else:
                self._evaluated(instance, schema.get("else"), found, depth + 1)

    def _holds(self, node: JSON, value: JSON) -> bool:
        """Whether ``value`` is valid under ``node``, its references resolved where it sits."""
        if isinstance(node, bool):
            return node
        uri = self._uri(node)
        if uri is None:
            return False
        validator = self._at.get(uri)
        if validator is None:  # public door: a root `{"$ref": <where node sits>}`
            validator = self._at[uri] = Validator({"$ref": uri}, registry=self.registry)
        return bool(validator.is_valid(value))

    def _lookup(self, node: JSON, ref: str) -> JSON:
        uri = self._uri(node)
        if uri is None:
            return None
        base = uri.partition("#")[0]
        try:
            return self.registry.resolver(base_uri=base).lookup(ref).contents
        except Unresolvable:
            return None

    def _uri(self, node: JSON) -> str | None:
        if self._uris is None:
            uris: dict[int, str] = {}
            root = str(self.schema.get("$id") or ROOT_URI).partition("#")[0]
            _locate(self.schema, root, "", uris)
            self._uris = uris
        return self._uris.get(id(node))

    def _fill(self, node: JSON, value: JSON, resolver: Resolver, depth: int) -> JSON:
        _spend()
        if not isinstance(node, dict) or depth > 100:
            return value
        if depth and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            resolved = resolver.lookup(ref)
            value = self._fill(resolved.contents, value, resolved.resolver, depth + 1)
        for sub in node.get("allOf") or []:
            value = self._fill(sub, value, resolver, depth + 1)
        for key in ("anyOf", "oneOf"):
            for sub in node.get(key) or []:  # the first branch that takes the filled value
                candidate = self._fill(sub, value, resolver, depth + 1)
                if self._valid(sub, candidate):
                    value = candidate
                    break
        if "if" in node:
            branch = node.get("then") if self._valid(node["if"], value) else node.get("else")
            value = self._fill(branch, value, resolver, depth + 1)
        if isinstance(value, dict):
            return self._fill_object(node, value, resolver, depth)
        if isinstance(value, list):
            prefix = node.get("prefixItems") or []
            items = node.get("items")
            out = [
                self._fill(prefix[i] if i < len(prefix) else items, item, resolver, depth + 1)
                for i, item in enumerate(value)
            ]
            if any(new is not old for new, old in zip(out, value, strict=True)):
                return out
        return value

    def _fill_object(
        self, node: JSONObject, value: JSONObject, resolver: Resolver, depth: int
    ) -> JSONObject:
        found = node.get("properties")
        props: JSONObject = found if isinstance(found, dict) else {}
        out: JSONObject | None = None
        for name, sub in props.items():
            if name in value:
                new = self._fill(sub, value[name], resolver, depth + 1)
                if new is not value[name]:
                    out = out if out is not None else dict(value)
                    out[name] = new
                continue
            default = _default_of(sub, resolver)
            if default is not _MISSING:
                out = out if out is not None else dict(value)
                out[name] = self._fill(sub, copy.deepcopy(default), resolver, depth + 1)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            for name in value:
                if name not in props:
                    new = self._fill(extra, value[name], resolver, depth + 1)
                    if new is not value[name]:
                        out = out if out is not None else dict(value)
                        out[name] = new
        return value if out is None else out


def _locate(node: JSON, base: str, pointer: str, uris: dict[int, str]) -> None:
    """Each subschema's URI (its resource's, and its JSON Pointer there) into ``uris``."""
    if not isinstance(node, dict) or id(node) in uris:
        return
    if pointer and isinstance(node.get("$id"), str):
        base, pointer = urljoin(base, node["$id"]).partition("#")[0], ""
    uris[id(node)] = f"{base}#{pointer}"
    for path, sub in subschemas(node):
        _locate(sub, base, pointer + "".join("/" + _escape(str(p)) for p in path), uris)


def _escape(segment: str) -> str:
    """One JSON Pointer segment, as a URI fragment holds it."""
    return quote(segment.replace("~", "~0").replace("/", "~1"), safe="")


def _default_of(schema: JSON, resolver: Resolver) -> JSON:
    """The property's ``default``, on its own schema or on the one its ``$ref`` names."""
    for _ in range(10):
        if not isinstance(schema, dict):
            return _MISSING
        if "default" in schema:
            return schema["default"]
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return _MISSING
        resolved = resolver.lookup(ref)
        schema, resolver = resolved.contents, resolved.resolver
    return _MISSING


def _details(errors: list[ValidationError]) -> list[JSONObject]:
    """jsonschema's errors in pydantic's shape: ``loc`` is the path to the value at fault (a
    missing property's own name included, as pydantic says it), ``msg`` the sentence."""
    out = []
    reported: set[tuple[str | int, ...]] = set()
    for error in errors:
        loc: list[str | int] = list(error.absolute_path)
        msg = error.message
        if error.validator == "required" and isinstance(error.instance, dict):
            missing = [
                name
                for name in error.validator_value
                if name not in error.instance and (*loc, name) not in reported
            ]
            if missing:
                loc.append(missing[0])
                msg = "Field required"
        reported.add(tuple(loc))
        out.append({"type": str(error.validator), "loc": loc, "msg": msg, "input": error.instance})
    return out
