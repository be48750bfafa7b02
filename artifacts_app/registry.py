"""The kinds registry: what each agent declares about its artifacts.

An agent is either *declared* (``settings.ARTIFACTS_AGENTS`` maps its slug to a module holding
``artifacts = define_artifacts(...)``) or *freeform* (a row made in the admin or by ``create_agent``:
no kinds, no tool, ``max`` from the row). ``spec_for`` answers the same ``AgentSpec`` for both.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias

from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from pydantic import TypeAdapter, ValidationError

from artifacts_app import jsonschemas
from artifacts_app.errors import ArtifactError, SchemaInvalidError
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.names import KIND_RE, RESERVED_SLUGS, SLUG_RE

if TYPE_CHECKING:
    from artifacts_app.models import Agent

DEFAULT_MAX = 1000
DEFAULT_KEEP_VERSIONS = 10
FREEFORM_KIND = "artifact"
TOOL_NAME = "tag_artifact"


# A type pydantic's ``TypeAdapter`` accepts: a class, or a form such as ``list[int]`` or
# ``Annotated[…]`` (PEP 747's ``TypeForm``, which mypy does not check without an experimental
# flag; pydantic's own parameter is typed so).
PydanticType: TypeAlias = Any


@dataclass(frozen=True)
class Kind:
    """One kind of artifact: a description for people and models, and an optional schema.

    ``schema`` is a pydantic model or any type ``pydantic.TypeAdapter`` accepts. ``keep_versions``
    overrides the agent's for records of this kind (None: the agent's).
    """

    description: str
    schema: PydanticType = None  # None: any JSON
    keep_versions: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.description, str) or not self.description.strip():
            raise ImproperlyConfigured("A Kind needs a non-empty description.")
        if self.keep_versions is not None:
            check_keep_versions(self.keep_versions)
        if self.schema is not None:
            try:
                TypeAdapter(self.schema)
            except Exception as exc:  # pydantic raises several types for unusable schemas
                raise ImproperlyConfigured(
                    f"Kind schema {self.schema!r} is not a type pydantic accepts: {exc}"
                ) from exc

    @cached_property
    def adapter(self) -> TypeAdapter[object] | None:
        return TypeAdapter(self.schema) if self.schema is not None else None

    def json_schema(self) -> JSONObject | None:
        return self.adapter.json_schema() if self.adapter is not None else None

    def parse(self, name: str, data: JSON, *, agent: str | None = None, wait: bool = True) -> JSON:
        """The JSON form of ``data`` parsed by the schema (defaults and coercions applied);
        ``SchemaInvalidError`` with pydantic's error list when it does not match. (``agent`` and
        ``wait`` are for ``SchemaKind``'s share of validation time; a kind declared in code is
        not under it.)"""
        if self.adapter is None:
            return data
        try:
            value = self.adapter.validate_python(data)
        except ValidationError as exc:
            details = json.loads(exc.json(include_url=False))
            raise _schema_invalid(name, details, exc) from None
        return self.adapter.dump_python(value, mode="json")


@dataclass(frozen=True)
class SchemaKind(Kind):
    """A kind whose ``schema`` is a JSON Schema (draft 2020-12) rather than a Python type: what an
    agent declares over HTTP (API.md "Kinds declared over HTTP"). Checked by ``jsonschemas.check``
    before it is made; compiled once, when first used."""

    schema: JSONObject | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.description, str) or not self.description.strip():
            raise ImproperlyConfigured("A Kind needs a non-empty description.")
        if self.keep_versions is not None:
            check_keep_versions(self.keep_versions)

    @cached_property
    def adapter(self) -> TypeAdapter[object] | None:
        return None

    @cached_property
    def compiled(self) -> jsonschemas.CompiledSchema | None:
        return jsonschemas.CompiledSchema(self.schema) if self.schema is not None else None

    def json_schema(self) -> JSONObject | None:
        return self.schema

    def parse(self, name: str, data: JSON, *, agent: str | None = None, wait: bool = True) -> JSON:
        """``data`` with the schema's defaults filled in; ``SchemaInvalidError`` with
        ``{"loc", "msg"}`` details, as pydantic's, when it does not match; 400
        ``schema_too_costly`` when validating it takes more than ``ARTIFACTS_MAX_VALIDATION_MS``.

        The fair share (``agent`` given): every agent may spend ``ARTIFACTS_VALIDATION_SHARE_MS``
        of validation CPU per second of this process (a bucket holding one second's allowance, or
        one tag's budget if that is more; ``jsonschemas.SHARE``). The CPU time each validation
        spends is charged to it, refused tags' too. An agent in debt has its tag wait here,
        before validating, until the debt is paid back — asleep, the GIL released, and only with
        ``wait`` (the caller holds no transaction and no lock; under the agent's lock a
        validation is charged and never waits) — and a wait past ``SHARE_MAX_WAIT_S`` is refused
        with 400 ``schema_too_costly`` before any work. So an agent that costs little never
        waits, and one agent's costly tags, refused or not, cannot take more than its share.

        Every entry point (the Python API, REST, the tool, MCP) tags through here, so the budget
        and the share hold for all of them. Kinds declared in code are not under them:
        pydantic-core validates them in one call that cannot be interrupted, their schemas are
        the host's own code, and its regular expressions run on Rust's linear-time ``regex``
        crate by default."""
        if self.compiled is None:
            return data
        budget = int(settings.ARTIFACTS_MAX_VALIDATION_MS)
        spent = None
        if agent is not None:
            rate = float(settings.ARTIFACTS_VALIDATION_SHARE_MS)
            burst = max(rate, float(budget))
            if wait:
                _share_wait(name, agent, rate, burst)

            def spent(seconds: float) -> None:
                jsonschemas.SHARE.charge(agent, seconds, rate, burst)

        try:
            filled, details = self.compiled.parse(data, budget, spent)
        except jsonschemas.TooCostly:
            raise ArtifactError(
                "schema_too_costly",
                f"Checking `data` against kind {name!r} took more than {budget} ms, this "
                "server's limit for one tag (ARTIFACTS_MAX_VALIDATION_MS); nothing was stored. "
                "Send less data, or declare the kind with a simpler schema.",
                {"field": "data", "kind": name, "limitMs": budget},
            ) from None
        if details:
            raise _schema_invalid(name, details, None)
        return filled


# The longest an agent's tag waits for its share of validation time (``SchemaKind.parse``): a
# request thread asleep that long is cheap; past it, the agent is told at once.
SHARE_MAX_WAIT_S = 2.0


def _share_wait(name: str, agent: str, rate: float, burst: float) -> None:
    try:
        wait_s = jsonschemas.SHARE.admit(agent, rate, burst, SHARE_MAX_WAIT_S)
    except jsonschemas.ShareExceeded as exc:
        raise ArtifactError(
            "schema_too_costly",
            f"Agent {agent!r} spends more time on schema validation than its share of this "
            f"server ({rate:g} ms a second, ARTIFACTS_VALIDATION_SHARE_MS): its next tag would "
            f"wait {exc.wait_s:.1f} s, past the {SHARE_MAX_WAIT_S:g} s allowed; nothing was "
            "stored. Simplify the kind's schema or the data, or tag less often.",
            {
                "field": "data",
                "kind": name,
                "shareMs": rate,
                "retryAfterSeconds": round(exc.wait_s, 3),  # when it would owe nothing
            },
        ) from None
    if wait_s > 0:
        time.sleep(wait_s)  # no lock and no transaction held (``wait``), the GIL released


# Characters of a message or of a value quoted back in a refusal. The validators quote the value
# at fault (jsonschema's messages hold its repr, pydantic's errors its ``input``): unbounded, a
# 400 KB string failing a pattern made a refusal of ~50 errors × 2 copies of it, built, held and
# sent for nothing.
QUOTED_MAX = 256


def _bounded(details: list[JSONObject]) -> list[JSONObject]:
    out = []
    for detail in details:
        detail = dict(detail)
        msg = detail.get("msg")
        if isinstance(msg, str):
            detail["msg"] = jsonschemas.cut(msg, QUOTED_MAX)
        if "input" in detail:
            value = detail["input"]
            if isinstance(value, str):
                detail["input"] = jsonschemas.cut(value, QUOTED_MAX)
            elif isinstance(value, dict | list) and len(json.dumps(value)) > QUOTED_MAX:
                del detail["input"]  # the value at fault is at ``loc`` in the caller's own data
        out.append(detail)
    return out


def _schema_invalid(
    name: str, details: list[JSONObject], exc: ValidationError | None
) -> SchemaInvalidError:
    details = _bounded(details)
    first = details[0] if details else {"loc": [], "msg": str(exc)}
    where = ".".join(str(part) for part in first.get("loc", [])) or "data"
    return SchemaInvalidError(
        "schema_invalid",
        f"`data` does not match kind {name!r}: {where}: {first.get('msg')}.",
        details,
        kind=name,
        validation=exc,
    )


@dataclass(frozen=True)
class ArtifactsDeclaration:
    """What ``define_artifacts`` returns; a module exposes it as ``artifacts``."""

    kinds: Mapping[str, Kind]
    agent_tool: bool = False
    max: int = DEFAULT_MAX
    keep_versions: int = DEFAULT_KEEP_VERSIONS


def check_keep_versions(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ImproperlyConfigured(
            f"keep_versions must be a whole number of at least 1 (1 keeps no history); got {value!r}."
        )
    return value


def define_artifacts(
    *,
    kinds: Mapping[str, Kind] | None = None,
    agent_tool: bool = False,
    max: int = DEFAULT_MAX,
    keep_versions: int = DEFAULT_KEEP_VERSIONS,
) -> ArtifactsDeclaration:
    """Declare an agent's artifact kinds, whether its model gets the ``tag_artifact`` tool, its cap
    and how many versions each record keeps (``keep_versions``; a kind may say otherwise)."""
    kinds = dict(kinds or {})
    for name, kind in kinds.items():
        if not isinstance(name, str) or not KIND_RE.fullmatch(name):
            raise ImproperlyConfigured(
                f"Kind name {name!r} is not valid: use 1–64 of A-Z a-z 0-9 . _ : - starting with a letter or digit."
            )
        if not isinstance(kind, Kind):
            raise ImproperlyConfigured(
                f"Kind {name!r} must be a Kind(description, schema=...), not {type(kind).__name__}."
            )
    if isinstance(max, bool) or not isinstance(max, int) or max < 1:
        raise ImproperlyConfigured(f"max must be a whole number of at least 1; got {max!r}.")
    check_keep_versions(keep_versions)
    return ArtifactsDeclaration(
        kinds=MappingProxyType(kinds),
        agent_tool=bool(agent_tool),
        max=max,
        keep_versions=keep_versions,
    )


@dataclass(frozen=True)
class AgentSpec:
    """Everything the services need to know about one agent's rules."""

    slug: str
    kinds: Mapping[str, Kind]
    agent_tool: bool
    max: int
    module: str = ""
    authored_tool: object = field(default=None, compare=False)  # the agent's own tag_artifact
    keep_versions: int = DEFAULT_KEEP_VERSIONS
    declaration: str = ""  # the hash of a declaration made over HTTP; "" otherwise

    @property
    def freeform(self) -> bool:
        return not self.kinds

    def keep_for(self, kind: str) -> int:
        """How many versions a record of ``kind`` keeps: the kind's own number, else the agent's."""
        declared = self.kinds.get(kind)
        if declared is not None and declared.keep_versions is not None:
            return declared.keep_versions
        return self.keep_versions

    @property
    def tool_enabled(self) -> bool:
        """The built-in tool is offered when declared on, with kinds, and not shadowed by the agent's own."""
        return self.agent_tool and bool(self.kinds) and self.authored_tool is None


def declared_agents() -> dict[str, str]:
    """slug -> module path from ``settings.ARTIFACTS_AGENTS``."""
    return dict(getattr(settings, "ARTIFACTS_AGENTS", {}) or {})


_module_cache: dict[str, tuple[ModuleType, ArtifactsDeclaration]] = {}


def load_declaration(module_path: str) -> tuple[ModuleType, ArtifactsDeclaration]:
    cached = _module_cache.get(module_path)
    if cached is not None:
        return cached
    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"ARTIFACTS_AGENTS names module {module_path!r}, which cannot be imported: {exc}"
        ) from exc
    declaration = getattr(module, "artifacts", None)
    if not isinstance(declaration, ArtifactsDeclaration):
        raise ImproperlyConfigured(
            f"Module {module_path!r} must define `artifacts = define_artifacts(...)` at module level."
        )
    _module_cache[module_path] = (module, declaration)
    return module, declaration


def authored_tool(module: ModuleType) -> object:
    """The agent's own tool named ``tag_artifact``, if its module declares one.

    Recognised: a module-level callable ``tag_artifact``, or an entry named ``tag_artifact`` in a
    module-level ``tools`` list (dicts with a ``name``, or callables).
    """
    own = getattr(module, TOOL_NAME, None)
    if callable(own):
        return own
    for tool in getattr(module, "tools", None) or []:
        name = tool.get("name") if isinstance(tool, Mapping) else getattr(tool, "__name__", None)
        if name == TOOL_NAME:
            return tool
    return None


def spec_for_declared(slug: str, module_path: str) -> AgentSpec:
    module, declaration = load_declaration(module_path)
    return AgentSpec(
        slug=slug,
        kinds=declaration.kinds,
        agent_tool=declaration.agent_tool,
        max=declaration.max,
        module=module_path,
        authored_tool=authored_tool(module),
        keep_versions=declaration.keep_versions,
    )


def declared_in_code(agent: Agent) -> str:
    """The module that declares ``agent``'s kinds, or "" when it has none (freeform or over HTTP)."""
    return declared_agents().get(agent.slug) or agent.module


def spec_for(agent: Agent) -> AgentSpec:
    """The rules of ``agent``: from its module when declared in code, else from its row (kinds
    declared over HTTP, or none: freeform)."""
    module_path = declared_in_code(agent)
    if module_path:
        return spec_for_declared(agent.slug, module_path)
    kinds: Mapping[str, Kind] = MappingProxyType({})
    agent_tool = False
    if agent.kinds_hash:
        kinds, agent_tool = _http_kinds(agent)
    return AgentSpec(
        slug=agent.slug,
        kinds=kinds,
        agent_tool=agent_tool,
        max=agent.max_artifacts,
        keep_versions=max(int(agent.keep_versions or 1), 1),
        declaration=agent.kinds_hash,
    )


def declaration_hash(declaration: Mapping[str, JSON]) -> str:
    """What names a declaration made over HTTP: equal declarations, equal hashes."""
    text = json.dumps(declaration, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def http_kinds(declaration: Mapping[str, JSON]) -> dict[str, Kind]:
    """The kinds of a stored HTTP declaration (``{"kinds": {name: {"description", "schema",
    "keepVersions"}}, "agentTool"}``), its schemas already checked."""
    return {
        name: SchemaKind(
            kind["description"], schema=kind.get("schema"), keep_versions=kind.get("keepVersions")
        )
        for name, kind in declaration.get("kinds", {}).items()
    }


# Compiled declarations by their content hash: a tag reads the agent row's hash (a column of the
# row it loads anyway) and finds its kinds here, schemas compiled once per process. Keyed by content,
# an entry can never be stale; bounded, since every PUT makes a new one.
_http_cache: OrderedDict[str, tuple[Mapping[str, Kind], bool]] = OrderedDict()
HTTP_CACHE_SIZE = 256


def _http_kinds(agent: Agent) -> tuple[Mapping[str, Kind], bool]:
    cached = _http_cache.get(agent.kinds_hash)
    if cached is not None:
        _http_cache.move_to_end(agent.kinds_hash)
        return cached
    declaration = agent.kinds or {}  # not loaded with the row on the hot path: one query, once
    found = (MappingProxyType(http_kinds(declaration)), bool(declaration.get("agentTool")))
    # Under the hash of what was read: a PUT since the row was loaded stores nothing stale.
    _http_cache[declaration_hash(declaration)] = found
    while len(_http_cache) > HTTP_CACHE_SIZE:
        _http_cache.popitem(last=False)
    return found


def slug_problem(slug: object) -> str | None:
    """Why ``slug`` cannot name an agent, or None when it can."""
    if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug):
        return f"Agent slug {slug!r} is not valid: use 1–63 of a-z 0-9 and -, starting with a letter or digit."
    if slug in RESERVED_SLUGS:
        return f"Agent slug {slug!r} is reserved for the site's own pages; choose another."
    return None


@checks.register()
def check_declared_agents(
    app_configs: Sequence[AppConfig] | None = None, **_: object
) -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    for slug, module_path in declared_agents().items():
        problem = slug_problem(slug)
        if problem:
            messages.append(
                checks.Error(problem, id="artifacts.E001", obj=f"ARTIFACTS_AGENTS[{slug!r}]")
            )
            continue
        try:
            spec = spec_for_declared(slug, module_path)
        except ImproperlyConfigured as exc:
            messages.append(
                checks.Error(str(exc), id="artifacts.E002", obj=f"ARTIFACTS_AGENTS[{slug!r}]")
            )
            continue
        if spec.agent_tool and not spec.kinds:
            messages.append(
                checks.Error(
                    f"Agent {slug!r} sets agent_tool=True but declares no kinds: the tag_artifact tool needs "
                    "at least one kind.",
                    hint="Declare kinds in define_artifacts(kinds=...), or set agent_tool=False.",
                    id="artifacts.E003",
                    obj=module_path,
                )
            )
        if spec.authored_tool is not None:
            messages.append(
                checks.Warning(
                    f"Agent {slug!r} declares its own tool named 'tag_artifact' in {module_path}; it shadows "
                    "the built-in tag_artifact tool, which is not offered for this agent.",
                    hint="Rename your tool if you want the built-in one.",
                    id="artifacts.W001",
                    obj=module_path,
                )
            )
    return messages


@checks.register(checks.Tags.database)
def check_sqlite_version(
    app_configs: Sequence[AppConfig] | None = None, **_: object
) -> list[checks.CheckMessage]:
    """Eviction and deletes use ``DELETE … RETURNING``, which SQLite has from 3.35."""
    import sqlite3

    from django.db import connection

    if connection.vendor == "sqlite" and sqlite3.sqlite_version_info < (3, 35):
        return [
            checks.Error(
                f"SQLite {sqlite3.sqlite_version} is too old: agent-artifacts needs 3.35 or newer.",
                hint="Use a Python built against a newer SQLite, or PostgreSQL via DATABASE_URL.",
                id="artifacts.E004",
            )
        ]
    return []
