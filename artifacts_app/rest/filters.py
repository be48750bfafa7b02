"""The list's query parameters, validated by django-filter; the selector does the filtering.

The FilterSet is used for its form (types, choices, NUL refused) and for the schema; the rows come
from ``selectors.artifacts_page`` so that the keyset page and the access rule stay in one place.
"""

from __future__ import annotations

import functools
from typing import Any

import django_filters

from artifacts_app.errors import ArtifactError
from artifacts_app.models import Artifact
from artifacts_app.names import KEY_MAX, KIND_MAX, SESSION_ID_MAX
from artifacts_app.selectors import MAX_LIMIT


class PageFilter(django_filters.FilterSet):
    limit = django_filters.NumberFilter(min_value=1, max_value=MAX_LIMIT, method="_none")
    cursor = django_filters.CharFilter(max_length=512, method="_none")

    class Meta:
        model = Artifact
        fields: list[str] = []

    def _none(self, queryset: Any, name: str, value: Any) -> Any:
        return queryset


class ArtifactFilter(PageFilter):
    kind = django_filters.CharFilter(max_length=KIND_MAX, method="_none")
    sessionId = django_filters.CharFilter(max_length=SESSION_ID_MAX, method="_none")
    source = django_filters.ChoiceFilter(
        choices=[("host", "host"), ("model", "model")], method="_none"
    )
    key = django_filters.CharFilter(max_length=KEY_MAX, method="_none")
    # Their limits and grammar are the search's own (artifacts_app.search): its messages say more.
    q = django_filters.CharFilter(method="_none")
    where = django_filters.CharFilter(method="_none")


@functools.cache
def _form_class(filterset_class: Any) -> Any:
    # The FilterSet deep-copies its filters and builds a form class per instance (~1 ms a
    # request); the form class it builds is the same every time, so build it once.
    return filterset_class(queryset=Artifact.objects.none()).get_form_class()


def cleaned(filterset_class: Any, params: Any) -> dict[str, Any]:
    """The valid query parameters (missing ones None), or a 400 ``invalid_query`` envelope."""
    form = _form_class(filterset_class)(params)
    if not form.is_valid():
        errors = {name: [str(m) for m in msgs] for name, msgs in form.errors.items()}
        first = next(iter(errors))
        raise ArtifactError(
            "invalid_query",
            f"Query parameter `{first}`: {errors[first][0]}",
            {"fields": errors},
        )
    data = dict(form.cleaned_data)
    for name, value in data.items():
        if value == "":
            choices = getattr(form.fields[name], "choices", None)
            if choices and name in params:
                # ``source=`` names no source: refused as any value outside the enum (the schema's).
                allowed = ", ".join(f"`{choice}`" for choice, _ in choices if choice)
                message = f"Query parameter `{name}`: one of {allowed}."
                raise ArtifactError("invalid_query", message, {"fields": {name: [message]}})
            data[name] = None
    if data.get("limit") is not None:
        limit = data["limit"]
        if limit != int(limit):
            raise ArtifactError(
                "invalid_limit",
                f"`limit` is a whole number from 1 to {MAX_LIMIT}.",
                {"field": "limit"},
            )
        data["limit"] = int(limit)
    return data
