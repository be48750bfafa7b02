"""Post-processing of pydantic's JSON Schema so that Anthropic tools and OpenAI strict mode accept it.

DESIGN.md §9. What the providers refuse, and what this module does about it:

- a union at the root (both): the tool's root is an object; the union sits one level down.
- ``oneOf`` (OpenAI strict): becomes ``anyOf``; ``discriminator`` goes.
- an open object (OpenAI strict): every object gets ``additionalProperties: false`` and lists every
  property in ``required``; a property that was optional becomes nullable, and ``null`` then means
  "use the default" (``strip_defaulted_nulls`` undoes it before pydantic validates).
- ``default``, ``minLength``/``maxLength`` and other keywords strict mode does not take: removed,
  with what they said moved into the ``description`` so the model still knows.
- ``$ref`` beside other keywords (OpenAI) and name clashes between kinds: every ``$ref`` is inlined;
  only a recursive model keeps a ``$defs`` entry, renamed per kind.

A schema that cannot be closed (a ``dict[str, X]`` field: an object with open keys) is left open and
reported by ``strict_ok`` so the OpenAI format can say ``strict: false`` rather than be refused.
"""

from __future__ import annotations

import copy
import json
import re

from artifacts_app.jsontypes import JSON, JSONObject

# Keywords that describe or constrain and that OpenAI strict mode refuses; the hint is kept as words.
_HINTED = {
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "minProperties": "at least {} properties",
    "maxProperties": "at most {} properties",
    "uniqueItems": "items unique",
}
_DROPPED = {
    "default",
    "title",
    "examples",
    "discriminator",
    "readOnly",
    "writeOnly",
    "deprecated",
    "$schema",
    "$id",
    "$comment",
    "contentEncoding",
    "contentMediaType",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "contains",
    "minContains",
    "maxContains",
    "dependentRequired",
    "dependentSchemas",
}
# Formats OpenAI strict mode understands; pydantic's others (uri, binary, path…) are dropped.
STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_NAME_RE = re.compile(r"[^A-Za-z0-9_]+")


class _Inliner:
    """Inlines every ``$ref`` of one kind's schema; recursive models become prefixed ``$defs``."""

    def __init__(self, defs: JSONObject, prefix: str, out_defs: JSONObject) -> None:
        self.defs = defs
        self.prefix = prefix
        self.out_defs = out_defs
        self.stack: list[str] = []
        self.recursive = {self.name(n) for n in _recursive_defs(defs)}  # once, not per reference

    def name(self, ref_name: str) -> str:
        return _NAME_RE.sub("_", f"{self.prefix}__{ref_name}")

    def walk(self, node: JSON) -> JSON:
        if isinstance(node, list):
            return [self.walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            ref_name = ref.split("/")[-1]
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if ref_name in self.stack:  # recursion: keep a reference to a renamed def
                return {"$ref": f"#/$defs/{self.name(ref_name)}"}
            self.stack.append(ref_name)
            target = self.walk(copy.deepcopy(self.defs[ref_name]))
            self.stack.pop()
            if self.name(ref_name) in self.recursive:
                self.out_defs.setdefault(self.name(ref_name), target)
            merged = {**target, **{k: self.walk(v) for k, v in siblings.items()}}
            return merged
        out: JSONObject = {}
        for key, value in node.items():
            if key == "$defs":
                continue
            if key in ("properties", "$defs") and isinstance(value, dict):
                out[key] = {k: self.walk(v) for k, v in value.items()}
            else:
                out[key] = self.walk(value)
        return out


def _refs_in(node: JSON) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            found.add(ref.split("/")[-1])
        for value in node.values():
            found |= _refs_in(value)
    elif isinstance(node, list):
        for item in node:
            found |= _refs_in(item)
    return found


def _recursive_defs(defs: JSONObject) -> set[str]:
    """Names of defs that reach themselves through references."""
    graph = {name: _refs_in(schema) for name, schema in defs.items()}
    recursive = set()
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            name = todo.pop()
            if name == start:
                recursive.add(start)
                break
            if name in seen or name not in graph:
                continue
            seen.add(name)
            todo.extend(graph[name])
    return recursive


def allows_null(schema: JSON) -> bool:
    if not isinstance(schema, dict) or not schema:
        return True  # {} accepts anything
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "enum" in schema and None in schema["enum"]:
        return True
    if "const" in schema and schema["const"] is None:
        return True
    return any(allows_null(branch) for branch in schema.get("anyOf", []) + schema.get("oneOf", []))


def nullable(schema: JSONObject) -> JSONObject:
    """``schema`` that also accepts ``null``."""
    if allows_null(schema):
        return schema
    kind = schema.get("type")
    if isinstance(kind, str) and "anyOf" not in schema:
        out = {**schema, "type": [kind, "null"]}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    annotations = {k: schema[k] for k in ("description",) if k in schema}
    inner = {k: v for k, v in schema.items() if k not in annotations}
    return {**annotations, "anyOf": [inner, {"type": "null"}]}


def _describe(schema: JSONObject, words: list[str]) -> JSONObject:
    if not words:
        return schema
    text = "; ".join(words)
    if schema.get("description"):
        text = f"{schema['description'].rstrip('.')} ({text})."
    else:
        text = text[0].upper() + text[1:] + "."
    return {**schema, "description": text}


class Strictifier:
    """Closes objects, requires every property, and drops what strict mode refuses."""

    def __init__(self) -> None:
        self.open_objects: list[str] = []

    def walk(self, node: JSON, path: str = "") -> JSON:
        if isinstance(node, list):
            return [self.walk(item, path) for item in node]
        if not isinstance(node, dict):
            return node
        words: list[str] = []
        out: JSONObject = {}
        for key, value in node.items():
            if key in _DROPPED:
                if key == "default" and value is not None:
                    words.append(f"null means the default, {json.dumps(value)}")
                continue
            if key in _HINTED:
                if value is not False:
                    words.append(_HINTED[key].format(value))
                continue
            if key == "format" and value not in STRICT_FORMATS:
                words.append(f"format: {value}")
                continue
            if key == "const":
                out["enum"] = [value]
                continue
            if key == "oneOf":
                out["anyOf"] = [self.walk(v, path) for v in value]
                continue
            if key == "properties":
                required = set(node.get("required", []))
                props = {}
                for name, prop in value.items():
                    walked = self.walk(prop, f"{path}.{name}" if path else name)
                    if name not in required:
                        walked = nullable(walked)
                        if prop.get("default") is None and "null" not in walked.get(
                            "description", ""
                        ):
                            walked = _describe(walked, ["null when not known"])
                    props[name] = walked
                out["properties"] = props
                out["required"] = list(value)
                continue
            if key == "required":
                continue  # rebuilt from properties
            if key == "additionalProperties":
                if value is not False:
                    self.open_objects.append(path or "(root)")
                    out[key] = self.walk(value, f"{path}.*")
                else:
                    out[key] = False
                continue
            if key == "$defs":
                out[key] = {k: self.walk(v, f"$defs.{k}") for k, v in value.items()}
                continue
            out[key] = self.walk(value, path)
        if out.get("type") == "object" or "properties" in out:
            out.setdefault("type", "object")
            out.setdefault("properties", {})
            out.setdefault("required", list(out["properties"]))
            out.setdefault("additionalProperties", False)
        if "enum" in out and "type" not in out:
            types = {_json_type(v) for v in out["enum"]}
            out["type"] = types.pop() if len(types) == 1 else sorted(types)
        return _describe(out, words)


def _json_type(value: JSON) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def data_schema(kind_name: str, json_schema: JSONObject | None, out_defs: JSONObject) -> JSON:
    """The ``data`` branch of one kind, inlined and strict (not yet strictified: see ``build``)."""
    if json_schema is None:
        # A kind without a schema takes any JSON but null; strict mode cannot say "any", so the
        # model is offered text, which is always valid data.
        return {"type": "string", "description": "Free text (this kind declares no schema)."}
    schema = copy.deepcopy(json_schema)
    defs = schema.pop("$defs", {}) or {}
    return _Inliner(defs, kind_name, out_defs).walk(schema)


def strip_defaulted_nulls(schema: JSON, data: JSON, defs: JSONObject | None = None) -> JSON:
    """Undo ``nullable`` on *pydantic's* schema: drop ``null`` where the field was optional and
    does not itself accept null, so that pydantic applies the field's default."""
    if defs is None:
        defs = schema.get("$defs", {}) if isinstance(schema, dict) else {}
    schema = _resolve(schema, defs)
    if not isinstance(schema, dict):
        return data
    if isinstance(data, dict):
        branch = _object_branch(schema, data, defs)
        if branch is None:
            return data
        props = branch.get("properties", {})
        required = set(branch.get("required", []))
        extra = branch.get("additionalProperties")
        out = {}
        for key, value in data.items():
            prop = _resolve(props.get(key), defs) if key in props else None
            if value is None and key in props and key not in required and not allows_null(prop):
                continue
            if prop is not None:
                out[key] = strip_defaulted_nulls(prop, value, defs)
            elif isinstance(extra, dict):
                out[key] = strip_defaulted_nulls(extra, value, defs)
            else:
                out[key] = value
        return out
    if isinstance(data, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [strip_defaulted_nulls(items, v, defs) for v in data]
        for branch in schema.get("anyOf", []) + schema.get("oneOf", []):
            branch = _resolve(branch, defs)
            if isinstance(branch, dict) and isinstance(branch.get("items"), dict):
                return [strip_defaulted_nulls(branch["items"], v, defs) for v in data]
    return data


def _resolve(schema: JSON, defs: JSONObject) -> JSON:
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 50:
        target = defs.get(str(schema["$ref"]).split("/")[-1], {})
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
    if (
        isinstance(schema, dict)
        and isinstance(schema.get("allOf"), list)
        and len(schema["allOf"]) == 1
    ):
        inner = _resolve(schema["allOf"][0], defs)
        schema = {**inner, **{k: v for k, v in schema.items() if k != "allOf"}}
    return schema


def _object_branch(schema: JSONObject, data: JSONObject, defs: JSONObject) -> JSONObject | None:
    if "properties" in schema or schema.get("type") == "object":
        return schema
    candidates = []
    for branch in schema.get("anyOf", []) + schema.get("oneOf", []):
        branch = _resolve(branch, defs)
        if isinstance(branch, dict) and ("properties" in branch or branch.get("type") == "object"):
            candidates.append(branch)
    keys = set(data)
    for branch in candidates:  # strict mode sends every property: the exact key set wins
        if set(branch.get("properties", {})) == keys and _fixed_fields_match(branch, data, defs):
            return branch
    for branch in candidates:
        if keys <= set(branch.get("properties", {})):
            return branch
    return candidates[0] if candidates else None


def _fixed_fields_match(branch: JSONObject, data: JSONObject, defs: JSONObject) -> bool:
    """A tagged union's branches share keys; their literal fields tell them apart."""
    for key, prop in branch.get("properties", {}).items():
        prop = _resolve(prop, defs)
        if not isinstance(prop, dict) or key not in data:
            continue
        if "const" in prop and data[key] != prop["const"]:
            return False
        if "enum" in prop and data[key] not in prop["enum"]:
            return False
    return True
