"""Keyset pages on the wire: ``{"results": [...], "next": <absolute URL> | null}``."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode


def next_url(request: Any, cursor: str | None) -> str | None:
    """The absolute URL of the next page: this request's query with ``cursor`` replaced."""
    if cursor is None:
        return None
    params = [(k, v) for k, v in request.GET.items() if k != "cursor"]
    params.append(("cursor", cursor))
    return request.build_absolute_uri(request.path + "?" + urlencode(params))
