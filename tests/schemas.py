"""Kinds' JSON Schemas the tests of the schema limits share."""

from __future__ import annotations

from typing import Any


def fan_out(depth: int, keyword: str = "allOf", leaf: Any = None) -> dict[str, Any]:
    """d_i = {keyword: [{$ref d_i+1}, {$ref d_i+1}]}: 2^depth paths to the leaf (an integer unless
    given)."""
    defs: dict[str, Any] = {
        f"d{i}": {keyword: [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(depth)
    }
    defs[f"d{depth}"] = leaf if leaf is not None else {"type": "integer"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}
