"""JSON Schema kinds (API.md "Kinds declared over HTTP"): checked once when declared, compiled once
per declaration, then used on every tag to fill in defaults and validate.

Draft 2020-12 with the ``jsonschema`` library. Nothing is ever fetched: every ``$ref`` must be local
(``#…``) and resolve inside the schema, and the registry references resolve through has no way to
retrieve anything else (``_refuse``), so even a reference this module missed cannot reach the network.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, relevance
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012

SCHEMA_MAX_BYTES = 64 * 1024
DIALECT = "https://json-schema.org/draft/2020-12/schema"
ERRORS_LISTED = 50

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
_MISSING = object()


class SchemaProblem(Exception):
    """Why a schema is refused; ``at`` is the JSON path inside the schema."""

    def __init__(self, message: str, at: list[str | int]) -> None:
        super().__init__(message)
        self.message = message
        self.at = at


def _refuse(uri: str) -> Resource:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class


def subschemas(node: dict[str, Any]) -> Iterator[tuple[list[str | int], Any]]:
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
    """One pass over a schema: every reference local and resolvable, no loop that never descends."""

    done: set[int] = field(default_factory=set)
    in_place: list[int] = field(default_factory=list)  # applied to the same value, in order

    def walk(self, node: Any, resolver: Any, at: list[str | int]) -> None:
        if not isinstance(node, dict) or id(node) in self.done:
            return
        if id(node) in self.in_place:
            raise SchemaProblem(
                "a `$ref` leads back to the same schema without going into the data, so "
                "validation would never end",
                at,
            )
        if at and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        self.in_place.append(id(node))
        try:
            for key in ("$ref", "$dynamicRef"):
                ref = node.get(key)
                if isinstance(ref, str):
                    self.reference(key, ref, resolver, [*at, key])
            for key in _IN_PLACE_ONE:
                if key in node:
                    self.walk(node[key], resolver, [*at, key])
            for key in _IN_PLACE_MANY:
                for i, sub in enumerate(node.get(key) or []):
                    self.walk(sub, resolver, [*at, key, i])
        finally:
            self.in_place.pop()
        self.done.add(id(node))
        saved, self.in_place = self.in_place, []  # below here the data is one level down
        try:
            for path, sub in subschemas(node):
                if path[0] not in _IN_PLACE_ONE and path[0] not in _IN_PLACE_MANY:
                    self.walk(sub, resolver, [*at, *path])
        finally:
            self.in_place = saved

    def reference(self, key: str, ref: str, resolver: Any, at: list[str | int]) -> None:
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


def check(schema: Any) -> None:
    """Refuse (``SchemaProblem``) a schema that is not a valid draft 2020-12 JSON Schema object,
    is larger than 64 KiB, names another dialect, or has a reference that is not local."""
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
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise SchemaProblem(
            f"not a valid JSON Schema at {where}: {exc.message}", list(exc.absolute_path)
        ) from None
    _Walk().walk(schema, _registry(schema)[1], [])


def _registry(schema: dict[str, Any]) -> tuple[Registry, Any]:
    resource = DRAFT202012.create_resource(schema)
    registry: Registry = Registry(retrieve=_refuse)  # type: ignore[call-arg]  # attrs
    registry = registry.with_resource(resource.id() or "", resource)
    registry = registry.crawl()
    return registry, registry.resolver(base_uri=resource.id() or "")


class CompiledSchema:
    """A checked schema, ready for tags: ``parse`` fills in defaults then validates."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        registry, self.resolver = _registry(schema)
        self.validator = Draft202012Validator(schema, registry=registry)
        # Most schemas have no default: those skip the walk (a property *named* "default" only
        # costs the walk, which then fills nothing).
        self.fills = b'"default"' in orjson.dumps(schema)

    def parse(self, data: Any) -> tuple[Any, list[dict[str, Any]]]:
        """``data`` with the defaults of absent object properties filled in (recursively, inside
        objects that are present), and its problems as ``{"type", "loc", "msg", "input"}`` like
        pydantic's (empty when it is valid). ``data`` itself is never changed."""
        filled = self._fill(self.schema, data, self.resolver, 0) if self.fills else data
        problems = sorted(self.validator.iter_errors(filled), key=relevance)
        return filled, _details(problems[:ERRORS_LISTED])

    def _valid(self, schema: Any, value: Any) -> bool:
        return bool(self.validator.evolve(schema=schema).is_valid(value))

    def _fill(self, node: Any, value: Any, resolver: Any, depth: int) -> Any:
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
        self, node: dict[str, Any], value: dict[str, Any], resolver: Any, depth: int
    ) -> dict[str, Any]:
        found = node.get("properties")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        out: dict[str, Any] | None = None
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


def _default_of(schema: Any, resolver: Any) -> Any:
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


def _details(errors: list[ValidationError]) -> list[dict[str, Any]]:
    """jsonschema's errors in pydantic's shape: ``loc`` is the path to the value at fault (a
    missing property's own name included, as pydantic says it), ``msg`` the sentence."""
    out = []
    reported: set[tuple[Any, ...]] = set()
    for error in errors:
        loc: list[Any] = list(error.absolute_path)
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
