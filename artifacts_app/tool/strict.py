"""Which JSON Schemas the ``tag_artifact`` tool can offer in OpenAI strict mode (and to Anthropic).

Kinds declared in code go through pydantic, whose schemas ``schema.Strictifier`` always knows how
to close. A JSON Schema declared over HTTP may say anything draft 2020-12 allows; API.md promises
that the tool is valid in strict mode for every schema the PUT accepts, so with ``agentTool`` on a
schema that uses what strict mode cannot say is refused, naming the keyword (``strict_problem``).
What the Strictifier can word into a description (``minLength``…) or drop as an annotation
(``title``, ``default``…) passes: the server still validates it.
"""

from __future__ import annotations

from artifacts_app.jsonschemas import SchemaProblem
from artifacts_app.jsontypes import JSON, JSONObject

# Keywords the tool carries as they are, or as the Strictifier rewrites them.
_CARRIED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "oneOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
        # worded into the description
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "uniqueItems",
        # annotations, dropped
        "description",
        "title",
        "examples",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "contentEncoding",
        "contentMediaType",
    }
)
_ROOT_ONLY = frozenset({"$schema", "$id"})
_TYPED_BY = ("type", "enum", "const", "anyOf", "oneOf", "$ref")
MAX_DEPTH = 10  # object nesting, counted from the tool's root as OpenAI counts it
DATA_DEPTH = 2  # the tool's root object, then `artifact`, then `data`
MAX_PROPERTIES = 5000
# The tool inlines every `$ref` (tool/schema.py's _Inliner), so a schema whose references fan out
# (d_i = {"items": {"anyOf": [{"$ref": d_i+1}, {"$ref": d_i+1}]}}) would make a tool definition
# exponential in the depth; the walk below counts the subschemas the inlined tool would hold.
MAX_INLINED = 10_000


class _Check:
    def __init__(self, root: JSONObject) -> None:
        defs = root.get("$defs")
        self.defs: JSONObject = defs if isinstance(defs, dict) else {}
        self.following: list[str] = []
        self.properties = 0
        self.inlined = 0

    def refuse(self, what: str, at: list[str | int]) -> SchemaProblem:
        where = ".".join(str(p) for p in at) or "(root)"
        return SchemaProblem(
            f"the tag_artifact tool cannot express {what} at {where} in OpenAI strict mode; "
            "remove it, or declare agentTool false",
            at,
        )

    def node(self, node: JSON, at: list[str | int], depth: int, root: bool = False) -> None:
        if not isinstance(node, dict):
            raise self.refuse(f"the boolean schema `{json_bool(node)}`", at)
        self.inlined += 1
        if self.inlined > MAX_INLINED:
            raise self.refuse(
                f"more than {MAX_INLINED:,} subschemas once its `$ref`s are inlined (references "
                "that fan out)",
                at,
            )
        for key in node:
            if key in _CARRIED or (root and key in _ROOT_ONLY):
                continue
            if key == "unevaluatedProperties" and node[key] is False:
                continue  # a closed object, which the tool's objects are anyway
            raise self.refuse(f"`{key}`", [*at, key])
        if not any(key in node for key in _TYPED_BY):
            raise self.refuse("a schema without `type` (strict mode needs one)", at)
        if depth > MAX_DEPTH:
            raise self.refuse(f"objects nested deeper than {MAX_DEPTH} levels", at)
        ref = node.get("$ref")
        if ref is not None:
            self.reference(ref, [*at, "$ref"], depth)
        for key in ("anyOf", "oneOf"):
            for i, sub in enumerate(node.get(key) or []):
                self.node(sub, [*at, key, i], depth)
        if "items" in node:
            self.node(node["items"], [*at, "items"], depth)
        self.object(node, at, depth)

    def object(self, node: JSONObject, at: list[str | int], depth: int) -> None:
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise self.refuse("an open object (`additionalProperties` other than false)", at)
        props = node.get("properties") or {}
        for name in node.get("required") or []:
            if name not in props:
                raise self.refuse(
                    f"`required` naming {name!r}, which is not in `properties`", [*at, "required"]
                )
        self.properties += len(props)
        if self.properties > MAX_PROPERTIES:
            raise self.refuse(f"more than {MAX_PROPERTIES} properties in all", at)
        for name, sub in props.items():
            self.node(sub, [*at, "properties", name], depth + 1)

    def reference(self, ref: JSON, at: list[str | int], depth: int) -> None:
        name = ref[len("#/$defs/") :] if isinstance(ref, str) and ref.startswith("#/$defs/") else ""
        if not name or "/" in name or name not in self.defs:
            raise self.refuse(
                f"`$ref` {ref!r} (the tool inlines only references of the form #/$defs/<name>)",
                at,
            )
        if name in self.following:
            return  # recursion: the tool keeps this one as a $ref
        self.following.append(name)
        try:
            self.node(self.defs[name], at, depth)
        finally:
            self.following.pop()


def json_bool(value: JSON) -> str:
    return "true" if value is True else "false" if value is False else repr(value)


def strict_problem(schema: JSONObject) -> None:
    """Refuse (``SchemaProblem``) a kind's JSON Schema that the tool cannot offer in strict mode."""
    try:
        _Check(schema).node(schema, [], DATA_DEPTH, root=True)
    except RecursionError:
        raise SchemaProblem(
            "the tag_artifact tool cannot inline references nested this deeply; declare "
            "agentTool false, or nest less",
            [],
        ) from None
