"""How the admin writes values: one sign for empty, times in ISO UTC with seconds, long values cut
with the whole on hover, and ids in URLs that are the ids."""

from __future__ import annotations

import datetime
from typing import Any

from django.contrib.admin.utils import quote, unquote
from django.db.models import Model
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from artifacts_app.previews import human_size

EMPTY = "—"  # the admin site's empty_value_display too (admin/__init__.py)


def iso(moment: datetime.datetime | None) -> str:
    """``2026-12-01T18:58:03Z``: the API's ISO form and zone, to the second."""
    if moment is None:
        return EMPTY
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_exact(moment: datetime.datetime) -> str:
    """As the API writes it (milliseconds, ``Z``)."""
    utc = moment.astimezone(datetime.UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def when(moment: datetime.datetime | None) -> SafeString | str:
    """A ``<time>`` reading ISO to the second, the exact instant on hover."""
    if moment is None:
        return EMPTY
    exact = iso_exact(moment)
    day, _, clock = iso(moment).partition("T")
    # <wbr>: a narrow column breaks the line after the "T", the text stays the ISO form.
    return format_html('<time datetime="{}" title="{}">{}T<wbr>{}</time>', exact, exact, day, clock)


def cut(value: str | None, chars: int) -> SafeString | str:
    """``value`` cut to ``chars`` characters with an ellipsis, the whole of it on hover."""
    if not value:
        return EMPTY
    if len(value) <= chars:
        return format_html('<span title="{}">{}</span>', value, value)
    return format_html('<span title="{}">{}…</span>', value, value[: chars - 1])


def elide(value: str | None, chars: int) -> SafeString | str:
    """``value`` kept to ``chars`` characters by cutting its **middle**: the head says what it is,
    the end tells it apart (``https://github.com/o…/pull/123457``). The whole on hover."""
    if not value:
        return EMPTY
    if len(value) <= chars:
        return format_html('<span title="{}">{}</span>', value, value)
    keep = chars - 1
    head = keep * 2 // 5
    tail = keep - head
    return format_html(
        '<span title="{}">{}<span class="elided" aria-hidden="true">…</span>{}</span>',
        value,
        value[:head],
        value[-tail:],
    )


PIN_MARK = (
    '<svg class="pin-mark" viewBox="0 0 16 16" width="12" height="12" role="img" '
    'aria-label="pinned"><title>pinned</title><path fill="currentColor" d="M5 1h6v1.5l-1 1V7l2.5 '
    '2.5V11H8.75v4h-1.5v-4H3.5V9.5L6 7V3.5l-1-1z"/></svg>'
)


def pin_mark(pinned: bool) -> SafeString | str:
    """A pushpin drawn in SVG (an emoji is an empty box in fonts without it), labelled."""
    return mark_safe(PIN_MARK) if pinned else ""  # noqa: S308 (a constant)


def size(n: int | None) -> str:
    return EMPTY if n is None else human_size(n)


class RawIdMixin:
    """Object ids in URLs as they are. Django's admin quotes a primary key for its URLs (``_``
    becomes ``_5F``), so ``art_3f…`` showed as ``art_5F3f…`` and an id copied from the address bar
    was not the id. Links here use the id itself; a quoted link (a bookmark, a page of Django's
    own) still opens: the lookup tries the segment as it is, then unquoted."""

    def _as_given(self, object_id: str) -> str:
        # Django's views unquote what they receive: quoting first hands the segment on unchanged.
        return quote(object_id)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        return super().change_view(  # type: ignore[misc]
            request, self._as_given(object_id), form_url, extra_context
        )

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> Any:
        return super().delete_view(request, self._as_given(object_id), extra_context)  # type: ignore[misc]

    def history_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> Any:
        return super().history_view(request, self._as_given(object_id), extra_context)  # type: ignore[misc]

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Model | None:
        candidates = [object_id]
        if unquote(object_id) != object_id:
            candidates.append(unquote(object_id))
        for candidate in candidates:
            found = super().get_object(request, candidate, from_field)  # type: ignore[misc]
            if found is not None:
                return found
        return None
