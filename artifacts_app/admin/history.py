"""A record's history in the admin: its versions (pick any two to compare, download any), the diff
page, and pin/unpin. Reads go through ``selectors.versions`` (the diff REST serves), writes through
``services.artifact_pin``. Restore is an agent's act (API.md: agent keys only), so the admin shows
it as unavailable rather than offering it."""

from __future__ import annotations

import difflib
import json

from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from artifacts_app import services
from artifacts_app.admin.display import EMPTY, cut, iso, size, when
from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.jsontypes import JSON
from artifacts_app.models import Artifact
from artifacts_app.records import ArtifactRecord
from artifacts_app.selectors import versions

HISTORY_SHOWN = 50
RESTORE_UNAVAILABLE = (
    "Restore is an agent's act (API.md: POST …/versions/<n>/restore with the agent's key); "
    "the admin does not offer it."
)


def change_url(artifact_id: str) -> str:
    return reverse("admin:artifacts_app_artifact_change", args=[artifact_id])


def version_content_url(slug: str, artifact_id: str, number: int) -> str:
    return f"/{slug}/v1/artifacts/{artifact_id}/versions/{number}/content"


def history_table(obj: Artifact) -> SafeString:
    """The newest ``HISTORY_SHOWN`` versions with a pair of radios each (compare any two), a
    download per version, pin/unpin and restore (unavailable). The inputs belong to forms placed
    after the page's own (``form=`` attributes): the admin's change page is itself one form."""
    try:
        page = versions.versions_page(agent=obj.agent, artifact_id=obj.pk, limit=HISTORY_SHOWN)
    except NotFoundError:  # a record from before versions, never backfilled
        return format_html("<p>{}</p>", "No version of this record is kept.")
    records = page.records()
    newest = records[0].version
    older = records[1].version if len(records) > 1 else newest
    rows = format_html_join(
        "",
        "<tr><td>v{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        '<td><input type="radio" form="history-compare" name="from" value="{}" aria-label="from v{}"{}></td>'
        '<td><input type="radio" form="history-compare" name="to" value="{}" aria-label="to v{}"{}></td></tr>',
        (
            (
                r.version,
                when(r.updated_at),
                r.kind,
                cut(r.title, 40),
                cut(r.session_id, 16),
                r.source,
                _download(obj, r),
                r.version,
                r.version,
                mark_safe(" checked") if r.version == older else "",
                r.version,
                r.version,
                mark_safe(" checked") if r.version == newest else "",
            )
            for r in records
        ),
    )
    more = (
        format_html("<p>Only the newest {} versions are listed.</p>", HISTORY_SHOWN)
        if page.next_cursor
        else ""
    )
    pin_label = "Unpin" if obj.pinned else "Pin"
    return format_html(
        '<table class="artifact-history"><thead><tr><th>version</th><th>tagged</th><th>kind</th>'
        "<th>title</th><th>session</th><th>source</th><th>content</th><th>from</th><th>to</th>"
        "</tr></thead><tbody>{}</tbody></table>{}"
        '<p class="history-actions">'
        '<button type="submit" form="history-compare" class="button" id="history-compare-button"'
        "{}>Compare the two chosen versions</button> "
        '<button type="submit" form="artifact-pin" name="pinned" value="{}" class="button" '
        'id="pin-button">{}</button> '
        '<button type="button" class="button" id="restore-button" disabled title="{}">'
        "Restore (unavailable here)</button></p>"
        '<p class="help">{}</p>',
        rows,
        more,
        mark_safe(" disabled") if len(records) < 2 else "",
        "0" if obj.pinned else "1",
        pin_label,
        RESTORE_UNAVAILABLE,
        RESTORE_UNAVAILABLE,
    )


def _download(obj: Artifact, record: ArtifactRecord) -> SafeString | str:
    if record.content is None:
        return EMPTY
    return format_html(
        '<a href="{}" download>v{}</a> ({}, {})',
        version_content_url(obj.agent.slug, obj.pk, record.version),
        record.version,
        size(record.content.size),
        cut(record.content.content_type, 24),
    )


def _value(value: JSON) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def diff_view(
    model_admin: ModelAdmin[Artifact], request: HttpRequest, object_id: str
) -> HttpResponse:
    """Version ``to`` against version ``from`` (any two), as the REST diff answers it, written
    for a person: the fields that changed, the JSON Patch, and a line diff of the data."""
    obj = model_admin.get_object(request, object_id)
    if obj is None or not model_admin.has_view_permission(request, obj):
        return HttpResponseRedirect(reverse("admin:artifacts_app_artifact_changelist"))
    try:
        to = versions.check_number(request.GET.get("to", ""), field="to")
        from_ = versions.check_number(request.GET.get("from", ""), field="from")
        diff = versions.versions_diff(agent=obj.agent, artifact_id=obj.pk, number=to, from_=from_)
        old = versions.version_get(agent=obj.agent, artifact_id=obj.pk, number=from_)
        new = versions.version_get(agent=obj.agent, artifact_id=obj.pk, number=to)
    except ArtifactError as exc:
        messages.error(request, exc.message)
        return HttpResponseRedirect(change_url(obj.pk))
    old_lines = json.dumps(old.data, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    new_lines = json.dumps(new.data, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    lines = list(difflib.unified_diff(old_lines, new_lines, f"v{from_}", f"v{to}", lineterm=""))
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": f"{obj.pk}: v{from_} → v{to}",
        "artifact": obj,
        "artifact_url": change_url(obj.pk),
        "from_version": from_,
        "to_version": to,
        "from_when": iso(old.updated_at),
        "to_when": iso(new.updated_at),
        "fields": [
            (name, _value(c["from"]), _value(c["to"])) for name, c in diff["fields"].items()
        ],
        "ops": [
            (
                op["op"],
                op.get("path") or "/",
                _value(op["value"]) if "value" in op else EMPTY,
                op.get("from", EMPTY),
            )
            for op in diff["data"]
        ],
        "lines": [(_line_class(line), line) for line in lines[2:]],  # without the ---/+++ head
    }
    return TemplateResponse(request, "admin/artifacts_app/artifact/diff.html", context)


def _line_class(line: str) -> str:
    if line.startswith("@@"):
        return "hunk"
    return {"+": "added", "-": "removed"}.get(line[:1], "same")


def pin_view(
    model_admin: ModelAdmin[Artifact], request: HttpRequest, object_id: str
) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    obj = model_admin.get_object(request, object_id)
    if obj is None or not model_admin.has_view_permission(request, obj):
        return HttpResponseRedirect(reverse("admin:artifacts_app_artifact_changelist"))
    pinned = request.POST.get("pinned") == "1"
    try:
        services.artifact_pin(agent=obj.agent, artifact_id=obj.pk, pinned=pinned)
    except ArtifactError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{'Pinned' if pinned else 'Unpinned'} {obj.pk}.")
    return HttpResponseRedirect(change_url(obj.pk))
