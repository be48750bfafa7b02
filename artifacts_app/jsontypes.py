"""The JSON value, named once.

A record's ``data``, a kind's JSON Schema, an event's payload, a request's parsed body: values that
are genuinely any JSON (an object, an array, a string, a number, ``true``/``false`` or ``null``).
They are typed with these aliases, not with a bare ``Any``, so that a reader knows what may be
there and a grep finds every place that takes one. The alias stays ``Any`` underneath: the values
come from ``orjson.loads`` / ``json.loads`` and pydantic, and a recursive union would make every
reader narrow what the validators have already checked.
"""

from __future__ import annotations

from typing import Any, TypeAlias

JSON: TypeAlias = Any
"""Any JSON value."""

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object (its values any JSON)."""
